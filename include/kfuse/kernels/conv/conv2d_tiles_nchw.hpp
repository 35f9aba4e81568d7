#pragma once
// conv2d's NCHW register tiles (kernels/conv/conv2d.hpp, path conv2d_nchw.hpp) and the operands
// they read: the channel-row tile over pixel panels (build_panel; bf16 and int8) and the f32 tile
// over padded input bands (build_band).
#include <algorithm>
#include <cstring>
#include <limits>

#include "kfuse/detail/checks.hpp"
#include "kfuse/detail/copy_short.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/workspace.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

template <class T>
KFUSE_INLINE T convert_to(float v) {
  return from_float<T>(v);
}

// -------------------------------------------------------------------------------- NCHW panel

/// One row (tap q of the group) of a pixel panel: np output pixels from flat pixel p0 on, as
/// values of TX (padding = pad); out must hold NR values (pixels past np are padding).
template <class TX>
KFUSE_INLINE void panel_row(const TX* KFUSE_RESTRICT xc, const conv_shape& s, index_t OW, index_t r,
                            index_t q, index_t p0, index_t np, index_t NR, TX pad,
                            TX* KFUSE_RESTRICT out) {
  index_t j = 0;
  while (j < np) {
    const index_t p = p0 + j, oh = p / OW, ow0 = p % OW;
    const index_t len = std::min(np - j, OW - ow0);
    const index_t ih = oh * s.stride_h - s.pad_top + r * s.dilation_h;
    TX* o = out + j;
    if (ih < 0 || ih >= s.h) {
      for (index_t t = 0; t < len; ++t) o[t] = pad;
    } else {
      const TX* row = xc + ih * s.w;
      // Valid t: 0 <= (ow0 + t) * sw - pl + q * dw < W.
      const index_t off = q * s.dilation_w - s.pad_left, sw = s.stride_w;
      const index_t first = ow0 * sw + off;  // iw of t = 0
      index_t lo = first >= 0 ? 0 : (-first + sw - 1) / sw;
      index_t hi = first >= s.w ? 0 : (s.w - first + sw - 1) / sw;
      lo = std::min(lo, len);
      hi = std::max(lo, std::min(hi, len));
      for (index_t t = 0; t < lo; ++t) o[t] = pad;
      if (sw == 1) {
        const TX* src = row + first;
        for (index_t t = lo; t < hi; ++t) o[t] = src[t];
      } else {
        const TX* src = row + first;
        for (index_t t = lo; t < hi; ++t) o[t] = src[t * sw];
      }
      for (index_t t = hi; t < len; ++t) o[t] = pad;
    }
    j += len;
  }
  for (; j < NR; ++j) out[j] = pad;
}

/// Rows [q0, q1) (multiples of G; rows past crs are zero) of the panel of pixels [p0, p0 + np)
/// for the group whose first input channel is xg, in the micro-kernel's order: group of G rows
/// kk holds, for each of the NR pixels, its G values. For int8, activations become s8
/// (x ^ 0x80 for u8) and vsum[j] collects their sum per pixel.
template <class PS, int G, int NR, class TX>
void build_panel(const TX* xg, const conv_shape& s, index_t OW, index_t q0, index_t q1, index_t p0,
                 index_t np, TX pad, PS* KFUSE_RESTRICT panel, std::int32_t* vsum) {
  const index_t rs = s.r * s.s, crs = (s.c / s.groups) * rs, hw = s.h * s.w;
  alignas(64) TX tmp[G][NR];
  for (index_t qq = q0; qq < q1; qq += G) {
    for (int g = 0; g < G; ++g) {
      const index_t q = qq + g;
      if (q >= crs) {
        for (int j = 0; j < NR; ++j) tmp[g][j] = TX{};
        if constexpr (std::is_integral_v<TX>) {
          // Padded rows must give v = 0 after the flip below.
          if constexpr (std::is_unsigned_v<TX>)
            for (int j = 0; j < NR; ++j) tmp[g][j] = TX(0x80);
        }
        continue;
      }
      const index_t c = q / rs, r = (q / s.s) % s.r, t = q % s.s;
      panel_row(xg + c * hw, s, OW, r, t, p0, np, NR, pad, tmp[g]);
    }
    PS* o = panel + (qq - q0) * NR;
    if constexpr (std::is_integral_v<TX>) {
      const std::uint8_t flip = std::is_unsigned_v<TX> ? 0x80 : 0;
      for (int j = 0; j < NR; ++j) {
        std::int32_t sum = 0;
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          const auto v = std::int8_t(std::uint8_t(tmp[g][j]) ^ flip);
          o[j * G + g] = v;
          sum += v;
        }
        vsum[j] += sum;
      }
    } else if constexpr (G == 1) {
      for (int j = 0; j < NR; ++j) o[j] = PS(to_float(tmp[0][j]));
    } else {
      for (int j = 0; j < NR; ++j)
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          if constexpr (std::is_same_v<PS, TX>)
            o[j * G + g] = tmp[g][j];
          else
            o[j * G + g] = convert_to<PS>(to_float(tmp[g][j]));
        }
    }
  }
}

