#pragma once
// softmax's row algorithms (kernels/softmax.hpp has the method and the calls): the last axis as
// cached rows or online, and the other axes vectorized over the inner extent. Each takes one
// thread's rows; softmax.hpp splits the rows over threads and picks the method.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/simd/fast_math.hpp"
#include "kfuse/simd/reduce.hpp"
#include "kfuse/simd/stream.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/types/convert.hpp"

namespace kfuse {

enum class softmax_method {
  automatic,    // cached rows up to softmax_cached_row_limit elements, online above
  cached_rows,  // three passes, one exp per element (best when the row stays in cache)
  online,       // running max + rescaled sum, then one pass: two reads of the row
};

/// Rows longer than this (elements) use the online method under softmax_method::automatic:
/// 32 Ki f32 = 128 KiB, well inside the L2 share of a core.
inline constexpr index_t softmax_cached_row_limit = index_t(1) << 15;

/// Cached rows up to this length (elements) keep exp(x - max) in a 32 KiB stack buffer when the
/// output is not f32 or is written with streaming stores (kfuse::detail::stream_min_bytes()).
inline constexpr index_t softmax_scratch_row_limit = index_t(1) << 13;

struct softmax_options {
  bool log = false;  // log_softmax
  softmax_method method = softmax_method::automatic;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

template <class T>
inline constexpr bool is_float_storage =
    std::is_same_v<T, float> || std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

/// exp(d) for d <= 0 (NaN stays NaN; d = -inf gives 0).
template <class V>
KFUSE_INLINE V softmax_exp(V d) {
  return simd::exp2_bounded(simd::max(V(-127.f), d * V(1.4426950408889634f)));
}

// ------------------------------------------------------------------------ last axis, cached
template <class V, class In>
KFUSE_INLINE float row_max(const In* x, index_t n) {
  constexpr int L = V::lanes;
  if (n < L) {
    float m = to_float(x[0]);
    for (index_t j = 1; j < n; ++j) m = std::max(m, to_float(x[j]));
    return m;
  }
  V m0 = simd::load<V>(x), m1 = m0, m2 = m0, m3 = m0;
  index_t j = L;
  for (; j + 4 * L <= n; j += 4 * L) {
    m0 = simd::max(m0, simd::load<V>(x + j));
    m1 = simd::max(m1, simd::load<V>(x + j + L));
    m2 = simd::max(m2, simd::load<V>(x + j + 2 * L));
    m3 = simd::max(m3, simd::load<V>(x + j + 3 * L));
  }
  for (; j + L <= n; j += L) m0 = simd::max(m0, simd::load<V>(x + j));
  if (j < n) m1 = simd::max(m1, simd::load<V>(x + n - L));  // overlaps: max is idempotent
  return lane_max(simd::max(simd::max(m0, m1), simd::max(m2, m3)));
}

// Sum of exp(x - m) over the row; with Store, exp(x - m) is also written to y, as Y (f32, or
// rounded once to a narrower type).
template <class V, bool Store, class Y = float, class In>
KFUSE_INLINE float row_exp_sum(const In* x, std::type_identity_t<Y>* y, index_t n, float m) {
  constexpr int L = V::lanes;
  const V vm(m);
  V s0(0.f), s1(0.f), s2(0.f), s3(0.f);
  index_t j = 0;
  for (; j + 4 * L <= n; j += 4 * L) {
    const V e0 = softmax_exp(simd::load<V>(x + j) - vm);
    const V e1 = softmax_exp(simd::load<V>(x + j + L) - vm);
    const V e2 = softmax_exp(simd::load<V>(x + j + 2 * L) - vm);
    const V e3 = softmax_exp(simd::load<V>(x + j + 3 * L) - vm);
    if constexpr (Store) {
      simd::store(y + j, e0);
      simd::store(y + j + L, e1);
      simd::store(y + j + 2 * L, e2);
      simd::store(y + j + 3 * L, e3);
    }
    s0 += e0;
    s1 += e1;
    s2 += e2;
    s3 += e3;
  }
  for (; j + L <= n; j += L) {
    const V e = softmax_exp(simd::load<V>(x + j) - vm);
    if constexpr (Store) simd::store(y + j, e);
    s0 += e;
  }
  float tail = 0.f;
  if (j < n) {  // the padding lanes of a partial load must not reach the sum
    const int r = int(n - j);
    alignas(64) float t[L];
    simd::store(t, softmax_exp(simd::load_partial<V>(x + j, r) - vm));
    if constexpr (Store && std::is_same_v<Y, float>)
      std::memcpy(y + j, t, sizeof(float) * std::size_t(r));
    else if constexpr (Store)
      for (int k = 0; k < r; ++k) y[j + k] = from_float<Y>(t[k]);
    for (int k = 0; k < r; ++k) tail += t[k];
  }
  return lane_sum((s0 + s1) + (s2 + s3)) + tail;
}

// Sum of 2^max(-127, x * a + b) over the row, also written to y as Y (simd::store_dot): the
// online softmax of attention, whose scale, running max and change of base to 2 are the one FMA
// (a = scale * log2(e) on raw scores, or log2(e) on scores already scaled and biased; b = -max *
// log2(e)). Coarse: exp2_coarse (8e-5 relative) for probabilities rounded to bf16 after.
template <class V, bool Coarse, class Y>
KFUSE_INLINE float row_exp2_sum(const float* x, Y* y, index_t n, float a, float b) {
  constexpr int L = V::lanes;
  const V va(a), vb(b);
  const auto e2 = [&](V v) KFUSE_INLINE_LAMBDA {
    const V s = simd::max(V(-127.f), simd::fma(v, va, vb));  // max(lo, s): NaN survives
    if constexpr (Coarse)
      return simd::exp2_coarse(s);
    else
      return simd::exp2_bounded(s);
  };
  V s0(0.f), s1(0.f);
  index_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    const V e0 = e2(simd::load<V>(x + j)), e1 = e2(simd::load<V>(x + j + L));
    simd::store_dot(y + j, e0);
    simd::store_dot(y + j + L, e1);
    s0 += e0;
    s1 += e1;
  }
  for (; j + L <= n; j += L) {
    const V e = e2(simd::load<V>(x + j));
    simd::store_dot(y + j, e);
    s0 += e;
  }
  float tail = 0.f;
  if (j < n) {  // the padding lanes of a partial load must not reach the sum
    const int r = int(n - j);
    alignas(64) float t[L];
    simd::store(t, e2(simd::load_partial<V>(x + j, r)));
    for (int k = 0; k < r; ++k) {
      y[j + k] = from_float<Y>(t[k]);
      tail += t[k];
    }
  }
  return lane_sum(s0 + s1) + tail;
}

// y = f(x) over the row, with f a V -> V map (the last pass).
// With Stream, y is vector-aligned, n a whole number of vectors, and the stores non-temporal.
template <class V, bool Stream = false, class In, class Out, class F>
KFUSE_INLINE void row_map(const In* x, Out* y, index_t n, F f) {
  constexpr int L = V::lanes;
  index_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    const V a = f(simd::load<V>(x + j));
    const V b = f(simd::load<V>(x + j + L));
    store_row<Stream>(y + j, a);
    store_row<Stream>(y + j + L, b);
  }
  for (; j + L <= n; j += L) store_row<Stream>(y + j, f(simd::load<V>(x + j)));
  if (j < n) {
    const int r = int(n - j);
    simd::store_partial(y + j, f(simd::load_partial<V>(x + j, r)), r);
  }
}

