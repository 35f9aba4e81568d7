#pragma once
// The depthwise kernel's NHWC tiles (kernels/conv/depthwise.hpp): lanes are channels; a register
// tile of PW output pixels x CV channel vectors is accumulated over the taps, one output row
// (every channel) at a time. 3x3 and 5x5 at stride 1 and 2 take the row tiles, which load each
// input pixel once per tap row.
#include <algorithm>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/kernels/conv/depthwise_geom.hpp"
#include "kfuse/kernels/register_tile.hpp"
#include "kfuse/kernels/window_checks.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Register tile sizes per vector width: PW output pixels x CV channel vectors.
template <int L>
struct dw_nhwc_config {
  // 6 x 2 on AVX-512 (12 accumulators, 6 weights): a tile's inputs, the weights and its outputs
  // stay within L1 for C = 256, where 8 x 2 measured ~15% slower.
  static constexpr int pw = L >= 16 ? 6 : 4;
  // The row tiles (3x3 / 5x5, stride 1 / 2): 7 pixels (14 accumulators and up to 10 weights on
  // AVX-512) fit MobileNet's and EfficientNet's 7 / 14 / 28 / 56-wide maps without an
  // overlapping last tile (3x3 on 14x14 and 7x7 maps 15-35% faster than 6).
  static constexpr int pw_rows = L >= 16 ? 7 : 4;
  static constexpr int cv = L == 1 ? 4 : 2;
  // A single-pixel tile (maps' borders; every pixel of a 5x5 on a 7x7 map) with cv vectors had
  // two FMA chains on AVX2, latency-bound: 4 vectors of channels per tile there.
  static constexpr int single_cv = 4;
};

/// PW consecutive output pixels (ow0..) of output row oh, channels c0.. (CV full vectors, or one
/// vector of `cn` lanes when Partial), taps r in [r0, r1), s in [s0, s1). Edge tiles (some
/// pixels' taps in the left / right padding) skip those taps pixel by pixel: a 5x5 on a 7x7 map
/// ran every pixel as a single-pixel tile, two loads per FMA.
template <class V, int PW, int CV, bool Partial, bool Edge = false, class T, class Out, class Ep>
KFUSE_INLINE void dw_nhwc_tile(const T* KFUSE_RESTRICT img, const float* KFUSE_RESTRICT wp,
                               index_t cpad, const window_geom& g, index_t oh, index_t ow0,
                               index_t c0, int cn, index_t r0, index_t r1, index_t s0, index_t s1,
                               float zp, Out* KFUSE_RESTRICT out, index_t out_flat, const Ep& ep) {
  constexpr int L = V::lanes;
  V acc[PW][CV];
  start_tile(acc, nullptr, true);  // (register_tile.hpp)
  const index_t C = g.c, ih0 = oh * g.sh - g.pt, iw0 = ow0 * g.sw - g.pl;
  const index_t px_step = g.sw * C, tap_step = g.dw * C;
  for (index_t r = r0; r < r1; ++r) {
    // Offsets stay integers until a tap is inside the input (no pointer before the buffer).
    const index_t row = ((ih0 + r * g.dh) * g.w + iw0) * C + c0;
    const float* wr = wp + r * g.s * cpad + c0;
    for (index_t s = s0; s < s1; ++s) {
      V wv[CV];
#pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) wv[v] = simd::load<V>(wr + s * cpad + v * L);
#pragma GCC unroll 16
      for (int p = 0; p < PW; ++p) {
        if constexpr (Edge) {
          const index_t col = iw0 + p * g.sw + s * g.dw;
          if (col < 0 || col >= g.w) continue;
        }
        const T* px = img + (row + s * tap_step + p * px_step);
#pragma GCC unroll 8
        for (int v = 0; v < CV; ++v)
          acc[p][v] = simd::fma(dw_load<V, Partial>(px + v * L, cn, zp), wv[v], acc[p][v]);
      }
    }
  }
  // Pixel p's channels go to out_flat + p * C: a tile row per pixel.
  store_tile<true, !std::is_same_v<T, float>>(acc, out + out_flat, C, out_flat, C, c0,
                                              Partial ? cn : CV * L, ep);
}

