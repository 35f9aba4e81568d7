#pragma once
// batched_gemm_problem: what a batched_gemm computes (plain data, no code of any arch: the
// graph's shape inference and the ONNX importer use it without the kernels).
#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>

#include "kfuse/types/elem.hpp"

namespace kfuse {

/// What a batched_gemm computes (plain data: shared by every arch's TUs).
struct batched_gemm_problem {
  static constexpr int max_batch_rank = 4;
  index_t m = 0, k = 0, n = 0;
  int batch_rank = 0;  // 0: a single matrix product
  std::array<index_t, max_batch_rank> batch{};
  // Strides in elements; a batch stride of 0 broadcasts that operand along the dimension.
  std::array<index_t, max_batch_rank> a_batch{}, b_batch{}, c_batch{};
  index_t a_row = 0, a_col = 1;  // A[m][k]
  index_t b_row = 0, b_col = 1;  // B[k][n]
  index_t c_row = 0;             // C[m][n], columns contiguous

  /// Dense row-major operands [batch..., M, K] . [batch..., K, N] -> [batch..., M, N]; with
  /// b_transposed B is given as [batch..., N, K] (attention's K).
  static batched_gemm_problem dense(std::initializer_list<index_t> batch_dims, index_t M, index_t K,
                                    index_t N, bool b_transposed = false) {
    batched_gemm_problem p;
    p.m = M;
    p.k = K;
    p.n = N;
    p.batch_rank = int(std::min<std::size_t>(batch_dims.size(), max_batch_rank));
    std::copy_n(batch_dims.begin(), p.batch_rank, p.batch.begin());
    p.a_row = K;
    p.b_row = b_transposed ? 1 : N;
    p.b_col = b_transposed ? K : 1;
    p.c_row = N;
    index_t sa = M * K, sb = K * N, sc = M * N;
    for (int i = p.batch_rank - 1; i >= 0; --i) {
      const std::size_t d = std::size_t(i);
      p.a_batch[d] = sa;
      p.b_batch[d] = sb;
      p.c_batch[d] = sc;
      sa *= p.batch[d];
      sb *= p.batch[d];
      sc *= p.batch[d];
    }
    return p;
  }
  /// Element offset of matrix b (row-major over the batch dims) in an operand with these strides.
  index_t batch_offset(const std::array<index_t, max_batch_rank>& strides, index_t b) const {
    index_t off = 0;
    for (int i = batch_rank - 1; i >= 0; --i) {
      const std::size_t d = std::size_t(i);
      off += (b % batch[d]) * strides[d];
      b /= batch[d];
    }
    return off;
  }
  /// The number of matrix products (the product of the batch dims).
  index_t batches() const noexcept {
    index_t r = 1;
    for (int i = 0; i < batch_rank; ++i) r *= batch[std::size_t(i)];
    return r;
  }
};

}  // namespace kfuse
