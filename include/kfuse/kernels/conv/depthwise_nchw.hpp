#pragma once
// The depthwise kernel's NCHW tiles (kernels/conv/depthwise.hpp): lanes are output pixels of one
// row of one channel (the channel's weight is broadcast). The rows a block of output rows reads
// are converted once into a zero-padded f32 scratch, split into stride phases so that every tap
// is a contiguous load; a tile of RH output rows x WV vectors is accumulated from it, and the
// 3x3 stride-1 case loads each scratch vector once for the three output rows it feeds.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/conv/depthwise_geom.hpp"
#include "kfuse/kernels/register_tile.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Register tile sizes per vector width: RH output rows x WV vectors of output pixels.
template <int L>
struct dw_nchw_config {
  static constexpr int rh = L >= 16 ? 4 : 2;
  static constexpr int wv = L == 1 ? 4 : 2;
};

/// The zero-padded f32 copy of the input rows one block of output rows reads. Row j holds
/// input row ih_lo + j as `sw` phases of `pitch` floats: phase k, element e = padded column
/// e * sw + k, so tap s of output column ow is element ow + (s * dw) / sw of phase (s * dw) % sw.
struct dw_scratch {
  float* data;
  index_t ih_lo, rows, pitch, row_stride;  // row_stride = sw * pitch
};

/// One thread's scratch slot (from the caller's workspace): a header that remembers the
/// geometry of its last fill, then the rows. Stride-1 fills of the same geometry (every plane
/// of a call, and the next call of the same step) only rewrite the data columns: the padding
/// is still zero. The magic tells a slot this kernel filled from fresh or foreign memory.
inline constexpr index_t dw_slot_magic = 0x6b66757365647721;  // "kfusedw!"
inline constexpr index_t dw_slot_header_floats = 32;          // 128 bytes: 9 keys, aligned
/// The rows (and their pitch) a block of output rows [oh_a, oh_b) reads.
template <int L>
inline dw_scratch dw_scratch_geometry(const window_geom& g, index_t oh_a, index_t oh_b) {
  dw_scratch sc{};
  // Room for the widest tap of the last vector, plus (stride 1) one vector past the row.
  // Rows start on a vector boundary (64 B on AVX-512): tap 0 loads do not split cache lines.
  sc.pitch =
      ((g.ow + L - 1) / L * L + ((g.s - 1) * g.dw) / g.sw + 1 + (g.sw == 1 ? L : 0) + L - 1) / L *
      L;
  sc.row_stride = g.sw * sc.pitch;
  sc.ih_lo = oh_a * g.sh - g.pt;
  sc.rows = (oh_b - 1 - oh_a) * g.sh + (g.r - 1) * g.dh + 1;
  return sc;
}
/// Floats of one slot: header, the rows of the biggest block (a whole plane), and one vector
/// of slack (whole-vector stores of the last row may run past it).
template <int L>
inline std::size_t dw_slot_floats(const window_geom& g) {
  const dw_scratch sc = dw_scratch_geometry<L>(g, 0, g.oh);
  return std::size_t(dw_slot_header_floats + sc.rows * sc.row_stride + 16);
}