/// The KxK (3 or 5), stride SW (1 or 2), dilation 1 tile: for each tap row, the SW * (PW - 1) +
/// K input pixels of the tile are loaded once and each feeds the (up to) K / SW output pixels
/// that use it (the generic tile loads each pixel once per tap: 1.2 loads per FMA, load-bound).
/// Edge tiles (some of those pixels in the left / right padding) skip the padded pixels;
/// interior tiles have no branch at all.
template <class V, int K, int SW, int PW, int CV, bool Partial, bool Edge, class T, class Out,
          class Ep>
KFUSE_INLINE void dw_nhwc_tile_rows(const T* KFUSE_RESTRICT img, const float* KFUSE_RESTRICT wp,
                                    index_t cpad, const window_geom& g, index_t oh, index_t ow0,
                                    index_t c0, int cn, index_t r0, index_t r1, float zp,
                                    Out* KFUSE_RESTRICT out, index_t out_flat, const Ep& ep) {
  constexpr int L = V::lanes;
  V acc[PW][CV];
  start_tile(acc, nullptr, true);  // (register_tile.hpp)
  const index_t C = g.c, ih0 = oh * g.sh - g.pt, iw0 = ow0 * SW - g.pl;
  for (index_t r = r0; r < r1; ++r) {
    const index_t row = ((ih0 + r) * g.w + iw0) * C + c0;
    const float* wr = wp + r * K * cpad + c0;
    V wv[K][CV];
#pragma GCC unroll 8
    for (int s = 0; s < K; ++s)
#pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) wv[s][v] = simd::load<V>(wr + s * cpad + v * L);
#pragma GCC unroll 16
    for (int j = 0; j < SW * (PW - 1) + K; ++j) {
      if (Edge && (iw0 + j < 0 || iw0 + j >= g.w)) continue;
#pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) {
        V x = dw_load<V, Partial>(img + (row + j * C + v * L), cn, zp);
        dw_in_register(x);
#pragma GCC unroll 16
        for (int p = 0; p < PW; ++p) {  // pixel p reads input j through tap s = j - SW * p
          const int s = j - SW * p;
          if (s >= 0 && s < K) acc[p][v] = simd::fma(x, wv[s][v], acc[p][v]);
        }
      }
    }
  }
  // Pixel p's channels go to out_flat + p * C: a tile row per pixel.
  store_tile<true, !std::is_same_v<T, float>>(acc, out + out_flat, C, out_flat, C, c0,
                                              Partial ? cn : CV * L, ep);
}