// With a scratch row (n <= softmax_scratch_row_limit, in L1), exp(x - m) goes there and the
// last pass scales it into y: used for streaming stores and for non-f32 outputs (which cannot
// hold the unscaled exp without a second rounding). Without one, an f32 y holds the exp and is
// scaled in place, and other outputs recompute the exp in the last pass.
// The row's max m comes in; the max of the next row (if any) is computed between this row's
// sum and its last pass and returned, so that each reduction's latency overlaps independent
// work (and the next row's loads start early) instead of stalling the row.
template <class V, bool Stream, class In, class Out>
float softmax_row_cached(const In* x, Out* y, index_t n, bool log, float* scratch, float m,
                         const In* next) {
  const V vm(m);
  auto next_max = [&] { return next ? row_max<V>(next, n) : 0.f; };
  float m_next;
  if (log) {
    const float s = row_exp_sum<V, false>(x, nullptr, n, m);
    m_next = next_max();
    // (x - m) - log(s), not x - (m + log(s)): m + log(s) would round at the scale of m.
    const V ls(std::log(s));
    row_map<V, Stream>(x, y, n, [&](V v) { return (v - vm) - ls; });
  } else if (scratch) {
    const float s = row_exp_sum<V, true>(x, scratch, n, m);
    m_next = next_max();
    const V r(1.f / s);
    row_map<V, Stream>(static_cast<const float*>(scratch), y, n, [&](V v) { return v * r; });
  } else if constexpr (std::is_same_v<Out, float>) {
    const float s = row_exp_sum<V, true>(x, y, n, m);
    m_next = next_max();
    const V r(1.f / s);
    row_map<V>(static_cast<const float*>(y), y, n, [&](V v) { return v * r; });
  } else {
    const float s = row_exp_sum<V, false>(x, nullptr, n, m);
    m_next = next_max();
    const V r(1.f / s);
    row_map<V>(x, y, n, [&](V v) { return softmax_exp(v - vm) * r; });
  }
  return m_next;
}

