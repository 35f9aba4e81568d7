#pragma once
// pool2d<Elem, Layout, Arch, Epilogue, Backend>: max, average (count_include_pad either way,
// ceil mode) and global max / average pooling, with optional epilogue stages fused before the
// store.
//
//   kfuse::pool_shape ps{.n = 1, .c = 64, .h = 56, .w = 56, .kind = kfuse::pool_kind::max,
//                        .r = 3, .s = 3, .stride_h = 2, .stride_w = 2,
//                        .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1};
//   kfuse::pool2d<kfuse::f32, kfuse::nhwc>::run(kfuse::view<kfuse::nhwc>(x, ps.in_dims()), ps,
//                                               kfuse::view<kfuse::nhwc>(y, ps.out_dims()));
//
// Elem is the storage tag: f32, bf16 (f32 compute), i8 / u8 (the same quantization in and out,
// zero point given to run()): max is exact; the average is the mean of the real values (padding
// counts as real zero when count_include_pad) rounded half to even, exact for windows of up to
// 16384 elements (global pooling: any size, summed in double). Max propagates NaN like PyTorch.
// NHWC: lanes are channels, each output pixel reads its valid window taps (loop bounds, no
// per-tap branch). NCHW: lanes are output pixels of a row; the input rows a block of output rows
// reads are copied once into a padded f32 scratch (padding -inf for max, 0 for average) split
// into stride phases, so every tap is a contiguous load.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/pool_shape.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/thread_pool.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

struct pool_geom {
  index_t n, c, h, w, oh, ow, r, s, sh, sw, pt, pl;
  bool is_max;
  float zp;           // average over integers: values enter as q - zp, the result gets + zp
  const float* hcnt;  // average: divisor factor of each output row
  const float* wcnt;  // ... and of each output column (the divisor is their product)
};

/// Max that keeps a NaN once seen (PyTorch's max pooling propagates NaN).
template <class V>
KFUSE_INLINE V pool_max(V acc, V x) {
  return simd::select(acc <= acc, simd::max(acc, x), acc);
}

template <class V, bool Partial, class T>
KFUSE_INLINE V pool_load(const T* p, int n, const pool_geom& g) {
  V x = Partial ? simd::load_partial<V>(p, n) : simd::load<V>(p);
  if constexpr (std::is_integral_v<T>)
    if (!g.is_max) x = x - V(g.zp);
  return x;
}

/// First tap t in [0, taps) with start + t >= 0, and one past the last with start + t < extent.
inline void pool_valid_taps(index_t start, index_t taps, index_t extent, index_t& t0, index_t& t1) {
  t0 = std::max<index_t>(0, -start);
  t1 = std::max(t0, std::min(taps, extent - start));
}

