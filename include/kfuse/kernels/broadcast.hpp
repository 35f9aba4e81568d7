#pragma once
// broadcast: out = x read through a strided view. Described in the output's memory order: out's
// dims and, per dim, x's stride (0 where x is broadcast, negative to read backwards), from a
// starting offset. One kernel for NumPy's broadcast (ONNX Expand), a change of memory order,
// transposes, slices with steps, splits and tiles. The innermost dim is a contiguous copy
// (stride 1), a fill (stride 0) or a strided gather.
#include <algorithm>
#include <cstring>
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"

KFUSE_BEGIN_NAMESPACE

struct broadcast_shape {
  static constexpr int max_rank = 6;
  int rank = 1;
  index_t dims[max_rank] = {1};        // the output, in memory order (last: contiguous)
  index_t in_strides[max_rank] = {0};  // x's stride (elements) along each output dim
  index_t in_offset = 0;               // x's element read for output element 0
  /// Rows of the output: all dims but the last.
  index_t rows() const noexcept {
    index_t r = 1;
    for (int d = 0; d + 1 < rank; ++d) r *= dims[d];
    return r;
  }
  index_t row_len() const noexcept { return dims[rank - 1]; }
};

namespace detail {
inline void check_broadcast_shape(const broadcast_shape& s) {
  if (s.rank < 1 || s.rank > broadcast_shape::max_rank)
    fail("broadcast", "rank " + std::to_string(s.rank) + " is not in [1, 6]");
  for (int d = 0; d < s.rank; ++d)
    if (s.dims[d] < 1)
      fail("broadcast", "dim " + std::to_string(d) + " has extent " + std::to_string(s.dims[d]));
}
}  // namespace detail

/// Output rows [r0, r1) of the broadcast (T: any trivially copyable element).
template <class T>
void broadcast_rows(const T* in, T* out, const broadcast_shape& s, index_t r0, index_t r1) {
  const index_t len = s.row_len(), inner = s.in_strides[s.rank - 1];
  for (index_t row = r0; row < r1; ++row) {
    // The row's coordinates (all dims but the last) -> x's offset.
    index_t rem = row, off = 0;
    for (int d = s.rank - 2; d >= 0; --d) {
      off += (rem % s.dims[d]) * s.in_strides[d];
      rem /= s.dims[d];
    }
    const T* src = in + s.in_offset + off;
    T* dst = out + row * len;
    if (inner == 1)
      std::memcpy(dst, src, std::size_t(len) * sizeof(T));
    else if (inner == 0)
      std::fill(dst, dst + len, *src);
    else
      for (index_t j = 0; j < len; ++j) dst[j] = src[j * inner];
  }
}

KFUSE_END_NAMESPACE
