#pragma once
// NCHW windowed pooling (kernels/pool2d.hpp's NCHW half): lanes are output pixels of a row, the
// last vector of a row ends at the row's end. Two ways to a window's taps:
// - rows (f32 input, strides 1 and 2, x86 masked loads): no scratch, nothing outside the input
//   is read and nothing is stored but the output (the phase scratch's unaligned reloads of rows
//   just written stall on store forwarding: 3x the rows path's time, measured). Lanes outside
//   the row get the padding value from the masked loads.
//   - 2x2 / 3x3 at stride 2 (vrows): an output row's input rows are reduced first, at full
//     resolution, then its taps are the even / odd lanes of that one row (and the even lanes
//     slid by one): 3 permutes per output row, not 3 per input row.
//   - the other windows (hrows): each input row is reduced along W first (tap s a masked load,
//     at stride 2 the even / odd lanes of a pair of loads), then each output row's R rows, the
//     last R kept in registers.
// - phases (integer / bf16 inputs, other strides, other arches): the rows a block reads are
//   copied once into a padded f32 scratch split into stride phases, so every tap is a
//   contiguous load.
// Each reduces its taps as fixed trees (pool_tree): a path rounds the same on every run and
// thread count; an average's sum may round differently between paths (vrows adds the rows
// first).
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

// -------------------------------------------------------------------------------------- rows
/// The masked loads of every output vector's W taps in an input row, the same for every row
/// and plane of a call: load k's offset in the row and its lanes inside the row. Stride 1: load
/// s is tap s; stride 2: loads 2j and 2j + 1 are a pair whose even / odd lanes are taps 2j and
/// 2j + 1.
struct pool_row_plan {
  static constexpr int max_vecs = 32, max_loads = 8;
  int nvec = 0;
  index_t col[max_vecs];
  index_t off[max_vecs][max_loads];
  unsigned bits[max_vecs][max_loads];
};

/// Lanes [lo, hi) of a masked load of n lanes at `off` in a row of w floats, as bits.
inline unsigned pool_lane_bits(index_t off, index_t n, index_t w) {
  const index_t lo = std::clamp<index_t>(-off, 0, n), hi = std::clamp<index_t>(w - off, 0, n);
  return hi > lo ? ((1u << hi) - 1u) & ~((1u << lo) - 1u) : 0u;
}

/// Whether the rows path exists for this input type and vector (f32, masked loads).
template <class V, class T>
inline constexpr bool pool_has_rows = std::is_same_v<T, float> &&
                                      (simd::has_partial_f32<typename V::impl>);

/// Masked loads of an output vector's W taps: one per tap at stride 1, a pair per two taps at 2.
inline index_t pool_row_loads_of(index_t s, index_t sw) { return sw == 1 ? s : 2 * ((s + 1) / 2); }

/// Whether the rows path takes an NCHW pooling of output width ow, window width s and column
/// stride sw, for vector V and input T (then it needs no scratch).
template <class V, class T>
inline bool pool_takes_rows(index_t ow, index_t s, index_t sw) {
  if constexpr (!pool_has_rows<V, T>) {
    return false;
  } else {
    return (sw == 1 || sw == 2) && (ow + V::lanes - 1) / V::lanes <= pool_row_plan::max_vecs &&
           pool_row_loads_of(s, sw) <= pool_row_plan::max_loads;
  }
}

/// Whether the rows path takes this call (then `p` is its plan).
template <class V, class T>
inline bool pool_row_plan_of(const pool_geom& g, pool_row_plan& p) {
  constexpr index_t L = V::lanes;
  if constexpr (!pool_has_rows<V, T>) {
    return false;
  } else {
    if (!pool_takes_rows<V, T>(g.ow, g.s, g.sw)) return false;
    const index_t nvec = (g.ow + L - 1) / L, loads = pool_row_loads_of(g.s, g.sw);
    p.nvec = int(nvec);
    for (index_t q = 0; q < nvec; ++q) {
      const index_t col = pool_nchw_col<int(L)>(g, q);
      p.col[q] = col;
      for (index_t k = 0; k < loads; ++k) {
        const index_t off = g.sw == 1 ? col + k - g.pl : 2 * col + k / 2 * 2 + k % 2 * L - g.pl;
        p.off[q][k] = off;
        p.bits[q][k] = pool_lane_bits(off, L, g.w);
      }
    }
    return true;
  }
}