/// What the NCHW tiles need to turn int8 accumulators into real values:
///   sum w (x - za) = acc - MK::weight_shift * vsum[pixel] + (shift - za) * wsum[channel]
struct nchw_int_args {
  const std::int32_t* vsum = nullptr;  // per pixel of the panel
  const std::int32_t* wsum = nullptr;  // per channel row of the tile
  std::int32_t bias = 0;               // shift - za
};

/// Rows output channels x NV vectors of pixels, accumulated over panel rows [0, kq) with weights
/// rows `w` (lda apart); `first` / Last as in gemm_tile (partial sums in `part`).
template <class MK, class V, int Rows, int NV, bool Last, class TW, class Out, class Ep>
KFUSE_INLINE void nchw_tile(const TW* KFUSE_RESTRICT w, index_t lda,
                            const typename MK::storage* KFUSE_RESTRICT panel, index_t kq,
                            Out* KFUSE_RESTRICT out, index_t ldo, index_t flat0, index_t ch0,
                            index_t np, const Ep& ep, float* part, const nchw_int_args& ia,
                            bool first) {
  constexpr int L = V::lanes, NR = NV * L;
  V acc[Rows][NV];
  start_tile(acc, part, first);
  MK::template accumulate<V, Rows, NV, NR>(acc, strided_rows<TW>{w, lda}, panel, 0, kq);
  if constexpr (!Last) {
    save_tile(acc, part);
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    if constexpr (MK::integer) {
      alignas(64) float bits[NR];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) simd::store(bits + j * L, acc[r][j]);
      const std::int32_t wterm = ia.bias * ia.wsum[r];
      for (int j = 0; j < NR; ++j)
        bits[j] =
            float(std::bit_cast<std::int32_t>(bits[j]) - MK::weight_shift * ia.vsum[j] + wterm);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = simd::load<V>(bits + j * L);
    }
  }
  store_tile<false>(acc, out, ldo, flat0, ldo, ch0, np, ep);
}

/// nchw_tile out of line, for the last channel tile's fewer rows (as gemm_tile_outlined).
template <class MK, class V, int Rows, int NV, bool Last, class TW, class Out, class Ep>
KFUSE_NOINLINE void nchw_tile_outlined(const TW* w, index_t lda, const typename MK::storage* panel,
                                       index_t kq, Out* out, index_t ldo, index_t flat0,
                                       index_t ch0, index_t np, const Ep& ep, float* part,
                                       const nchw_int_args& ia, bool first) {
  nchw_tile<MK, V, Rows, NV, Last>(w, lda, panel, kq, out, ldo, flat0, ch0, np, ep, part, ia,
                                   first);
}

/// Dispatches `rows` (1 <= rows <= Rows) to the tile of that many rows: MR rows inline, fewer
/// out of line.
template <class MK, class V, int NV, bool Last, int MR, int Rows = MR, class TW, class Out,
          class Ep>
KFUSE_INLINE void nchw_tile_rows(int rows, const TW* w, index_t lda,
                                 const typename MK::storage* panel, index_t kq, Out* out,
                                 index_t ldo, index_t flat0, index_t ch0, index_t np, const Ep& ep,
                                 float* part, const nchw_int_args& ia, bool first) {
  if constexpr (Rows >= 1) {
    if (rows != Rows)
      nchw_tile_rows<MK, V, NV, Last, MR, Rows - 1>(rows, w, lda, panel, kq, out, ldo, flat0, ch0,
                                                    np, ep, part, ia, first);
    else if constexpr (Rows == MR)
      nchw_tile<MK, V, Rows, NV, Last>(w, lda, panel, kq, out, ldo, flat0, ch0, np, ep, part, ia,
                                       first);
    else
      nchw_tile_outlined<MK, V, Rows, NV, Last>(w, lda, panel, kq, out, ldo, flat0, ch0, np, ep,
                                                part, ia, first);
  }
}

