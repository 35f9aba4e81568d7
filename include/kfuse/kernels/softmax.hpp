#pragma once
// softmax: y = exp(x - max) / sum(exp(x - max)) over one axis of a dense tensor (log_softmax
// with softmax_options{.log = true}: y = x - max - log(sum)). f32 compute for every storage type.
//
//   kfuse::softmax(x, y, rows, cols);                                  // last axis of a matrix
//   const kfuse::index_t shape[] = {n, heads, len, len};
//   kfuse::softmax(x, y, shape, 1);                                    // any axis
//   kfuse::softmax(kfuse::view<kfuse::nchw>(x, d), kfuse::view<kfuse::nchw>(y, d), 1);  // over C
//
// Last axis (the row is contiguous), two methods:
//  - cached rows (rows up to softmax_cached_row_limit elements): pass 1 max, pass 2 exp(x - max)
//    stored into the f32 output while summing, pass 3 scales the output in place. One exp per
//    element; passes 2 and 3 hit the row in L1/L2, so memory sees one read and one write.
//    A non-f32 output cannot hold the unscaled exp without a second rounding: it goes to an L1
//    scratch row instead (rows up to softmax_scratch_row_limit; longer ones recompute the exp).
//    Large f32 outputs (8 MiB and more, aligned) use the scratch row too and streaming stores.
//  - online (longer rows): pass 1 keeps a running max and a rescaled sum per lane (one rescale
//    per block of 4 vectors), pass 2 computes exp and scale and stores: two reads and one write
//    of memory whatever the row length, about 2.25 exps per element.
// Other axes (outer x axis x inner, inner contiguous): vectorized over inner, 4 vectors of
// columns at a time with their max and sum in registers, the same three passes down the axis.
//
// Every exp is exp(d) for d = x - max <= 0: 2^(d log2 e) by simd::exp2_bounded (relative error
// < 3e-7), with d log2 e clamped at -127 so that -inf entries give exactly 0. Subtracting before
// scaling keeps large values (1e4) exact. A row whose entries are all -inf (or contains +inf or
// NaN) gives NaN, as the formula does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/simd/fast_math.hpp"
#include "kfuse/simd/reduce.hpp"
#include "kfuse/simd/stream.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/threading/thread_pool.hpp"
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
/// output is not f32 or is written with streaming stores (kfuse::detail::stream_min_bytes).
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