// ------------------------------------------------------------------------------------ NHWC
/// One output pixel, NV channel vectors from c0 (one vector of cn lanes when Partial).
template <class V, bool IsMax, int NV, bool Partial, class T, class Out, class Ep>
KFUSE_INLINE void pool_nhwc_px(const T* img, const pool_geom& g, index_t r0, index_t r1, index_t s0,
                               index_t s1, index_t ih0, index_t iw0, index_t c0, int cn,
                               float count, Out* out, index_t flat, const Ep& ep) {
  constexpr int L = V::lanes;
  V acc[NV];
  const V init(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = init;
  for (index_t r = r0; r < r1; ++r) {
    const T* row = img + ((ih0 + r) * g.w) * g.c + c0;
    for (index_t s = s0; s < s1; ++s) {
      const T* px = row + (iw0 + s) * g.c;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const V x = pool_load<V, Partial>(px + v * L, cn, g);
        acc[v] = IsMax ? pool_max(acc[v], x) : acc[v] + x;
      }
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    V y = acc[v];
    if constexpr (!IsMax) y = y / V(count) + V(g.zp);
    const lane_ctx<V, true> ctx{flat + v * L, c0 + v * L, Partial ? cn : L};
    y = apply(ep, y, ctx);
    if constexpr (Partial)
      simd::store_partial(out + flat + v * L, y, cn);
    else
      simd::store(out + flat + v * L, y);
  }
}

template <class V, bool IsMax, class T, class Out, class Ep>
KFUSE_INLINE void pool_nhwc_row(const T* in, const pool_geom& g, index_t n, index_t oh, Out* out,
                                const Ep& ep) {
  constexpr int L = V::lanes, CV = 4;
  const index_t C = g.c;
  const T* img = in + n * g.h * g.w * C;
  const index_t ih0 = oh * g.sh - g.pt;
  index_t r0, r1;
  pool_valid_taps(ih0, g.r, g.h, r0, r1);
  for (index_t ow = 0; ow < g.ow; ++ow) {
    const index_t iw0 = ow * g.sw - g.pl;
    index_t s0, s1;
    pool_valid_taps(iw0, g.s, g.w, s0, s1);
    const float count = IsMax ? 1.f : g.hcnt[oh] * g.wcnt[ow];
    const index_t flat = ((n * g.oh + oh) * g.ow + ow) * C;
    index_t c0 = 0;
    for (; c0 + CV * L <= C; c0 += CV * L)
      pool_nhwc_px<V, IsMax, CV, false>(img, g, r0, r1, s0, s1, ih0, iw0, c0, L, count, out,
                                        flat + c0, ep);
    for (; c0 + L <= C; c0 += L)
      pool_nhwc_px<V, IsMax, 1, false>(img, g, r0, r1, s0, s1, ih0, iw0, c0, L, count, out,
                                       flat + c0, ep);
    if (c0 < C) {
      if (C >= L)  // the last vector ends at C, overlapping the one before (same values)
        pool_nhwc_px<V, IsMax, 1, false>(img, g, r0, r1, s0, s1, ih0, iw0, C - L, L, count, out,
                                         flat + C - L, ep);
      else
        pool_nhwc_px<V, IsMax, 1, true>(img, g, r0, r1, s0, s1, ih0, iw0, c0, int(C - c0), count,
                                        out, flat + c0, ep);
    }
  }
}

// ------------------------------------------------------------------------------------ NCHW
/// Floats of one thread's NCHW scratch: the padded rows of a block of output rows, as
/// pool_nchw_block lays them out (a whole plane's rows: the most a block reads).
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

/// The R x S taps of one output vector from the phase rows at `base` (tap (r, s) sits in row r,
/// phase s % SW, element s / SW). R, S, SW > 0: the window is unrolled and reduced as a tree
/// (short dependency chains); 0: the window of `g`, looped.
template <class V, bool IsMax, int R, int S, int SW>
KFUSE_INLINE V pool_nchw_taps(const float* base, index_t row_stride, index_t pitch,
                              const pool_geom& g) {
  const auto join = [](V a, V b) { return IsMax ? pool_max(a, b) : a + b; };
  if constexpr (R > 0) {
    V rows[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float* rowp = base + r * row_stride;
      V x[S];
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) x[s] = simd::load<V>(rowp + (s % SW) * pitch + s / SW);
#pragma GCC unroll 8
      for (int w = 1; w < S; w *= 2)
#pragma GCC unroll 8
        for (int s = 0; s + w < S; s += 2 * w) x[s] = join(x[s], x[s + w]);
      rows[r] = x[0];
    }
#pragma GCC unroll 8
    for (int w = 1; w < R; w *= 2)
#pragma GCC unroll 8
      for (int r = 0; r + w < R; r += 2 * w) rows[r] = join(rows[r], rows[r + w]);
    return rows[0];
  } else {
    V acc(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
    for (index_t r = 0; r < g.r; ++r) {
      const float* rowp = base + r * row_stride;
      // Tap s sits in phase s % sw at element s / sw (stepped, no division per tap).
      for (index_t s = 0, k = 0, q = 0; s < g.s; ++s) {
        acc = join(acc, simd::load<V>(rowp + k * pitch + q));
        if (++k == g.sw) k = 0, ++q;
      }
    }
    return acc;
  }
}

/// Output rows [oh_a, oh_b) of plane (n, c) from its phase rows in `sc` (pool_fill_rows).
template <class V, bool IsMax, int R, int S, int SW, class Out, class Ep>
KFUSE_INLINE void pool_nchw_rows(const pool_geom& g, index_t n, index_t c, index_t oh_a,
                                 index_t oh_b, const float* sc, index_t pitch, Out* out,
                                 const Ep& ep) {
  constexpr int L = V::lanes;
  const index_t nvec = (g.ow + L - 1) / L, row_stride = g.sw * pitch;
  const index_t plane_flat = (n * g.c + c) * g.oh * g.ow;
  for (index_t oh = oh_a; oh < oh_b; ++oh) {
    const float* base = sc + (oh - oh_a) * g.sh * row_stride;
    for (index_t q = 0; q < nvec; ++q) {
      // The last vector of a row ends at the row's end (overlapping the one before).
      const index_t col = g.ow >= L ? std::min<index_t>(q * L, g.ow - L) : 0;
      V acc = pool_nchw_taps<V, IsMax, R, S, SW>(base + col, row_stride, pitch, g);
      if constexpr (!IsMax) {
        const int nc = int(std::min<index_t>(L, g.ow - col));
        const V wc =
            nc == L ? simd::load<V>(g.wcnt + col) : simd::load_partial<V>(g.wcnt + col, nc);
        // Lanes past the row (only when the row is shorter than a vector) divide by 0 harmlessly
        // and are never stored.
        acc = acc / (wc * V(g.hcnt[oh])) + V(g.zp);
      }
      // A row shorter than a vector is stored whole when that stays inside this block's
      // output: the extra lanes land on the next row, stored after it by this thread.
      const index_t flat = plane_flat + oh * g.ow + col;
      if (g.ow >= L || flat + L <= plane_flat + oh_b * g.ow) {
        const lane_ctx<V, false> ctx{flat, c, L};
        simd::store(out + flat, apply(ep, acc, ctx));
      } else {
        const int nc = int(g.ow);
        const lane_ctx<V, false> ctx{flat, c, nc};
        simd::store_partial(out + flat, apply(ep, acc, ctx), nc);
      }
    }
  }
}

/// Output rows [oh_a, oh_b) of plane (n, c): the rows they read into the scratch, then the
/// windows (unrolled for the common 3x3 / 2x2 windows of stride 1 and 2).
template <class V, bool IsMax, class T, class Out, class Ep>
KFUSE_INLINE void pool_nchw_block(const T* in, const pool_geom& g, index_t n, index_t c,
                                  index_t oh_a, index_t oh_b, float* sc, bool fill_pads, Out* out,
                                  const Ep& ep) {
  constexpr int L = V::lanes;
  const index_t nvec = (g.ow + L - 1) / L;
  const index_t pitch = nvec * L + (g.s - 1) / g.sw + 1;
  const index_t ih_lo = oh_a * g.sh - g.pt, rows = (oh_b - 1 - oh_a) * g.sh + g.r;
  const float pad = IsMax ? -std::numeric_limits<float>::infinity() : 0.f;
  pool_fill_rows<V>(in + (n * g.c + c) * g.h * g.w, g, sc, ih_lo, rows, pitch, pad, fill_pads);
  const auto is = [&](index_t r, index_t s, index_t sw) {
    return g.r == r && g.s == s && g.sw == sw;
  };
  if (is(3, 3, 2))
    pool_nchw_rows<V, IsMax, 3, 3, 2>(g, n, c, oh_a, oh_b, sc, pitch, out, ep);
  else if (is(2, 2, 2))
    pool_nchw_rows<V, IsMax, 2, 2, 2>(g, n, c, oh_a, oh_b, sc, pitch, out, ep);
  else if (is(3, 3, 1))
    pool_nchw_rows<V, IsMax, 3, 3, 1>(g, n, c, oh_a, oh_b, sc, pitch, out, ep);
  else
    pool_nchw_rows<V, IsMax, 0, 0, 0>(g, n, c, oh_a, oh_b, sc, pitch, out, ep);
}

// ---------------------------------------------------------------------------------- global
/// Channels [c_lo, c_hi) of image n: each channel's max or mean (sums in f32 chunks of at most
/// 32768 values, exact for integers, added up in double), then the epilogue over channel
/// vectors and the store (the 1x1 output is N x C in either layout).
template <class V, class L, class T, class Out, class Ep>
KFUSE_INLINE void pool_global(const T* in, const pool_geom& g, index_t n, index_t c_lo,
                              index_t c_hi, bool integer_round, Out* out, const Ep& ep) {
  constexpr int Lanes = V::lanes;
  constexpr index_t chunk = 32768;
  const index_t hw = g.h * g.w;
  alignas(64) float res[64];
  alignas(64) float lanes[Lanes];
  const double count = double(hw);
  auto finish = [&](double v) {
    if (g.is_max) return float(v);
    const double mean = v / count;
    return float(integer_round ? std::nearbyint(mean) : mean);
  };
  if constexpr (std::is_same_v<L, nchw>) {
    for (index_t c = c_lo; c < c_hi; ++c) {
      const T* p = in + (n * g.c + c) * hw;
      const float init = g.is_max ? -std::numeric_limits<float>::infinity() : 0.f;
      double total = init;
      bool nan = false;
      for (index_t b = 0; b < hw; b += chunk * Lanes) {
        const index_t e = std::min(hw, b + chunk * Lanes);
        V acc(init);
        index_t i = b;
        for (; i + Lanes <= e; i += Lanes) {
          const V x = simd::load<V>(p + i);
          acc = g.is_max ? pool_max(acc, x) : acc + x;
        }
        if (i < e) {  // the tail: only its first e - i lanes are values
          const V x = simd::load_partial<V>(p + i, int(e - i));
          if (g.is_max) {
            simd::store(lanes, x);
            for (index_t k = 0; k < e - i; ++k) {
              nan = nan || lanes[k] != lanes[k];
              total = std::max(total, double(lanes[k]));
            }
          } else {
            acc = acc + x;  // the zero fill adds nothing
          }
        }
        simd::store(lanes, acc);
        for (int k = 0; k < Lanes; ++k) {
          if (g.is_max) {
            nan = nan || lanes[k] != lanes[k];
            total = std::max(total, double(lanes[k]));
          } else {
            total += double(lanes[k]);
          }
        }
      }
      res[c - c_lo] = nan ? std::numeric_limits<float>::quiet_NaN() : finish(total);
    }
  } else {
    // NHWC: channel vectors over the pixels.
    for (index_t c0 = c_lo; c0 < c_hi; c0 += Lanes) {
      const int nc = int(std::min<index_t>(Lanes, c_hi - c0));
      const T* p = in + n * hw * g.c + c0;
      const float init = g.is_max ? -std::numeric_limits<float>::infinity() : 0.f;
      double total[Lanes];
      for (int k = 0; k < Lanes; ++k) total[k] = init;
      for (index_t b = 0; b < hw; b += chunk) {
        const index_t e = std::min(hw, b + chunk);
        V acc(init);
        for (index_t i = b; i < e; ++i) {
          V x;
          if (Lanes == 1 || nc == Lanes)
            x = simd::load<V>(p + i * g.c);
          else if constexpr (Lanes > 1)
            x = simd::load_partial<V>(p + i * g.c, nc);
          acc = g.is_max ? pool_max(acc, x) : acc + x;
        }
        simd::store(lanes, acc);
        for (int k = 0; k < Lanes; ++k) {
          if (!g.is_max)
            total[k] += double(lanes[k]);
          else if (lanes[k] != lanes[k] || total[k] != total[k])
            total[k] = std::numeric_limits<double>::quiet_NaN();
          else
            total[k] = std::max(total[k], double(lanes[k]));
        }
      }
      for (int k = 0; k < nc; ++k)
        res[c0 - c_lo + k] =
            total[k] != total[k] ? std::numeric_limits<float>::quiet_NaN() : finish(total[k]);
    }
  }
  for (index_t c0 = c_lo; c0 < c_hi; c0 += Lanes) {
    const int nc = int(std::min<index_t>(Lanes, c_hi - c0));
    const index_t flat = n * g.c + c0;
    const lane_ctx<V, true> ctx{flat, c0, nc};
    if (Lanes == 1 || nc == Lanes) {
      simd::store(out + flat, apply(ep, simd::load<V>(res + (c0 - c_lo)), ctx));
    } else if constexpr (Lanes > 1) {
      const V x = simd::load_partial<V>(res + (c0 - c_lo), nc);
      simd::store_partial(out + flat, apply(ep, x, ctx), nc);
    }
  }
}

}  // namespace detail

