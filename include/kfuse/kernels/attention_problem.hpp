#pragma once
// attention_problem: what a fused attention computes (plain data, no code of any arch: the
// graph's attention ops describe their problem with it without the kernel).
#include <algorithm>
#include <array>
#include <cmath>

#include "kfuse/types/elem.hpp"

namespace kfuse {

/// What an attention computes (plain data: shared by every arch's TUs).
struct attention_problem {
  index_t batch = 1, heads = 1, kv_heads = 1, q_len = 0, kv_len = 0, head_dim = 0;
  // Strides in elements over (batch, head, position); the head dimension is contiguous.
  std::array<index_t, 3> q_strides{}, k_strides{}, v_strides{}, out_strides{};
  // The additive bias over (batch, head, query, key); 0 broadcasts. Used when run() gets one.
  std::array<index_t, 4> bias_strides{};
  float scale = 0.f;  // 0: 1 / sqrt(head_dim)
  bool causal = false;

  /// Q, K, V and the output as dense [batch, position, head, head_dim] (a linear's output
  /// viewed as heads); K and V with kv_heads heads.
  static attention_problem bshd(index_t batch, index_t heads, index_t q_len, index_t kv_len,
                                index_t head_dim, index_t kv_heads = 0) {
    attention_problem p;
    p.batch = batch;
    p.heads = heads;
    p.kv_heads = kv_heads > 0 ? kv_heads : heads;
    p.q_len = q_len;
    p.kv_len = kv_len;
    p.head_dim = head_dim;
    p.q_strides = {q_len * heads * head_dim, head_dim, heads * head_dim};
    p.out_strides = p.q_strides;
    p.k_strides = {kv_len * p.kv_heads * head_dim, head_dim, p.kv_heads * head_dim};
    p.v_strides = p.k_strides;
    return p;
  }
  float scale_or_default() const {
    return scale != 0.f ? scale : 1.f / std::sqrt(float(std::max<index_t>(head_dim, 1)));
  }
};

}  // namespace kfuse