inline std::string shape_string(std::span<const index_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <class A, class B, class In, class Out>
run_info softmax_impl(const In* in, Out* out, index_t outer, index_t axis, index_t inner,
                      const softmax_options& so, const run_options& opt) {
  static_assert(is_float_storage<In> && is_float_storage<Out>,
                "kfuse::softmax: input and output must be float storage types (float, bf16_t, "
                "f16_t)");
  using V = simd::vec_for<A, B>;
  constexpr int L = V::lanes;
  constexpr std::string_view k = "softmax";
  const index_t n = checked_count(k, "the tensor", {outer, axis, inner});
  check_buffer(k, "input", in, n);
  check_buffer(k, "output", out, n);
  check_overlap(k, in, n, out, n);
  if (n == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};
  // ~64 KiB of input per chunk of work: amortizes the hand-off, still balances.
  constexpr index_t target = index_t(1) << 14;
  const int pool = pool_threads(opt.threads, "softmax");
  if (inner == 1) {
    const bool online = so.method == softmax_method::online ||
                        (so.method == softmax_method::automatic && axis > softmax_cached_row_limit);
    const bool stream =
        use_streaming_stores<V>(out, outer, axis) && (online || axis <= softmax_scratch_row_limit);
    const index_t grain = streaming_grain(std::max<index_t>(1, target / axis), outer, pool, stream);
    auto rows_with = [&]<bool Stream>() {
      parallel_for(
          0, outer, grain,
          [&](range r, int) {
            constexpr bool f32_out = std::is_same_v<Out, float>;
            alignas(64) float scratch[Stream || !f32_out ? softmax_scratch_row_limit : 1];
            float* row_scratch =
                (Stream || !f32_out) && axis <= softmax_scratch_row_limit ? scratch : nullptr;
            if (online) {
              for (index_t row = r.begin; row < r.end; ++row)
                softmax_row_online<V, Stream>(in + row * axis, out + row * axis, axis, so.log);
            } else {
              float m = row_max<V>(in + r.begin * axis, axis);
              for (index_t row = r.begin; row < r.end; ++row) {
                const In* x = in + row * axis;
                m = softmax_row_cached<V, Stream>(x, out + row * axis, axis, so.log, row_scratch, m,
                                                  row + 1 < r.end ? x + axis : nullptr);
              }
            }
            if constexpr (Stream) stream_fence();
          },
          opt.threads);
    };
    if constexpr (std::is_same_v<Out, float> && stream_ops<typename V::impl>::available) {
      if (stream)
        rows_with.template operator()<true>();
      else
        rows_with.template operator()<false>();
    } else {
      rows_with.template operator()<false>();
    }
    const int used = int(std::min<index_t>(pool, (outer + grain - 1) / grain));
    const char* mk = online ? (stream ? "online rows, streaming stores" : "online rows")
                            : (stream ? "cached rows, streaming stores" : "cached rows");
    return run_info{k, A::name, simd::impl_name<A, B>(), mk, used};
  }
  const index_t group = 4 * L;
  const index_t groups = (inner + group - 1) / group;
  const index_t items = outer * groups;
  const index_t grain = std::max<index_t>(1, target / (axis * group));
  parallel_for(
      0, items, grain,
      [&](range r, int) {
        for (index_t it = r.begin; it < r.end; ++it) {
          const index_t o = it / groups, c0 = (it % groups) * group;
          const index_t off = o * axis * inner + c0;
          softmax_column_group<V>(in + off, out + off, axis, inner, std::min(group, inner - c0),
                                  so.log);
        }
      },
      opt.threads);
  const int used = int(std::min<index_t>(pool, (items + grain - 1) / grain));
  return run_info{k, A::name, simd::impl_name<A, B>(), "columns", used};
}

template <class A, class B, class In, class Out>
run_info softmax_shape(const In* in, Out* out, std::span<const index_t> shape, int axis,
                       const softmax_options& so, const run_options& opt) {
  constexpr std::string_view k = "softmax";
  const int rank = int(shape.size());
  if (axis < -rank || axis >= rank)
    fail(k, "axis " + std::to_string(axis) + " is out of range for a " + std::to_string(rank) +
                "-D tensor of shape " + shape_string(shape));
  if (axis < 0) axis += rank;
  checked_count(k, "the tensor", shape);  // then every partial product below fits
  index_t outer = 1, inner = 1;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < 0) fail(k, "negative extent in shape " + shape_string(shape));
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  return softmax_impl<A, B>(in, out, outer, shape[axis], inner, so, opt);
}

}  // namespace detail

/// Softmax over `axis` (negative counts from the end) of a dense tensor of extents `shape`
/// (row-major, last extent contiguous).
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info softmax(const In* in, Out* out, std::span<const index_t> shape, int axis,
                 const softmax_options& so = {}, const run_options& opt = {}) {
  return detail::softmax_shape<A, B>(in, out, shape, axis, so, opt);
}

/// Softmax over the last axis of a rows x cols matrix.
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info softmax(const In* in, Out* out, index_t rows, index_t cols, const softmax_options& so = {},
                 const run_options& opt = {}) {
  const index_t shape[2] = {rows, cols};
  return detail::softmax_shape<A, B>(in, out, shape, -1, so, opt);
}

