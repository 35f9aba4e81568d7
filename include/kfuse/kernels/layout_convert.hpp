#pragma once
// Layout conversion nchw <-> nhwc, a multi-threaded kernel: per image, a transpose of
// [C][H*W] <-> [H*W][C], done in 16 x 16 tiles so both sides stream through L1.
#include <algorithm>

#include "kfuse/detail/checks.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {
/// dst[c][r] = src[r][c] for the rows [r_begin, r_end) of an R x C row-major matrix: 16 x 16
/// tiles through a local block (each source row's 16 values loaded together, each destination
/// row's 16 stored together; fixed trip counts the compiler unrolls), the edges element by
/// element. As loops with run-time bounds only, the compiled plan kept their counters on the
/// stack: 7.5 GB/s for a 32 x 112 x 112 f32 image, against ~35 in L2.
template <class T>
void transpose_rows(const T* KFUSE_RESTRICT src, T* KFUSE_RESTRICT dst, index_t R, index_t C,
                    index_t r_begin, index_t r_end) {
  constexpr int tile = 16;
  for (index_t r0 = r_begin; r0 < r_end; r0 += tile) {
    const index_t r1 = std::min(r_end, r0 + tile);
    for (index_t c0 = 0; c0 < C; c0 += tile) {
      const index_t c1 = std::min(C, c0 + tile);
      if (r1 - r0 == tile && c1 - c0 == tile) {
        T block[tile][tile];
        for (int r = 0; r < tile; ++r)
          for (int c = 0; c < tile; ++c) block[r][c] = src[(r0 + r) * C + c0 + c];
        for (int c = 0; c < tile; ++c)
          for (int r = 0; r < tile; ++r) dst[(c0 + c) * R + r0 + r] = block[r][c];
      } else {
        for (index_t c = c0; c < c1; ++c)
          for (index_t r = r0; r < r1; ++r) dst[c * R + r] = src[r * C + c];
      }
    }
  }
}

/// The same for an image of 1-4 channels (a network's RGB input), over pixels [p0, p1): pixel
/// by pixel with the channel loop unrolled, where the tiles spent more on loop control than on
/// the copy (3 x 224 x 224 to NHWC: 244 -> 69 us on Zen 3). ToNhwc: src [Ch][hw] -> dst
/// [hw][Ch]; else the reverse.
template <int Ch, bool ToNhwc, class T>
void transpose_few_channels(const T* KFUSE_RESTRICT src, T* KFUSE_RESTRICT dst, index_t hw,
                            index_t p0, index_t p1) {
  for (index_t p = p0; p < p1; ++p)
#pragma GCC unroll 4
    for (int c = 0; c < Ch; ++c) {
      if constexpr (ToNhwc)
        dst[p * Ch + c] = src[c * hw + p];
      else
        dst[c * hw + p] = src[p * Ch + c];
    }
}

template <bool ToNhwc, class T>
void transpose_few_channels(const T* src, T* dst, index_t ch, index_t hw, index_t p0, index_t p1) {
  switch (ch) {
    case 1:
      return transpose_few_channels<1, ToNhwc>(src, dst, hw, p0, p1);
    case 2:
      return transpose_few_channels<2, ToNhwc>(src, dst, hw, p0, p1);
    case 3:
      return transpose_few_channels<3, ToNhwc>(src, dst, hw, p0, p1);
    default:
      return transpose_few_channels<4, ToNhwc>(src, dst, hw, p0, p1);
  }
}

template <class T, class LIn, class LOut>
void convert_layout(tensor_view<const T, LIn> in, tensor_view<T, LOut> out, int threads) {
  constexpr std::string_view k = "convert_layout";
  if (!(in.dims == out.dims)) fail(k, "input and output shapes differ");
  const dims4 d = in.dims;
  const index_t n = numel(d);
  check_buffer(k, "input", in.data, n);
  check_buffer(k, "output", out.data, n);
  check_disjoint(k, "input", in.data, n, out.data, n);  // a transposition: never in place
  const index_t hw = d.h * d.w, image = d.c * hw;
  constexpr bool to_nhwc = std::is_same_v<LIn, nchw>;
  // Each image in blocks, split over threads (a batch of one image runs on every thread too):
  // few channels in chunks of 8192 pixels, the others in runs of the R x C matrix's rows that
  // hold >= 16 K values (whole 16-row tiles).
  const bool few = d.c <= 4;
  const index_t R = to_nhwc ? d.c : hw, C = to_nhwc ? hw : d.c;
  const index_t extent = few ? hw : R,
                block =
                    few ? 8192
                        : (std::max<index_t>(16, 16384 / std::max<index_t>(C, 1)) + 15) / 16 * 16;
  const index_t blocks = (extent + block - 1) / block;
  parallel_for(
      0, d.n * blocks, 1,
      [&](range r, int) {
        for (index_t i = r.begin; i < r.end; ++i) {
          const index_t b = i / blocks, p0 = (i % blocks) * block,
                        p1 = std::min(extent, p0 + block);
          if (few)
            transpose_few_channels<to_nhwc>(in.data + b * image, out.data + b * image, d.c, hw, p0,
                                            p1);
          else
            transpose_rows(in.data + b * image, out.data + b * image, R, C, p0, p1);
        }
      },
      threads);
}
}  // namespace detail

/// threads: how many of the default pool's threads it may use (0: all).
template <class T>
void nchw_to_nhwc(tensor_view<const T, nchw> in, tensor_view<T, nhwc> out, int threads = 0) {
  detail::convert_layout(in, out, threads);
}
template <class T>
void nhwc_to_nchw(tensor_view<const T, nhwc> in, tensor_view<T, nchw> out, int threads = 0) {
  detail::convert_layout(in, out, threads);
}

KFUSE_END_NAMESPACE