/// Output vector q's loads out of the plan, held for its column of rows: taps(row) is the
/// vector's S taps in input row `row`, reduced (S > 0: unrolled, a tree; 0: the window of `g`,
/// looped). Every load is a masked one (all lanes set inside the row): cheaper than a branch.
template <class V, bool IsMax, int S, int SW>
struct pool_row_loads {
  static constexpr int K = pool_row_plan::max_loads;
  index_t off[K];
  unsigned bits[K];
  index_t s, sw;
  V pad;

  KFUSE_INLINE pool_row_loads(const pool_row_plan& p, index_t q, const pool_geom& g, V pad_)
      : s(g.s), sw(g.sw), pad(pad_) {
    const int k_end = S > 0 ? int(pool_row_loads_of(S, SW)) : K;
#pragma GCC unroll 8
    for (int k = 0; k < k_end; ++k) off[k] = p.off[q][k], bits[k] = p.bits[q][k];
  }
  KFUSE_INLINE V ld(const float* row, index_t k) const {
    return simd::load_masked(row + off[k], bits[k], pad);
  }
  KFUSE_INLINE V taps(const float* row) const {
    if constexpr (S > 0) {
      static_assert(SW == 1, "unrolled windows at stride 2 take pool_nchw_vcol");
      V x[S];
#pragma GCC unroll 8
      for (int t = 0; t < S; ++t) x[t] = ld(row, t);
      return pool_tree<IsMax, S>(x);
    } else {
      V h = pad;
      for (index_t t = 0; t < s; t += sw) {
        if (sw == 1) {
          h = pool_join<IsMax>(h, ld(row, t));
        } else {
          const V a = ld(row, t), b = ld(row, t + 1);
          h = pool_join<IsMax>(h, simd::even_lanes(a, b));
          if (t + 1 < s) h = pool_join<IsMax>(h, simd::odd_lanes(a, b));
        }
      }
      return h;
    }
  }
};

/// The rows path over work units [u_begin, u_end), one output vector column at a time: its loads
/// are held in registers over all the units. Each input row is reduced along W, then each output
/// row's R rows. R, SH > 0 (3x3 at stride 1; stride 2 takes pool_nchw_vrows): the last R rows
/// are kept in registers and each output row computes only its SH new ones; 0: the window of
/// `g`, looped, rows recomputed.
template <class V, bool IsMax, int R, int S, int SW, int SH, class Out, class Ep>
KFUSE_INLINE void pool_nchw_hrows(const float* in, const pool_geom& g, const pool_row_plan& p,
                                  index_t u_begin, index_t u_end, index_t blocks, index_t rows_per,
                                  Out* out, const Ep& ep) {
  constexpr int L = V::lanes;
  const V pad(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
  for (index_t q = 0; q < p.nvec; ++q) {
    const pool_row_loads<V, IsMax, S, SW> lds(p, q, g, pad);
    const index_t col = p.col[q];
    const V wc = pool_col_factors<V, IsMax>(g, col);
    for (index_t u = u_begin; u < u_end; ++u) {
      const pool_unit un(g, u, blocks, rows_per);
      if (!un) continue;
      const float* src = in + un.plane * g.h * g.w;
      const index_t c = un.plane % g.c, flat_end = (un.plane * g.oh + un.oh_b) * g.ow;
      index_t flat = (un.plane * g.oh + un.oh_a) * g.ow + col;
      const index_t ih_lo = un.oh_a * g.sh - g.pt;
      const auto hrow = [&](index_t ih) {
        return ih < 0 || ih >= g.h ? pad : lds.taps(src + ih * g.w);
      };
      if constexpr (R > 0) {
        V win[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) win[r] = hrow(ih_lo + r);
        for (index_t oh = un.oh_a;; flat += g.ow) {
          V x[R];
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) x[r] = win[r];
          pool_nchw_put<V, IsMax>(pool_tree<IsMax, R>(x), g, c, oh, col, flat, flat_end, wc, out,
                                  ep);
          if (++oh == un.oh_b) break;
          const index_t top = ih_lo + (oh - un.oh_a) * SH;  // the next window's first row
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) win[r] = r + SH < R ? win[r + SH] : hrow(top + r);
        }
      } else {
        for (index_t oh = un.oh_a; oh < un.oh_b; ++oh, flat += g.ow) {
          const index_t top = ih_lo + (oh - un.oh_a) * g.sh;
          V acc = pad;
          for (index_t r = 0; r < g.r; ++r) acc = pool_join<IsMax>(acc, hrow(top + r));
          pool_nchw_put<V, IsMax>(acc, g, c, oh, col, flat, flat_end, wc, out, ep);
        }
      }
    }
  }
}