// ------------------------------------------------------------------------- last axis, online
template <class V, bool Stream, class In, class Out>
void softmax_row_online(const In* x, Out* y, index_t n, bool log) {
  constexpr int L = V::lanes;
  // Per lane: running max m and sum s of exp(x - m). -FLT_MAX, not -inf, so that a lane that
  // has seen only -inf rescales by exp(0) instead of exp(NaN).
  constexpr float lowest = std::numeric_limits<float>::lowest();
  V m(lowest), s(0.f);
  // exp(m - mn), exactly 1 where the max did not move: the polynomial's exp(0) is 1 + 1 ulp,
  // which would bias the sum by one ulp per block of a long row.
  auto rescale = [](V m_old, V m_new) {
    return simd::select(m_old < m_new, softmax_exp(m_old - m_new), V(1.f));
  };
  index_t j = 0;
  for (; j + 4 * L <= n; j += 4 * L) {
    const V a = simd::load<V>(x + j), b = simd::load<V>(x + j + L);
    const V c = simd::load<V>(x + j + 2 * L), d = simd::load<V>(x + j + 3 * L);
    const V mn = simd::max(m, simd::max(simd::max(a, b), simd::max(c, d)));
    const V sum4 =
        (softmax_exp(a - mn) + softmax_exp(b - mn)) + (softmax_exp(c - mn) + softmax_exp(d - mn));
    s = simd::fma(s, rescale(m, mn), sum4);
    m = mn;
  }
  for (; j + L <= n; j += L) {
    const V a = simd::load<V>(x + j);
    const V mn = simd::max(m, a);
    s = simd::fma(s, rescale(m, mn), softmax_exp(a - mn));
    m = mn;
  }
  alignas(64) float ml[L], sl[L];
  simd::store(ml, m);
  simd::store(sl, s);
  float mx = ml[0];
  for (int k = 1; k < L; ++k) mx = std::max(mx, ml[k]);
  for (index_t t = j; t < n; ++t) mx = std::max(mx, to_float(x[t]));
  double sum = 0;
  for (int k = 0; k < L; ++k) sum += double(sl[k]) * std::exp(double(ml[k]) - double(mx));
  for (index_t t = j; t < n; ++t) sum += std::exp(double(to_float(x[t])) - double(mx));
  const V vm(mx);
  if (log) {
    const V ls(float(std::log(sum)));
    row_map<V, Stream>(x, y, n, [&](V v) { return (v - vm) - ls; });
  } else {
    const V r(float(1.0 / sum));
    row_map<V, Stream>(x, y, n, [&](V v) { return softmax_exp(v - vm) * r; });
  }
}

