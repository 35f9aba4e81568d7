#pragma once
// Graph adapters of the row-wise ops: softmax (any axis, any layout), layer_norm and rms_norm
// over the last axis with their affine parameters and any fused stage chain in the epilogue.
#include <vector>

#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/norm.hpp"
#include "kfuse/kernels/softmax.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct softmax_params {
  index_t shape[8] = {};  // memory order (nhwc: N, H, W, C)
  int rank = 0;
  int axis = -1;  // memory axis
};

template <class A, class B, class T>
void softmax_cmd(const command& c) {
  const auto& p = *static_cast<const softmax_params*>(c.params);
  softmax<A, B>(static_cast<const T*>(c.in[0]), static_cast<T*>(c.out),
                std::span<const index_t>(p.shape, std::size_t(p.rank)), p.axis, softmax_options{},
                run_options{c.threads});
}

struct norm_params {
  index_t rows = 0, cols = 0;
  std::vector<float> gamma, beta;  // empty: none
  float eps = 1e-5f;
  chain_list stages;
};

template <class A, class B, bool Rms, class T>
void norm_cmd(const command& c) {
  const auto& p = *static_cast<const norm_params*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                  static_cast<const float*>(c.in[3])}};
  const auto* in = static_cast<const T*>(c.in[0]);
  auto* out = static_cast<T*>(c.out);
  if constexpr (Rms)
    rms_norm<A, B>(in, out, p.rows, p.cols, rms_norm_params{p.gamma, p.eps}, epilogue<chain>{ch},
                   run_options{c.threads});
  else
    layer_norm<A, B>(in, out, p.rows, p.cols, layer_norm_params{p.gamma, p.beta, p.eps},
                     epilogue<chain>{ch}, run_options{c.threads});
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