// ------------------------------------------------------------------------- NCHW f32 bands
// The f32 NCHW path reads its pixel operand straight from a per-thread copy of a band of input
// rows, padded and split into stride phases: plane (c, h phase, w phase) holds rows of Wph
// values. Output pixel (oh, ow) of the band then sits at "virtual pixel" v = (oh - oh0) * Wph + ow
// and tap (c, r, s) at a constant offset from v, so a run of consecutive v (across output rows)
// is one contiguous load per tap: no im2col. Lanes with ow >= OW are computed and dropped.

/// Rows output channels x NV vectors of virtual pixels [v0, v0 + NV * L).
/// Stores the first n lanes (a masked store where the target has one).
template <class Out, class V>
KFUSE_INLINE void store_n(Out* p, V v, int n) {
#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512
  if constexpr (std::is_same_v<Out, float> && V::lanes == 16 && sizeof(typename V::reg) == 64) {
    _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), std::bit_cast<__m512>(v.r));
    return;
  }
#endif
  simd::store_partial(p, v, n);
}

/// Taps [0, ntaps) of w / taps (callers offset both to a chunk); the tile starts from `part`
/// unless `first` and ends by saving to `part` unless `last`.
template <class V, int Rows, int NV, class Out, class Ep>
KFUSE_INLINE void band_tile(const float* KFUSE_RESTRICT w, index_t lda,
                            const float* KFUSE_RESTRICT band, const index_t* KFUSE_RESTRICT taps,
                            index_t ntaps, index_t v0, index_t nv_valid, index_t wph, index_t OW,
                            Out* KFUSE_RESTRICT out, index_t P, index_t flat_row0, index_t pix0,
                            index_t ch0, const Ep& ep, float* part, bool first, bool last) {
  constexpr int L = V::lanes, NR = NV * L;
  V acc[Rows][NV];
  start_tile(acc, part, first);
  const float* b0 = band + v0;
  for (index_t q = 0; q < ntaps; ++q) {
    const float* bq = b0 + taps[q];
    V b[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) b[j] = simd::load<V>(bq + j * L);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const V a(w[r * lda + q]);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = simd::fma(a, b[j], acc[r][j]);
    }
  }
  if (!last) {
    save_tile(acc, part);
    return;
  }
  // The tile's virtual pixels map to runs of output pixels (one run per output row it touches):
  // the epilogue runs on each run as loaded back from the register tile, then the run is stored.
  alignas(64) float tile[NR + 64];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) simd::store(tile + j * L, acc[r][j]);
    Out* o = out + r * P;
    const index_t flat_row = flat_row0 + r * P;
    index_t j = 0;
    while (j < nv_valid) {
      const index_t v = v0 + j, row = v / wph, ow = v % wph;
      // Without padding columns the virtual pixels are the output pixels: one run.
      const index_t len = wph == OW ? nv_valid - j : std::min(nv_valid - j, wph - ow);
      if (ow < OW) {
        const index_t run = wph == OW ? len : std::min(len, OW - ow);
        const index_t pix = pix0 + row * OW + ow;
        for (index_t t = 0; t < run; t += L) {
          const int n = int(std::min<index_t>(L, run - t));
          const lane_ctx<V, false> ctx{flat_row + pix + t, ch0 + r, n};
          // `tile` has slack: a whole vector can be loaded past the run.
          const V yv = apply(ep, simd::load<V>(tile + j + t), ctx);
          if (n == L)
            simd::store(o + pix + t, yv);
          else
            store_n(o + pix + t, yv, n);
        }
      }
      j += len;
    }
  }
}

/// band_tile out of line, for the last channel tile's fewer rows (as gemm_tile_outlined).
template <class V, int Rows, int NV, class Out, class Ep>
KFUSE_NOINLINE void band_tile_outlined(const float* w, index_t lda, const float* band,
                                       const index_t* taps, index_t ntaps, index_t v0,
                                       index_t nv_valid, index_t wph, index_t OW, Out* out,
                                       index_t P, index_t flat_row0, index_t pix0, index_t ch0,
                                       const Ep& ep, float* part, bool first, bool last) {
  band_tile<V, Rows, NV>(w, lda, band, taps, ntaps, v0, nv_valid, wph, OW, out, P, flat_row0, pix0,
                         ch0, ep, part, first, last);
}

