#pragma once
// NCHW pooling's phases path and what both paths share (kernels/pool2d_nchw.hpp has the rows
// path and describes both): the rows a block reads copied once into a padded f32 scratch split
// into stride phases, so every tap is a contiguous load; the work units, the output stores and
// the unrolled windows.
#include <algorithm>
#include <limits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/prefetch.hpp"
#include "kfuse/kernels/pool_geom.hpp"
#include "kfuse/kernels/pool_shape.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

// ------------------------------------------------------------------------------ phase scratch
/// Floats of one thread's NCHW phase scratch: the padded phase rows of a block of output rows (a
/// whole plane's rows: the most a block reads).
template <int L>
inline std::size_t pool_nchw_scratch_floats(const pool_shape& s) {
  const index_t ow = s.out_w(), oh = s.out_h();
  const index_t pitch = (ow + L - 1) / L * L + (s.s - 1) / s.stride_w + 1;
  const index_t rows = (oh - 1) * s.stride_h + s.r;
  return std::size_t(rows * s.stride_w * pitch);
}

/// dst[e] = src[2e] for e in [0, n), reading only src[0 .. avail): stride-2 vector loads, the
/// last vector ending at the last element (an odd load from one float earlier when the even
/// load would read past `avail`). Planned once, run for every row of a plane.
template <int L>
struct stride2_copy {
  index_t n = 0, full = 0, last_at = 0, scalar_from = 0;
  int last = 0;  // the last vector: 0 none, 1 even load at last_at, 2 odd load from 2 last_at - 1

  stride2_copy() = default;
  stride2_copy(index_t n_, index_t avail) : n(n_) {
    while ((full + 1) * L <= n && 2 * (full + 1) * L <= avail) ++full;
    scalar_from = full * L;
    if (scalar_from < n && n >= L) {
      last_at = n - L;
      last = 2 * n <= avail ? 1 : last_at > 0 ? 2 : 0;
      if (last) scalar_from = n;
    }
  }
  template <class V>
  KFUSE_INLINE void run(const float* src, float* dst) const {
    for (index_t v = 0; v < full; ++v)
      simd::store(dst + v * L, simd::load_even<V>(src + 2 * v * L));
    if (last == 1)
      simd::store(dst + last_at, simd::load_even<V>(src + 2 * last_at));
    else if (last == 2)
      simd::store(dst + last_at, simd::load_odd<V>(src + 2 * last_at - 1));
    for (index_t e = scalar_from; e < n; ++e) dst[e] = src[2 * e];
  }
};

/// Rows [ih_lo, ih_lo + rows) of one plane as `sw` phases of `pitch` floats per row: phase k,
/// element e = padded column e * sw + k; padding and rows outside the input hold `pad`. The
/// padding cells are the same for every plane: with `fill_pads` false they are taken as already
/// written (by the previous plane of the same rows) and only the input's values are copied.
template <class V, class T>
KFUSE_INLINE void pool_fill_rows(const T* plane, const pool_geom& g, float* dst, index_t ih_lo,
                                 index_t rows, index_t pitch, float pad, bool fill_pads) {
  constexpr int L = V::lanes;
  const index_t row_stride = g.sw * pitch;
  if (fill_pads) {  // one contiguous pass (per-row fragments cost more than they save)
    const index_t total = rows * row_stride;
    index_t e = 0;
    for (; e + L <= total; e += L) simd::store(dst + e, V(pad));
    for (; e < total; ++e) dst[e] = pad;
  }
  // Per stride phase, the elements inside the input row: phase k holds input columns
  // e * sw + k - pl, elements [lo[k], hi[k]) are inside the row (computed once, not per row).
  auto bounds = [&](index_t k, index_t& lo, index_t& hi) {
    lo = std::min(pitch, std::max<index_t>(0, (g.pl - k + g.sw - 1) / g.sw));
    const index_t last = g.w - 1 + g.pl - k;  // e * sw <= last
    hi = last < 0 ? lo : std::max(lo, std::min(pitch, last / g.sw + 1));
  };
  constexpr index_t max_phases = 16;
  index_t phase_lo[max_phases], phase_hi[max_phases];  // the first sw entries (no zero fill)
  if (g.sw > 1 && g.sw <= max_phases)
    for (index_t k = 0; k < g.sw; ++k) bounds(k, phase_lo[k], phase_hi[k]);
  const index_t j_lo = std::max<index_t>(0, -ih_lo), j_hi = std::min(rows, g.h - ih_lo);
  dst += j_lo * row_stride;
  if constexpr (std::is_same_v<T, float>) {
    if (g.sw == 2) {  // f32 stride 2: both phases of every row by stride-2 vector loads
      const index_t iw0[2] = {phase_lo[0] * 2 - g.pl, phase_lo[1] * 2 + 1 - g.pl};
      const stride2_copy<L> copy[2] = {{phase_hi[0] - phase_lo[0], g.w - iw0[0]},
                                       {phase_hi[1] - phase_lo[1], g.w - iw0[1]}};
      for (index_t j = j_lo; j < j_hi; ++j, dst += row_stride) {
        const float* src = plane + (ih_lo + j) * g.w;
        copy[0].template run<V>(src + iw0[0], dst + phase_lo[0]);
        copy[1].template run<V>(src + iw0[1], dst + pitch + phase_lo[1]);
      }
      return;
    }
  }
  for (index_t j = j_lo; j < j_hi; ++j, dst += row_stride) {
    const T* src = plane + (ih_lo + j) * g.w;
    if (g.sw == 1) {
      const index_t lead = std::min(g.pl, pitch), len = std::min(g.w, pitch - lead);
      index_t x = 0;
      for (; x + L <= len; x += L) simd::store(dst + lead + x, pool_load<V, false>(src + x, L, g));
      if (x < len)
        simd::store_partial(dst + lead + x, pool_load<V, true>(src + x, int(len - x), g),
                            int(len - x));
      continue;
    }
    const float sub = std::is_integral_v<T> && !g.is_max ? g.zp : 0.f;
    for (index_t k = 0; k < g.sw; ++k) {
      float* ph = dst + k * pitch;
      index_t e_lo, e_hi;
      if (g.sw <= max_phases)
        e_lo = phase_lo[k], e_hi = phase_hi[k];
      else
        bounds(k, e_lo, e_hi);
      const index_t iw0 = e_lo * g.sw + k - g.pl;
      for (index_t e = e_lo, iw = iw0; e < e_hi; ++e, iw += g.sw) ph[e] = to_float(src[iw]) - sub;
    }
  }
}