/// Converts the rows of sc from plane (n, c) into the scratch. Stride 1 with `zeroed` (the
/// padding already zero): whole-vector copies of each row (a last vector that stays inside the
/// input buffer is loaded whole) followed by one zero vector over the columns past the row, so
/// the padding is zero again; the pitch leaves a vector of room for that store. Otherwise every
/// element is written.
template <class V, class T>
KFUSE_INLINE void dw_fill_scratch(const T* plane, const T* in_end, const window_geom& g,
                                  const dw_scratch& sc, float zp, bool zeroed) {
  constexpr int L = V::lanes;
  const V zero(0.f);
  // Per stride phase, the elements inside the input row (computed once, not per row).
  auto bounds = [&](index_t k, index_t& lo, index_t& hi) {
    lo = std::min(sc.pitch, std::max<index_t>(0, (g.pl - k + g.sw - 1) / g.sw));
    const index_t last = g.w - 1 + g.pl - k;  // e * sw <= last
    hi = last < 0 ? lo : std::max(lo, std::min(sc.pitch, last / g.sw + 1));
  };
  constexpr index_t max_phases = 16;
  index_t phase_lo[max_phases] = {}, phase_hi[max_phases] = {};
  if (g.sw > 1 && g.sw <= max_phases)
    for (index_t k = 0; k < g.sw; ++k) bounds(k, phase_lo[k], phase_hi[k]);
  for (index_t j = 0; j < sc.rows; ++j) {
    float* dst = sc.data + j * sc.row_stride;
    const index_t ih = sc.ih_lo + j;
    if (ih < 0 || ih >= g.h) {
      if (!zeroed) std::fill(dst, dst + sc.row_stride, 0.f);
      continue;
    }
    const T* src = plane + ih * g.w;
    if (g.sw == 1) {
      // pitch > pl + W + L: the row, and one vector past it, fit.
      if (!zeroed) std::fill(dst, dst + sc.row_stride, 0.f);
      float* d = dst + g.pl;
      index_t x = 0;
      for (; x + L <= g.w; x += L) simd::store(d + x, dw_load<V, false>(src + x, L, zp));
      if (x < g.w) {
        if (src + x + L <= in_end)
          simd::store(d + x, dw_load<V, false>(src + x, L, zp));
        else
          simd::store(d + x, dw_load<V, true>(src + x, int(g.w - x), zp));
        simd::store(d + g.w, zero);
      }
    } else {
      // Phase k holds input columns e * sw + k - pl: elements [lo[k], hi[k]) are in the row.
      const float sub = std::is_integral_v<T> ? zp : 0.f;
      for (index_t k = 0; k < g.sw; ++k) {
        float* ph = dst + k * sc.pitch;
        index_t e_lo, e_hi;
        if (g.sw <= max_phases)
          e_lo = phase_lo[k], e_hi = phase_hi[k];
        else
          bounds(k, e_lo, e_hi);
        std::fill(ph, ph + e_lo, 0.f);
        const index_t iw0 = e_lo * g.sw + k - g.pl;
        if (g.sw == 2)  // a constant stride the compiler vectorizes (permutes)
          for (index_t e = e_lo; e < e_hi; ++e) ph[e] = to_float(src[iw0 + 2 * (e - e_lo)]) - sub;
        else
          for (index_t e = e_lo, iw = iw0; e < e_hi; ++e, iw += g.sw)
            ph[e] = to_float(src[iw]) - sub;
        std::fill(ph + e_hi, ph + sc.pitch, 0.f);
      }
    }
  }
}

/// Column of vector v of a tile at ow0: the last vector of a row ends at the row's end
/// (overlapping the one before it) when the row holds at least one vector.
template <int L>
KFUSE_INLINE index_t dw_col(const window_geom& g, index_t ow0, int v) {
  return g.ow >= L ? std::min<index_t>(ow0 + v * L, g.ow - L) : ow0;
}

/// Epilogue and store of one NCHW tile. A row shorter than a vector is stored whole when the
/// vector stays inside this block's output (flat_end): its extra lanes land on the next row,
/// which is computed and stored after it by the same thread.
template <class V, int RH, int WV, class Out, class Ep>
KFUSE_INLINE void dw_nchw_store(V (&acc)[RH][WV], const window_geom& g, index_t c, index_t oh0,
                                index_t ow0, Out* out, index_t plane_flat, index_t flat_end,
                                const Ep& ep) {
  constexpr int L = V::lanes;
  if (ow0 + WV * L <= g.ow) {
    // Contiguous columns (all but a row's last, clamped tile): the shared tile store, which
    // runs an out-of-line epilogue (the graph's chain) once per stage per tile. Row i is output
    // row oh0 + i of channel c.
    const index_t flat0 = plane_flat + oh0 * g.ow + ow0;
    return store_tile<false>(acc, out + flat0, g.ow, flat0, g.ow, c, WV * L, ep, 0);
  }
#pragma GCC unroll 8
  for (int i = 0; i < RH; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < WV; ++v) {
      const index_t ow = dw_col<L>(g, ow0, v);
      const index_t flat = plane_flat + (oh0 + i) * g.ow + ow;
      if (g.ow >= L || flat + L <= flat_end) {
        const lane_ctx<V, false> ctx{flat, c, L};
        simd::store(out + flat, apply(ep, acc[i][v], ctx));
      } else {
        const int n = int(g.ow);
        const lane_ctx<V, false> ctx{flat, c, n};
        simd::store_partial(out + flat, apply(ep, acc[i][v], ctx), n);
      }
    }
}

/// RH output rows (oh0..) x WV vectors (ow0..) of channel c, any kernel, stride, dilation.
template <class V, int RH, int WV, class Out, class Ep>
KFUSE_INLINE void dw_nchw_tile(const dw_scratch& sc, const float* KFUSE_RESTRICT wc,
                               const window_geom& g, index_t c, index_t oh0, index_t ow0, Out* out,
                               index_t plane_flat, index_t flat_end, const Ep& ep) {
  constexpr int L = V::lanes;
  V acc[RH][WV];
  start_tile(acc, nullptr, true);  // (register_tile.hpp)
  const float* base = sc.data + (oh0 * g.sh - g.pt - sc.ih_lo) * sc.row_stride;
  const index_t row_step = g.sh * sc.row_stride;
  for (index_t r = 0; r < g.r; ++r) {
    const float* rowr = base + r * g.dh * sc.row_stride;
    // Tap s sits in phase (s * dw) % sw at element (s * dw) / sw (stepped, no division).
    for (index_t s = 0, k = 0, q = 0; s < g.s; ++s) {
      const float* tap = rowr + k * sc.pitch + q;
      for (k += g.dw; k >= g.sw; k -= g.sw) ++q;
      const V w(wc[r * g.s + s]);
#pragma GCC unroll 8
      for (int i = 0; i < RH; ++i)
#pragma GCC unroll 8
        for (int v = 0; v < WV; ++v)
          acc[i][v] =
              simd::fma(simd::load<V>(tap + i * row_step + dw_col<L>(g, ow0, v)), w, acc[i][v]);
    }
  }
  dw_nchw_store<V, RH, WV>(acc, g, c, oh0, ow0, out, plane_flat, flat_end, ep);
}