template <class Elem, layout_tag Layout, class A = arch::native, class Ep = epilogue<>,
          class B = backend::xsimd>
struct pool2d : image_kernel_types<Layout, Ep> {
  static_assert(std::is_same_v<Elem, f32> || std::is_same_v<Elem, bf16> ||
                    std::is_same_v<Elem, i8> || std::is_same_v<Elem, u8>,
                "kfuse::pool2d: element type must be f32, bf16, i8 or u8");
  using vec = simd::vec_for<A, B>;
  using storage = storage_t<Elem>;
  static constexpr bool integer = elem_traits<Elem>::is_quantized;
  /// Integer averages are exact for windows of at most this many elements (global: any size).
  static constexpr index_t max_int_window = 16384;
  static constexpr std::string_view name = "pool2d";

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  using problem = pool_shape;
  /// The shape and the average divisors, separable: count(oh, ow) = hcnt[oh] * wcnt[ow].
  struct packed {
    pool_shape shape{};
    std::vector<float> hcnt, wcnt;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };

  static kernel_status can_implement(const pool_shape& s) {
    return detail::status_of(name, [&] {
      detail::check_pool_shape(name, s);
      if (integer && s.kind == pool_kind::avg && !s.global && s.r * s.s > max_int_window)
        detail::fail(name, "integer average pooling windows are limited to " +
                               std::to_string(max_int_window) +
                               " elements (exact rounding); use global pooling for whole planes");
    });
  }
  /// NCHW windowed pooling copies the rows a block reads into padded f32 rows: one slot per
  /// thread. NHWC and global pooling need none.
  static std::size_t workspace_size(const pool_shape& s, int threads) {
    detail::require(name, can_implement(s));
    return std::size_t(std::max(threads, 1)) * slot_bytes(s);
  }
  static packed initialize(const pool_shape& s) {
    detail::require(name, can_implement(s));
    packed p;
    p.shape = s;
    if (s.kind == pool_kind::avg && !s.global) {
      p.hcnt =
          counts(s.h, s.r, s.stride_h, s.pad_top, s.pad_bottom, s.out_h(), s.count_include_pad);
      p.wcnt =
          counts(s.w, s.s, s.stride_w, s.pad_left, s.pad_right, s.out_w(), s.count_include_pad);
    }
    p.ready = true;
    return p;
  }