/// An output vector column of the stride-2 rows path: its first output column, its first input
/// column (2 col - pl) and the lanes of its three loads (pool_nchw_vcol); c: whether c matters
/// (lane L - 1 is an output and its last tap lies inside the row).
struct pool_vcol {
  index_t col = 0, oa = 0;
  unsigned ba = 0, bb = 0, bc = 0;
  bool c = false;
};

/// The rows path at stride 2 for R = 2 or 3 rows of S = 2 or 3 taps: output rows [oh_a, oh_b)
/// of `plane`, output vector column k. Each output row's R input rows are reduced first, at full
/// resolution (the L output lanes read the 2L + 1 floats a, b, and c's lane 0; with C false
/// lane L - 1 is never stored or c lies in the padding), then the S taps of every lane come out
/// of that one row: two deinterleaves and, at S = 3, a slide by one lane (hrows takes 3
/// permutes per input row, 6 per output row at R = 3). R = 3: the top row is the previous output
/// row's bottom one, kept in registers. Rows inside the input are loaded unchecked; with
/// `prefetch` (the block's first column) the rows 10 ahead are asked for whole.
template <class V, bool IsMax, int R, int S, bool C, class Out, class Ep>
KFUSE_INLINE void pool_nchw_vcol(const float* in, const pool_geom& g, const pool_vcol& k,
                                 index_t plane, index_t oh_a, index_t oh_b, index_t flat_end,
                                 bool prefetch, Out* out, const Ep& ep) {
  static_assert((R == 2 || R == 3) && (S == 2 || S == 3) && (C ? S == 3 : true));
  constexpr int L = V::lanes;
  const V pad(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
  const index_t col = k.col, oa = k.oa;
  const unsigned ba = k.ba, bb = k.bb, bc = k.bc;
  const V wc = pool_col_factors<V, IsMax>(g, col);
  const float* src = in + plane * g.h * g.w + oa;
  const index_t c = plane % g.c;
  index_t flat = (plane * g.oh + oh_a) * g.ow + col;
  // The 2L + 1 floats (a, b, c's lane 0) of the row at r; keep 0: a row outside the input, all
  // padding (its loads read no lane).
  const auto load_at = [&](const float* r, unsigned keep, V& a, V& b, V& cc) KFUSE_INLINE_LAMBDA {
    a = simd::load_masked(r, ba & keep, pad);
    b = simd::load_masked(r + L, bb & keep, pad);
    if constexpr (C) cc = simd::load_masked(r + 2 * L, bc & keep, pad);
  };
  const auto load_row = [&](index_t ih, V& a, V& b, V& cc) KFUSE_INLINE_LAMBDA {
    const bool in_rows = ih >= 0 && ih < g.h;
    load_at(src + (in_rows ? ih : 0) * g.w, in_rows ? ~0u : 0u, a, b, cc);
  };
  index_t top = oh_a * 2 - g.pt;
  V pa = pad, pb = pad, pc = pad;  // R = 3: the top row (the previous output row's bottom)
  if constexpr (R == 3) load_row(top, pa, pb, pc);
  // Output row oh from its rows after the top one: m at r, z at r + w; rows outside the input
  // (checked) all padding. The rows between are loaded unchecked: the check's scalar work took
  // as long as the vector work (measured).
  const auto row = [&]<bool Checked>(index_t oh, const float* r) KFUSE_INLINE_LAMBDA {
    V ma, mb, mc = pad, za, zb, zc = pad;
    const index_t m_row = R == 3 ? top + 1 : top;
    if constexpr (Checked) {
      load_row(m_row, ma, mb, mc);
      load_row(m_row + 1, za, zb, zc);
    } else {
      load_at(r, ~0u, ma, mb, mc);
      load_at(r + g.w, ~0u, za, zb, zc);
    }
    if constexpr (R == 3) {  // (top (+) middle) (+) bottom: pool_tree's order
      ma = pool_join<IsMax>(pa, ma), mb = pool_join<IsMax>(pb, mb);
      if constexpr (C) mc = pool_join<IsMax>(pc, mc);
      pa = za, pb = zb, pc = zc;
    }
    const V a = pool_join<IsMax>(ma, za), b = pool_join<IsMax>(mb, zb);
    V x[S];
    x[0] = simd::even_lanes(a, b);
    x[1] = simd::odd_lanes(a, b);
    if constexpr (S == 3) x[2] = simd::next_lane(x[0], C ? pool_join<IsMax>(mc, zc) : pad);
    pool_nchw_put<V, IsMax>(pool_tree<IsMax, S>(x), g, c, oh, col, flat, flat_end, wc, out, ep);
    flat += g.ow, top += 2;
  };
  // Output rows [i0, i1) read only rows inside the input: top + (R == 3) >= 0, top + R - 1 < h.
  const index_t i0 = std::clamp<index_t>((g.pt - (R == 3) + 1) / 2, oh_a, oh_b);
  const index_t last = g.h - R + g.pt;  // 2 oh <= last
  const index_t i1 = std::clamp<index_t>(last < 0 ? 0 : last / 2 + 1, i0, oh_b);
  const std::size_t ahead = prefetch ? std::size_t(2 * g.w) * sizeof(float) : 0;  // two rows
  index_t oh = oh_a;
  for (; oh < i0; ++oh) row.template operator()<true>(oh, nullptr);
  if (oh < i1) {
    const float* r = src + (R == 3 ? top + 1 : top) * g.w;
    for (; oh < i1; ++oh, r += 2 * g.w) {
      prefetch_lines<3>(r - oa + 9 * g.w, ahead);  // 10 rows past the top one
      row.template operator()<false>(oh, r);
    }
  }
  for (; oh < oh_b; ++oh) row.template operator()<true>(oh, nullptr);
}

/// The stride-2 rows path over work units [u_begin, u_end) (pool_nchw_vcol): blocks of output
/// rows whose input rows fit ~16 KiB, each block a column at a time (the later columns read the
/// block's rows from L1: a whole 112-wide plane at a time, 50 KB, went to L2 for every column).
template <class V, bool IsMax, int R, int S, class Out, class Ep>
KFUSE_INLINE void pool_nchw_vrows(const float* in, const pool_geom& g, const pool_row_plan& p,
                                  index_t u_begin, index_t u_end, index_t blocks, index_t rows_per,
                                  Out* out, const Ep& ep) {
  constexpr int L = V::lanes;
  const index_t block =
      p.nvec == 1 ? g.oh : std::max<index_t>(1, 16384 / (2 * g.w * index_t(sizeof(float))));
  pool_vcol ks[pool_row_plan::max_vecs];
  for (index_t q = 0; q < p.nvec; ++q) {
    pool_vcol& k = ks[q];
    k.col = p.col[q], k.oa = 2 * k.col - g.pl;
    k.ba = pool_lane_bits(k.oa, L, g.w), k.bb = pool_lane_bits(k.oa + L, L, g.w);
    k.bc = pool_lane_bits(k.oa + 2 * L, 1, g.w);
    k.c = S == 3 && k.col + L <= g.ow && k.bc;
  }
  for (index_t u = u_begin; u < u_end; ++u) {
    const pool_unit un(g, u, blocks, rows_per);
    if (!un) continue;
    const index_t flat_end = (un.plane * g.oh + un.oh_b) * g.ow;
    for (index_t a = un.oh_a; a < un.oh_b; a += block) {
      const index_t b = std::min(un.oh_b, a + block);
      for (index_t q = 0; q < p.nvec; ++q)
        if (ks[q].c)
          pool_nchw_vcol<V, IsMax, R, S, S == 3>(in, g, ks[q], un.plane, a, b, flat_end, q == 0,
                                                 out, ep);
        else
          pool_nchw_vcol<V, IsMax, R, S, false>(in, g, ks[q], un.plane, a, b, flat_end, q == 0, out,
                                                ep);
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

/// The rows path over work units [u_begin, u_end) (pool_nchw_hrows).
template <class V, bool IsMax, class Out, class Ep>
KFUSE_INLINE void pool_nchw_rows(const float* in, const pool_geom& g, const pool_row_plan& p,
                                 index_t u_begin, index_t u_end, index_t blocks, index_t rows_per,
                                 Out* out, const Ep& ep) {
  pool_nchw_windows(g, true, [&]<int R, int S, int ST>() {
    if constexpr (ST == 2)
      pool_nchw_vrows<V, IsMax, R, S>(in, g, p, u_begin, u_end, blocks, rows_per, out, ep);
    else
      pool_nchw_hrows<V, IsMax, R, S, ST, ST>(in, g, p, u_begin, u_end, blocks, rows_per, out, ep);
  });
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