/// One output row (n, oh), channels [c_begin, c_end) (a channel group: every channel, or a
/// multiple of CV vectors but the last). For each pixel tile, every channel block (CV vectors,
/// then single vectors, then the last vector placed to end at C, overlapping the one before
/// with identical recomputed values, or a partial one when C is less than a vector): the tile's
/// input pixels are contiguous runs of C values, so the channel loop streams through them (a
/// channel block outside the pixel loop would stride by C floats and, for power-of-two C, hit
/// only a few L1 sets). The last pixel tile likewise ends at the row's end.
template <class V, int FastK, int FastS, class T, class Out, class Ep>
KFUSE_INLINE void dw_nhwc_row(const T* in, const float* wp, index_t cpad, const window_geom& g,
                              index_t n, index_t oh, float zp, Out* out, const Ep& ep,
                              index_t c_begin, index_t c_end) {
  using cfg = dw_nhwc_config<V::lanes>;
  constexpr int L = V::lanes, CV = cfg::cv;
  constexpr int PW = FastK ? cfg::pw_rows : cfg::pw;
  const index_t C = g.c;
  const T* img = in + n * g.h * g.w * C;
  index_t r0, r1;
  valid_taps(oh * g.sh - g.pt, g.dh, g.r, g.h, r0, r1);
  const index_t row_flat = ((n * g.oh + oh) * g.ow) * C;
  // kernel(NV, Partial, c0, cn) runs one channel block of the current pixel tile.
  // Wide blocks first (single-pixel tiles: CVW vectors, so enough FMA chains are in flight
  // without the pixels), then CV vectors, then single ones.
  auto channels_from = [&]<int CVW>(auto&& kernel) {
    index_t c0 = c_begin;
    if constexpr (CVW > CV)
      for (; c0 + CVW * L <= c_end; c0 += CVW * L)
        kernel.template operator()<CVW, false>(c0, CVW * L);
    for (; c0 + CV * L <= c_end; c0 += CV * L) kernel.template operator()<CV, false>(c0, CV * L);
    if constexpr (CV > 1)
      for (; c0 + L <= c_end; c0 += L) kernel.template operator()<1, false>(c0, L);
    if (c0 < c_end) {  // only in the last channel group (the others end on a block boundary)
      if (C >= L)
        kernel.template operator()<1, false>(C - L, L);
      else if constexpr (FastK == 0)  // the row tiles take C >= L (fewer instantiations)
        kernel.template operator()<1, true>(c0, int(C - c0));
    }
  };
  auto channels = [&](auto&& kernel) { channels_from.template operator()<CV>(kernel); };
  auto single = [&](index_t ow) {
    index_t s0, s1;
    valid_taps(ow * g.sw - g.pl, g.dw, g.s, g.w, s0, s1);
    channels_from.template operator()<cfg::single_cv>(
        [&]<int NV, bool Partial>(index_t c0, int cn) {
          dw_nhwc_tile<V, 1, NV, Partial>(img, wp, cpad, g, oh, ow, c0, cn, r0, r1, s0, s1, zp, out,
                                          row_flat + ow * C + c0, ep);
        });
  };
  if (g.ow < PW) {  // rows narrower than a tile: pixel by pixel
    for (index_t ow = 0; ow < g.ow; ++ow) single(ow);
    return;
  }
  if constexpr (FastK != 0) {  // row tiles
    for (index_t ow = 0;; ow += PW) {
      const index_t at = std::min(ow, g.ow - PW);
      const index_t first = at * FastS - g.pl, last = first + FastS * (PW - 1) + FastK - 1;
      const bool edge = first < 0 || last >= g.w;
      channels([&]<int NV, bool Partial>(index_t c0, int cn) {
        if (edge)
          dw_nhwc_tile_rows<V, FastK, FastS, PW, NV, Partial, true>(
              img, wp, cpad, g, oh, at, c0, cn, r0, r1, zp, out, row_flat + at * C + c0, ep);
        else
          dw_nhwc_tile_rows<V, FastK, FastS, PW, NV, Partial, false>(
              img, wp, cpad, g, oh, at, c0, cn, r0, r1, zp, out, row_flat + at * C + c0, ep);
      });
      if (at == g.ow - PW) break;
    }
  } else {
    // Output columns whose every tap is inside the input: [ow_a, ow_b): tiles of PW pixels there
    // (the last one ends at ow_b), single pixels at the borders. Where that interior is narrower
    // than a tile (a 5x5 on a 7x7 map ran every pixel alone), tiles over the whole row instead,
    // edge tiles skipping the padded taps: 5x5 layers with 7x7 outputs 18-22% faster; on 14x14
    // and 28x28 maps the whole-row tiles' extra overlap cost up to 11%, so those keep the borders
    // as single pixels.
    const index_t ow_a = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
    const index_t reach = g.w - 1 + g.pl - (g.s - 1) * g.dw;  // ow * sw <= reach
    const index_t ow_b = std::max(ow_a, reach < 0 ? 0 : std::min(g.ow, reach / g.sw + 1));
    const bool whole_row = ow_b - ow_a < PW;
    const index_t t0 = whole_row ? 0 : ow_a, t1 = whole_row ? g.ow : ow_b;
    for (index_t ow = 0; ow < t0; ++ow) single(ow);
    for (index_t ow = t0;; ow += PW) {
      const index_t at = std::min(ow, t1 - PW);
      const bool edge = at < ow_a || at + PW > ow_b;
      channels([&]<int NV, bool Partial>(index_t c0, int cn) {
        if (edge)
          dw_nhwc_tile<V, PW, NV, Partial, true>(img, wp, cpad, g, oh, at, c0, cn, r0, r1, 0, g.s,
                                                 zp, out, row_flat + at * C + c0, ep);
        else
          dw_nhwc_tile<V, PW, NV, Partial>(img, wp, cpad, g, oh, at, c0, cn, r0, r1, 0, g.s, zp,
                                           out, row_flat + at * C + c0, ep);
      });
      if (at == t1 - PW) break;
    }
    for (index_t ow = t1; ow < g.ow; ++ow) single(ow);
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