  /// The convenience form for direct callers: initialize() and a workspace per call.
  template <class In, class Out>
  static run_info run(tensor_view<In, Layout> in, const pool_shape& s, tensor_view<Out, Layout> out,
                      const Ep& ep = {}, const run_options& opt = {}, std::int32_t zero_point = 0) {
    const packed p = initialize(s);
    const workspace_buffer ws = detail::own_workspace<pool2d>(s, pool_threads(opt.threads));
    return run(in, p, out, ep, ws.view(), opt, zero_point);
  }

  /// out = epilogue(pool(in)). In: Elem's storage type; integers with zero point `zero_point`
  /// (the output uses the same quantization). Out: In's type, a float type, or what the
  /// epilogue produces. Scratch from `ws` (workspace_size()); allocates nothing.
  template <class In, class Out>
  static run_info run(tensor_view<In, Layout> in, const packed& pk, tensor_view<Out, Layout> out,
                      const Ep& ep, workspace ws, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    using T = std::remove_const_t<In>;
    constexpr std::string_view k = name;
    static_assert(std::is_same_v<T, storage>,
                  "kfuse::pool2d: the input's storage type does not match the element tag");
    using produced = typename epilogue_traits<Ep>::output_elem;
    static_assert(std::is_same_v<elem_of<Out>,
                                 std::conditional_t<std::is_void_v<produced>, Elem, produced>> ||
                      (std::is_void_v<produced> && elem_traits<elem_of<Out>>::is_float),
                  "kfuse::pool2d: the output type must be the input's, a float type, or what "
                  "the epilogue produces");
    if (pk.empty()) detail::fail(k, "the pooling is not initialized (initialize(shape))");
    const pool_shape& s = pk.shape;
    if constexpr (integer) {
      if (zero_point < elem_traits<Elem>::min || zero_point > elem_traits<Elem>::max)
        detail::fail(k,
                     "zero point " + std::to_string(zero_point) + " is outside the element range");
    } else if (zero_point != 0) {
      detail::fail(k, "a zero point is only meaningful for integer elements");
    }
    if (!(in.dims == s.in_dims()))
      detail::fail(k, "input dims " + dims_text(in.dims) + " do not match the shape's " +
                          dims_text(s.in_dims()));
    const dims4 od = s.out_dims();
    if (!(out.dims == od))
      detail::fail(
          k, "output dims " + dims_text(out.dims) + " do not match the pooling's " + dims_text(od));
    const index_t n_in = numel(s.in_dims()), n_out = numel(od);
    detail::check_buffer(k, "input", in.data, n_in);
    detail::check_buffer(k, "output", out.data, n_out);
    detail::check_disjoint(k, "input", in.data, n_in, out.data, n_out);
    validate(ep, k, n_out, s.c, out.data, sizeof(Out) * std::size_t(n_out), sizeof(Out));
    if (n_out == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};

    const bool is_max = s.kind == pool_kind::max;
    const index_t ohn = od.h, own = od.w;
    const detail::pool_geom g{s.n,
                              s.c,
                              s.h,
                              s.w,
                              ohn,
                              own,
                              s.global ? s.h : s.r,
                              s.global ? s.w : s.s,
                              s.stride_h,
                              s.stride_w,
                              s.pad_top,
                              s.pad_left,
                              is_max,
                              float(integer ? zero_point : 0),
                              pk.hcnt.data(),
                              pk.wcnt.data()};
    const T* x = in.data;
    Out* y = out.data;
    const std::size_t slot = slot_bytes(s);
    const int threads = detail::workspace_threads(k, ws, slot, pool_threads(opt.threads));
    run_info info{k, A::name, simd::impl_name<A, B>(), "", 1};
    if (s.global) {
      info.micro_kernel = is_max ? "global max" : "global avg";
      constexpr index_t group = 64;  // channels per work item (the result buffer)
      // An integer mean stored as it is gets rounded half to even in double (exact for any
      // plane size); with epilogue stages it enters them unrounded, as in windowed pooling.
      const bool round_mean =
          integer && !is_max && epilogue_traits<Ep>::size == 0 && std::is_integral_v<Out>;
      const index_t groups = (s.c + group - 1) / group, units = s.n * groups;
      info.threads = int(std::min<index_t>(threads, units));
      parallel_for(
          0, units, 1,
          [&](range rg, int) {
            for (index_t u = rg.begin; u < rg.end; ++u) {
              const index_t n = u / groups, c_lo = (u % groups) * group;
              detail::pool_global<vec, Layout>(x, g, n, c_lo, std::min(s.c, c_lo + group),
                                               round_mean, y, ep);
            }
          },
          threads);
      return info;
    }
    info.micro_kernel = is_max ? (std::is_same_v<Layout, nhwc> ? "nhwc max" : "nchw max")
                               : (std::is_same_v<Layout, nhwc> ? "nhwc avg" : "nchw avg");
    if constexpr (std::is_same_v<Layout, nhwc>) {
      const index_t rows = s.n * ohn;
      const index_t grain = std::max<index_t>(1, rows / (4 * threads));
      info.threads = int(std::min<index_t>(threads, (rows + grain - 1) / grain));
      parallel_for(
          0, rows, grain,
          [&](range rg, int) {
            for (index_t row = rg.begin; row < rg.end; ++row)
              if (is_max)
                detail::pool_nhwc_row<vec, true>(x, g, row / ohn, row % ohn, y, ep);
              else
                detail::pool_nhwc_row<vec, false>(x, g, row / ohn, row % ohn, y, ep);
          },
          threads);
    } else {
      const index_t planes = s.n * s.c;
      const index_t want = (4 * threads + planes - 1) / planes;
      const index_t blocks = std::min(want, ohn), rows_per = (ohn + blocks - 1) / blocks;
      const index_t units = planes * blocks;
      // Ranges of several planes: their padding cells are written once per range.
      const index_t grain = std::max<index_t>(1, units / (4 * threads));
      info.threads = int(std::min<index_t>(threads, (units + grain - 1) / grain));
      parallel_for(
          0, units, grain,
          [&](range rg, int worker) {
            float* sc = ws.slot<float>(worker, slot);
            // With one block per plane every unit reads the same rows (the same padding cells).
            bool fill_pads = true;
            for (index_t u = rg.begin; u < rg.end; ++u) {
              const index_t plane = u / blocks, b = u % blocks;
              const index_t oh_a = b * rows_per, oh_b = std::min(ohn, oh_a + rows_per);
              if (oh_a >= oh_b) continue;
              if (is_max)
                detail::pool_nchw_block<vec, true>(x, g, plane / s.c, plane % s.c, oh_a, oh_b, sc,
                                                   fill_pads, y, ep);
              else
                detail::pool_nchw_block<vec, false>(x, g, plane / s.c, plane % s.c, oh_a, oh_b, sc,
                                                    fill_pads, y, ep);
              fill_pads = blocks > 1;
            }
          },
          threads);
    }
    return info;
  }