// ------------------------------------------------------------------------- other axes
// Columns [0, NV * L) (or the first r < L columns when Partial) of an axis x inner slice:
// x and y point at column 0 of axis position 0, positions are `inner` elements apart.
template <class V, int NV, bool Partial, class In, class Out>
KFUSE_INLINE void softmax_columns(const In* x, Out* y, index_t axis, index_t inner, int r,
                                  bool log) {
  constexpr int L = V::lanes;
  auto ld = [&](const auto* p) {
    if constexpr (Partial)
      return simd::load_partial<V>(p, r);
    else
      return simd::load<V>(p);
  };
  auto st = [&](auto* p, V v) {
    if constexpr (Partial)
      simd::store_partial(p, v, r);
    else
      simd::store(p, v);
  };
  // Padding lanes of partial loads are zeros: harmless, every lane is its own column.
  V m[NV], s[NV];
  for (int k = 0; k < NV; ++k) {
    m[k] = ld(x + k * L);
    s[k] = V(0.f);
  }
  for (index_t a = 1; a < axis; ++a)
    for (int k = 0; k < NV; ++k) m[k] = simd::max(m[k], ld(x + a * inner + k * L));
  constexpr bool store_exp = std::is_same_v<Out, float>;
  for (index_t a = 0; a < axis; ++a)
    for (int k = 0; k < NV; ++k) {
      const V e = softmax_exp(ld(x + a * inner + k * L) - m[k]);
      if constexpr (store_exp)
        if (!log) st(y + a * inner + k * L, e);
      s[k] += e;
    }
  if (log) {
    alignas(64) float sk[L];
    for (int k = 0; k < NV; ++k) {
      simd::store(sk, s[k]);
      for (int l = 0; l < L; ++l) sk[l] = std::log(sk[l]);
      s[k] = simd::load<V>(static_cast<const float*>(sk));
    }
    for (index_t a = 0; a < axis; ++a)
      for (int k = 0; k < NV; ++k)
        st(y + a * inner + k * L, (ld(x + a * inner + k * L) - m[k]) - s[k]);
    return;
  }
  for (int k = 0; k < NV; ++k) s[k] = V(1.f) / s[k];
  for (index_t a = 0; a < axis; ++a)
    for (int k = 0; k < NV; ++k) {
      if constexpr (store_exp) {
        const float* e = y + a * inner + k * L;
        st(y + a * inner + k * L, ld(e) * s[k]);
      } else {
        st(y + a * inner + k * L, softmax_exp(ld(x + a * inner + k * L) - m[k]) * s[k]);
      }
    }
}

template <class V, class In, class Out>
void softmax_column_group(const In* x, Out* y, index_t axis, index_t inner, index_t width,
                          bool log) {
  constexpr int L = V::lanes;
  const int nv = int(width / L), r = int(width % L);
  switch (nv) {
    case 4:
      softmax_columns<V, 4, false>(x, y, axis, inner, 0, log);
      break;
    case 3:
      softmax_columns<V, 3, false>(x, y, axis, inner, 0, log);
      break;
    case 2:
      softmax_columns<V, 2, false>(x, y, axis, inner, 0, log);
      break;
    case 1:
      softmax_columns<V, 1, false>(x, y, axis, inner, 0, log);
      break;
    default:
      break;
  }
  if (r) softmax_columns<V, 1, true>(x + nv * L, y + nv * L, axis, inner, r, log);
}

}  // namespace detail
KFUSE_END_NAMESPACE