/// Dispatches `rows` (1 <= rows <= Rows) to the tile of that many rows: MR rows inline, fewer
/// out of line.
template <class V, int NV, int MR, int Rows = MR, class Out, class Ep>
KFUSE_INLINE void band_tile_rows(int rows, const float* w, index_t lda, const float* band,
                                 const index_t* taps, index_t ntaps, index_t v0, index_t nv_valid,
                                 index_t wph, index_t OW, Out* out, index_t P, index_t flat_row0,
                                 index_t pix0, index_t ch0, const Ep& ep, float* part, bool first,
                                 bool last) {
  if constexpr (Rows >= 1) {
    if (rows != Rows)
      band_tile_rows<V, NV, MR, Rows - 1>(rows, w, lda, band, taps, ntaps, v0, nv_valid, wph, OW,
                                          out, P, flat_row0, pix0, ch0, ep, part, first, last);
    else if constexpr (Rows == MR)
      band_tile<V, Rows, NV>(w, lda, band, taps, ntaps, v0, nv_valid, wph, OW, out, P, flat_row0,
                             pix0, ch0, ep, part, first, last);
    else
      band_tile_outlined<V, Rows, NV>(w, lda, band, taps, ntaps, v0, nv_valid, wph, OW, out, P,
                                      flat_row0, pix0, ch0, ep, part, first, last);
  }
}

/// Geometry of one band of output rows [oh0, oh1) of the f32 NCHW path.
struct band_geometry {
  index_t wph, hb, plane, size;  // row width, rows per plane, plane and buffer sizes (+ slack)
  band_geometry(const conv_shape& s, index_t rows, index_t slack) {
    const index_t wp = s.w + s.pad_left + s.pad_right;
    wph = (wp + s.stride_w - 1) / s.stride_w;
    hb = rows + ((s.r - 1) * s.dilation_h) / s.stride_h + 1;
    plane = hb * wph;
    size = (s.c / s.groups) * s.stride_h * s.stride_w * plane + slack;
  }
};

/// Fills the band buffer for input channels [0, cg) of xg (a group's first channel).
template <class TX>
void build_band(const TX* xg, const conv_shape& s, const band_geometry& bg, index_t oh0,
                index_t rows, float* KFUSE_RESTRICT buf) {
  const index_t sh = s.stride_h, sw = s.stride_w, cg = s.c / s.groups;
  for (index_t c = 0; c < cg; ++c)
    for (index_t hph = 0; hph < sh; ++hph)
      for (index_t wph_i = 0; wph_i < sw; ++wph_i) {
        float* plane = buf + ((c * sh + hph) * sw + wph_i) * bg.plane;
        for (index_t hr = 0; hr < bg.hb; ++hr) {
          float* o = plane + hr * bg.wph;
          const index_t ih = (oh0 + hr) * sh + hph - s.pad_top;
          if (ih < 0 || ih >= s.h || hr >= rows + ((s.r - 1) * s.dilation_h) / sh + 1) {
            std::fill(o, o + bg.wph, 0.f);
            continue;
          }
          const TX* src = xg + (c * s.h + ih) * s.w;
          // Column t holds padded column t * sw + wph_i, input column that - pad_left.
          const index_t first = wph_i - s.pad_left;  // iw of t = 0
          index_t lo = first >= 0 ? 0 : (-first + sw - 1) / sw;
          index_t hi = first >= s.w ? 0 : (s.w - first + sw - 1) / sw;
          lo = std::min(lo, bg.wph);
          hi = std::max(lo, std::min(hi, bg.wph));
          for (index_t t = 0; t < lo; ++t) o[t] = 0.f;
          if (sw == 1)
            for (index_t t = lo; t < hi; ++t) o[t] = to_float(src[first + t]);
          else
            for (index_t t = lo; t < hi; ++t) o[t] = to_float(src[first + t * sw]);
          for (index_t t = hi; t < bg.wph; ++t) o[t] = 0.f;
        }
      }
}

}  // namespace detail

KFUSE_END_NAMESPACE