/// The 3x3, stride 1, dilation 1 fast path: the nine weights stay in registers and each loaded
/// scratch vector feeds every output row of the tile that uses it.
template <class V, int RH, int WV, class Out, class Ep>
KFUSE_INLINE void dw_nchw_tile3x3(const dw_scratch& sc, const V (&w)[9], const window_geom& g,
                                  index_t c, index_t oh0, index_t ow0, Out* out, index_t plane_flat,
                                  index_t flat_end, const Ep& ep) {
  constexpr int L = V::lanes;
  V acc[RH][WV];
  start_tile(acc, nullptr, true);  // (register_tile.hpp)
  const float* base = sc.data + (oh0 - g.pt - sc.ih_lo) * sc.row_stride;
#pragma GCC unroll 8
  for (int j = 0; j < RH + 2; ++j) {
#pragma GCC unroll 3
    for (int s = 0; s < 3; ++s) {
#pragma GCC unroll 8
      for (int v = 0; v < WV; ++v) {
        V x = simd::load<V>(base + j * sc.row_stride + dw_col<L>(g, ow0, v) + s);
        dw_in_register(x);
#pragma GCC unroll 8
        for (int i = 0; i < RH; ++i) {
          const int r = j - i;
          if (r >= 0 && r < 3) acc[i][v] = simd::fma(x, w[r * 3 + s], acc[i][v]);
        }
      }
    }
  }
  dw_nchw_store<V, RH, WV>(acc, g, c, oh0, ow0, out, plane_flat, flat_end, ep);
}

/// Output rows [oh_a, oh_b) of plane (n, c).
template <class V, bool Fast3x3, class T, class Out, class Ep>
KFUSE_INLINE void dw_nchw_block(const T* in, const T* in_end, const float* wpk,
                                const window_geom& g, index_t n, index_t c, index_t oh_a,
                                index_t oh_b, float zp, float* slot, Out* out, const Ep& ep) {
  using cfg = dw_nchw_config<V::lanes>;
  constexpr int L = V::lanes, RH = cfg::rh, WV = cfg::wv;
  dw_scratch sc = dw_scratch_geometry<L>(g, oh_a, oh_b);
  index_t* key = reinterpret_cast<index_t*>(slot);  // the slot's header
  const index_t now[9] = {dw_slot_magic, sc.pitch, sc.row_stride, sc.rows, sc.ih_lo,
                          g.pl,          g.w,      g.h,           g.sw};
  const bool zeroed = std::equal(now, now + 9, key);
  std::copy(now, now + 9, key);
  sc.data = slot + dw_slot_header_floats;
  const T* plane = in + (n * g.c + c) * g.h * g.w;
  dw_fill_scratch<V>(plane, in_end, g, sc, zp, zeroed);
  const float* wc = wpk + c * g.r * g.s;
  const index_t plane_flat = (n * g.c + c) * g.oh * g.ow;
  const index_t flat_end = plane_flat + oh_b * g.ow;  // one past this block's output
  V w9[9];
  if constexpr (Fast3x3)
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) w9[t] = V(wc[t]);
  const index_t nvec = (g.ow + L - 1) / L;
  auto tile = [&]<int R, int W>(index_t oh, index_t ow) {
    if constexpr (Fast3x3)
      dw_nchw_tile3x3<V, R, W>(sc, w9, g, c, oh, ow, out, plane_flat, flat_end, ep);
    else
      dw_nchw_tile<V, R, W>(sc, wc, g, c, oh, ow, out, plane_flat, flat_end, ep);
  };
  index_t oh = oh_a;
  for (; oh + RH <= oh_b; oh += RH) {
    index_t q = 0;
    for (; q + WV <= nvec; q += WV) tile.template operator()<RH, WV>(oh, q * L);
    for (; q < nvec; ++q) tile.template operator()<RH, 1>(oh, q * L);
  }
  for (; oh < oh_b; ++oh) {
    index_t q = 0;
    for (; q + WV <= nvec; q += WV) tile.template operator()<1, WV>(oh, q * L);
    for (; q < nvec; ++q) tile.template operator()<1, 1>(oh, q * L);
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
