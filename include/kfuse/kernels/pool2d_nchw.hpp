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
// - phases (integer / bf16 inputs, other strides, other arches; kernels/pool2d_nchw_phases.hpp):
//   the rows a block reads are copied once into a padded f32 scratch split into stride phases,
//   so every tap is a contiguous load.
// Each reduces its taps as fixed trees (pool_tree): a path rounds the same on every run and
// thread count; an average's sum may round differently between paths (vrows adds the rows
// first).
#include <algorithm>
#include <limits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/prefetch.hpp"
#include "kfuse/kernels/pool2d_nchw_phases.hpp"
#include "kfuse/kernels/pool_geom.hpp"
#include "kfuse/kernels/pool_shape.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

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

}  // namespace detail

KFUSE_END_NAMESPACE