// ---------------------------------------------------------------------- units and stores (both)
/// First output column of vector q of a row (the last one ends at the row's end).
template <int L>
KFUSE_INLINE index_t pool_nchw_col(const pool_geom& g, index_t q) {
  return g.ow >= L ? std::min<index_t>(q * L, g.ow - L) : 0;
}

/// Plane and output rows [oh_a, oh_b) of work unit u (rows block u % blocks, of rows_per rows,
/// of plane u / blocks); false when the block is empty.
struct pool_unit {
  index_t plane, oh_a, oh_b;
  pool_unit(const pool_geom& g, index_t u, index_t blocks, index_t rows_per)
      : plane(u / blocks), oh_a(u % blocks * rows_per), oh_b(std::min(g.oh, oh_a + rows_per)) {}
  explicit operator bool() const { return oh_a < oh_b; }
};

/// Average: the divisor factor of the columns of the output vector at col (a vector past the
/// row's end: 0 there, which divides harmlessly lanes never stored). Max: unused.
template <class V, bool IsMax>
KFUSE_INLINE V pool_col_factors(const pool_geom& g, index_t col) {
  constexpr int L = V::lanes;
  if constexpr (IsMax) {
    return V(0.f);
  } else {
    const int nc = int(std::min<index_t>(L, g.ow - col));
    return nc == L ? simd::load<V>(g.wcnt + col) : simd::load_partial<V>(g.wcnt + col, nc);
  }
}

/// Stores the output vector acc of channel c at (oh, col) (flat: its index): the average's
/// divisor (wc: the columns' factors), the epilogue. A vector past the row's end is stored whole
/// while that stays inside [.., flat_end) (the extra lanes land on the next row, stored after
/// it), else its first ow - col lanes.
template <class V, bool IsMax, class Out, class Ep>
KFUSE_INLINE void pool_nchw_put(V acc, const pool_geom& g, index_t c, index_t oh, index_t col,
                                index_t flat, index_t flat_end, V wc, Out* out, const Ep& ep) {
  constexpr int L = V::lanes;
  if constexpr (!IsMax) acc = acc / (wc * V(g.hcnt[oh])) + V(g.zp);
  if (col + L <= g.ow || flat + L <= flat_end) {
    const lane_ctx<V, false> ctx{flat, c, L};
    simd::store(out + flat, apply(ep, acc, ctx));
  } else {
    const int nc = int(g.ow - col);
    const lane_ctx<V, false> ctx{flat, c, nc};
    simd::store_partial(out + flat, apply(ep, acc, ctx), nc);
  }
}