 private:
  /// One thread's scratch: NCHW windowed pooling only.
  static std::size_t slot_bytes(const pool_shape& s) {
    if (!std::is_same_v<Layout, nchw> || s.global || s.n <= 0 || s.c <= 0 || s.out_h() <= 0 ||
        s.out_w() <= 0)
      return 0;
    return workspace_round(sizeof(float) * detail::pool_nchw_scratch_floats<vec::lanes>(s));
  }
  /// Divisor factor of each output position along one axis (PyTorch's avg_pool2d rule).
  static std::vector<float> counts(index_t in, index_t k, index_t stride, index_t lo, index_t hi,
                                   index_t outs, bool include_pad) {
    std::vector<float> v(static_cast<std::size_t>(outs));
    for (index_t o = 0; o < outs; ++o) {
      const index_t start = o * stride - lo, end = std::min(start + k, in + hi);
      const index_t n = include_pad ? end - start : std::min(end, in) - std::max<index_t>(start, 0);
      v[std::size_t(o)] = float(n);
    }
    return v;
  }
  static std::string dims_text(const dims4& d) {
    return "(N " + std::to_string(d.n) + ", C " + std::to_string(d.c) + ", H " +
           std::to_string(d.h) + ", W " + std::to_string(d.w) + ")";
  }
};

KFUSE_END_NAMESPACE
