#pragma once
// Layout conversion nchw <-> nhwc, a multi-threaded kernel: per image, a transpose of
// [C][H*W] <-> [H*W][C], done in cache-sized square tiles so both sides stream through L1.
#include <algorithm>

#include "kfuse/detail/checks.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/thread_pool.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {
// dst[c][r] = src[r][c] for an R x C row-major matrix; tiles of 16 rows keep the 16 source
// rows in L1 while the compiler vectorizes the contiguous destination writes.
template <class T>
void transpose_image(const T* KFUSE_RESTRICT src, T* KFUSE_RESTRICT dst, index_t R, index_t C) {
  constexpr index_t tile = 16;
  for (index_t r0 = 0; r0 < R; r0 += tile) {
    const index_t r1 = std::min(R, r0 + tile);
    for (index_t c0 = 0; c0 < C; c0 += tile) {
      const index_t c1 = std::min(C, c0 + tile);
      for (index_t c = c0; c < c1; ++c)
        for (index_t r = r0; r < r1; ++r) dst[c * R + r] = src[r * C + c];
    }
  }
}

template <class T, class LIn, class LOut>
void convert_layout(tensor_view<const T, LIn> in, tensor_view<T, LOut> out) {
  constexpr std::string_view k = "convert_layout";
  if (!(in.dims == out.dims)) fail(k, "input and output shapes differ");
  const dims4 d = in.dims;
  const index_t n = numel(d);
  check_buffer(k, "input", in.data, n);
  check_buffer(k, "output", out.data, n);
  check_disjoint(k, "input", in.data, n, out.data, n);  // a transposition: never in place
  const index_t hw = d.h * d.w, image = d.c * hw;
  parallel_for(0, d.n, 1, [&](range r, int) {
    for (index_t b = r.begin; b < r.end; ++b) {
      if constexpr (std::is_same_v<LIn, nchw>)
        transpose_image(in.data + b * image, out.data + b * image, d.c, hw);
      else
        transpose_image(in.data + b * image, out.data + b * image, hw, d.c);
    }
  });
}
}  // namespace detail

template <class T>
void nchw_to_nhwc(tensor_view<const T, nchw> in, tensor_view<T, nhwc> out) {
  detail::convert_layout(in, out);
}
template <class T>
void nhwc_to_nchw(tensor_view<const T, nhwc> in, tensor_view<T, nchw> out) {
  detail::convert_layout(in, out);
}

KFUSE_END_NAMESPACE