// ------------------------------------------------------------------------------------ phases
/// The R x S taps of one output vector from the phase rows at `base` (tap (r, s) sits in row r,
/// phase s % SW, element s / SW). R, S, SW > 0: the window is unrolled and reduced as trees;
/// 0: the window of `g`, looped.
template <class V, bool IsMax, int R, int S, int SW>
KFUSE_INLINE V pool_nchw_taps(const float* base, index_t row_stride, index_t pitch,
                              const pool_geom& g) {
  if constexpr (R > 0) {
    V rows[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float* rowp = base + r * row_stride;
      V x[S];
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) x[s] = simd::load<V>(rowp + (s % SW) * pitch + s / SW);
      rows[r] = pool_tree<IsMax, S>(x);
    }
    return pool_tree<IsMax, R>(rows);
  } else {
    V acc(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
    for (index_t r = 0; r < g.r; ++r) {
      const float* rowp = base + r * row_stride;
      V h(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
      // Tap s sits in phase s % sw at element s / sw (stepped, no division per tap).
      for (index_t s = 0, k = 0, q = 0; s < g.s; ++s) {
        h = pool_join<IsMax>(h, simd::load<V>(rowp + k * pitch + q));
        if (++k == g.sw) k = 0, ++q;
      }
      acc = pool_join<IsMax>(acc, h);
    }
    return acc;
  }
}

/// Output rows [oh_a, oh_b) of plane (n, c) from its phase rows in `sc` (pool_fill_rows).
template <class V, bool IsMax, int R, int S, int SW, class Out, class Ep>
KFUSE_INLINE void pool_nchw_phase_rows(const pool_geom& g, index_t n, index_t c, index_t oh_a,
                                       index_t oh_b, const float* sc, index_t pitch, Out* out,
                                       const Ep& ep) {
  constexpr int L = V::lanes;
  const index_t nvec = (g.ow + L - 1) / L, row_stride = g.sw * pitch;
  const index_t plane = n * g.c + c, flat_end = (plane * g.oh + oh_b) * g.ow;
  for (index_t oh = oh_a; oh < oh_b; ++oh) {
    const float* base = sc + (oh - oh_a) * g.sh * row_stride;
    for (index_t q = 0; q < nvec; ++q) {
      const index_t col = pool_nchw_col<L>(g, q);
      const V acc = pool_nchw_taps<V, IsMax, R, S, SW>(base + col, row_stride, pitch, g);
      pool_nchw_put<V, IsMax>(acc, g, c, oh, col, (plane * g.oh + oh) * g.ow + col, flat_end,
                              pool_col_factors<V, IsMax>(g, col), out, ep);
    }
  }
}

/// Calls go.template operator()<R, S, SW>() for the common windows, unrolled (3x3 / 2x2 at
/// stride 2, 3x3 at stride 1; with `same_row_stride` only where the row stride equals the
/// column stride), else <0, 0, 0> (the window of `g`, looped).
template <class F>
KFUSE_INLINE void pool_nchw_windows(const pool_geom& g, bool same_row_stride, F&& go) {
  const auto is = [&](index_t r, index_t s, index_t st) {
    return g.r == r && g.s == s && g.sw == st && (!same_row_stride || g.sh == st);
  };
  if (is(3, 3, 2))
    go.template operator()<3, 3, 2>();
  else if (is(2, 2, 2))
    go.template operator()<2, 2, 2>();
  else if (is(3, 3, 1))
    go.template operator()<3, 3, 1>();
  else
    go.template operator()<0, 0, 0>();
}

// ------------------------------------------------------------------------------------- block
/// Output rows [oh_a, oh_b) of plane (n, c) by the phases, in scratch `sc`
/// (pool_nchw_scratch_floats).
template <class V, bool IsMax, class T, class Out, class Ep>
KFUSE_INLINE void pool_nchw_block(const T* in, const pool_geom& g, index_t n, index_t c,
                                  index_t oh_a, index_t oh_b, float* sc, bool fill_pads, Out* out,
                                  const Ep& ep) {
  constexpr int L = V::lanes;
  const T* plane = in + (n * g.c + c) * g.h * g.w;
  const index_t nvec = (g.ow + L - 1) / L;
  const index_t pitch = nvec * L + (g.s - 1) / g.sw + 1;
  const index_t ih_lo = oh_a * g.sh - g.pt, nrows = (oh_b - 1 - oh_a) * g.sh + g.r;
  const float pad = IsMax ? -std::numeric_limits<float>::infinity() : 0.f;
  pool_fill_rows<V>(plane, g, sc, ih_lo, nrows, pitch, pad, fill_pads);
  pool_nchw_windows(g, false, [&]<int R, int S, int SW>() {
    pool_nchw_phase_rows<V, IsMax, R, S, SW>(g, n, c, oh_a, oh_b, sc, pitch, out, ep);
  });
}

}  // namespace detail

KFUSE_END_NAMESPACE