/// Spans: their sizes must equal the product of the extents.
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info softmax(std::span<In> in, std::span<Out> out, std::span<const index_t> shape, int axis,
                 const softmax_options& so = {}, const run_options& opt = {}) {
  const index_t n = detail::checked_count("softmax", "the tensor", shape);
  if (index_t(in.size()) != n || index_t(out.size()) != n)
    detail::fail("softmax", "input has " + std::to_string(in.size()) + " elements and output " +
                                std::to_string(out.size()) + ", shape " +
                                detail::shape_string(shape) + " has " + std::to_string(n));
  return detail::softmax_shape<A, B>(static_cast<const std::remove_const_t<In>*>(in.data()),
                                     out.data(), shape, axis, so, opt);
}

/// A 4-D tensor in layout L; `axis` is logical: 0 = N, 1 = C, 2 = H, 3 = W.
template <class A = arch::native, class B = backend::xsimd, class In, class Out, layout_tag L>
run_info softmax(tensor_view<In, L> in, tensor_view<Out, L> out, int axis,
                 const softmax_options& so = {}, const run_options& opt = {}) {
  if (!(in.dims == out.dims)) detail::fail("softmax", "input and output shapes differ");
  if (axis < -4 || axis >= 4)
    detail::fail("softmax", "axis " + std::to_string(axis) + " is out of range for a 4-D tensor");
  if (axis < 0) axis += 4;
  const dims4& d = in.dims;
  index_t shape[4];
  int mem_axis = axis;
  if constexpr (std::is_same_v<L, nchw>) {
    shape[0] = d.n, shape[1] = d.c, shape[2] = d.h, shape[3] = d.w;
  } else {
    shape[0] = d.n, shape[1] = d.h, shape[2] = d.w, shape[3] = d.c;
    constexpr int to_mem[4] = {0, 3, 1, 2};
    mem_axis = to_mem[axis];
  }
  return detail::softmax_shape<A, B>(static_cast<const std::remove_const_t<In>*>(in.data), out.data,
                                     std::span<const index_t>(shape, 4), mem_axis, so, opt);
}

/// Softmax (or log-softmax) over one axis of a dense tensor as a kernel of the contract
/// (kernels/kernel_contract.hpp): the problem is the extents (memory order, rank <= 8) and the
/// axis; run() takes flat views of its element count. No workspace (a cached row lives on the
/// stack) and no epilogue.
template <class A = arch::native, class B = backend::xsimd>
struct softmax_kernel {
  static constexpr std::string_view name = "softmax";
  struct problem {
    index_t shape[8] = {};
    int rank = 0;
    int axis = -1;  // negative: from the end
    softmax_options options{};
  };
  struct packed {
    problem p{};
    index_t count = 0;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;
  using extents = index_t;
  template <class T>
  using view = flat_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      if (p.rank < 1 || p.rank > 8)
        detail::fail(name, "rank " + std::to_string(p.rank) + " (1 to 8)");
      if (p.axis < -p.rank || p.axis >= p.rank)
        detail::fail(name, "axis " + std::to_string(p.axis) + " is out of range for rank " +
                               std::to_string(p.rank));
      detail::checked_count(name, "the tensor",
                            std::span<const index_t>(p.shape, std::size_t(p.rank)));
    });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<softmax_kernel>(p);
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return {p,
            detail::checked_count(name, "the tensor",
                                  std::span<const index_t>(p.shape, std::size_t(p.rank))),
            true};
  }
  template <class In, class Out>
  static run_info run(flat_view<const In> in, const packed& k, flat_view<Out> out,
                      const epilogue<>&, workspace, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    if (k.empty()) detail::fail(name, "the softmax is not initialized (initialize(problem))");
    if (zero_point != 0) detail::fail(name, "a zero point is only meaningful for integer inputs");
    if (in.count != k.count || out.count != k.count)
      detail::fail(name, "views of " + std::to_string(in.count) + " and " +
                             std::to_string(out.count) + " elements, the tensor has " +
                             std::to_string(k.count));
    return detail::softmax_shape<A, B>(in.data, out.data,
                                       std::span<const index_t>(k.p.shape, std::size_t(k.p.rank)),
                                       k.p.axis, k.p.options, opt);
  }
};

KFUSE_END_NAMESPACE
