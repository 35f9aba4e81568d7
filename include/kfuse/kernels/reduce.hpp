#pragma once
// reduce: sum, mean, max, min, prod, L1, L2, sum of squares or log-sum-exp over any set of axes
// of a dense tensor (ONNX Reduce*, torch.sum / amax / logsumexp over dims).
//
//   const kfuse::index_t shape[] = {8, 12, 128, 64};
//   const bool axes[] = {false, true, false, true};
//   kfuse::reduce(x, y, shape, axes, kfuse::reduce_kind::mean);   // y: [8, 1, 128, 1] values
//
// Adjacent axes of the same kind (reduced or kept) are merged and extents of 1 dropped, so the
// loops see at most 8 alternating axes. Two loop orders:
//  - the last axis kept (a "columns" reduction, e.g. over the batch or the sequence): each output
//    row of W contiguous values accumulates whole input rows, vectorized along W, visiting the
//    reduced positions in memory order;
//  - the last axis reduced ("rows", e.g. LayerNorm statistics, a mean over the features): each
//    output value reduces contiguous runs with 4 vector accumulators, then across the lanes.
// Accumulation is f32 (lanes and 4 accumulators split the sum; |error| <~ count * 2^-24 *
// sum |x| at worst). max / min propagate NaN; log-sum-exp subtracts the max first (no overflow;
// all -inf gives -inf). Work is split over output rows / values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/simd/reduce.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/reduce_kind.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// A reduction after merging: `rank` axes in memory order, alternating kept / reduced.
struct reduce_plan {
  static constexpr int max_rank = 8;
  int rank = 0;
  index_t dims[max_rank] = {};
  bool reduced[max_rank] = {};
  index_t count = 0;  // reduced positions per output value
  index_t outputs = 0;
};

inline reduce_plan make_reduce_plan(std::string_view k, std::span<const index_t> shape,
                                    std::span<const bool> axes) {
  if (shape.size() != axes.size())
    fail(k, std::to_string(axes.size()) + " axis flags for a " + std::to_string(shape.size()) +
                "-D tensor");
  if (shape.size() > std::size_t(reduce_plan::max_rank))
    fail(k, "rank " + std::to_string(shape.size()) + " (at most 8)");
  checked_count(k, "the tensor", shape);
  reduce_plan p;
  p.count = p.outputs = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1) fail(k, "extent " + std::to_string(shape[d]) + " (must be positive)");
    (axes[d] ? p.count : p.outputs) *= shape[d];
    if (shape[d] == 1) continue;
    if (p.rank > 0 && p.reduced[p.rank - 1] == axes[d]) {
      p.dims[p.rank - 1] *= shape[d];
    } else {
      p.dims[p.rank] = shape[d];
      p.reduced[p.rank] = axes[d];
      ++p.rank;
    }
  }
  if (p.rank == 0) {  // every extent 1: one value, copied through the kept-axis loop
    p.rank = 1;
    p.dims[0] = 1;
    p.reduced[0] = false;
  }
  return p;
}

/// The accumulator of one reduce_kind, on vectors or floats (V = float for the lane fold).
template <reduce_kind R>
struct reduce_op {
  /// The accumulator is a sum (zero is neutral: tails load zeros; lanes fold by a sum).
  static constexpr bool sum_like = R == reduce_kind::sum || R == reduce_kind::mean ||
                                   R == reduce_kind::l1 || R == reduce_kind::l2 ||
                                   R == reduce_kind::sum_square;
  template <class V>
  static KFUSE_INLINE V init() {
    if constexpr (R == reduce_kind::max || R == reduce_kind::log_sum_exp)
      return V(-std::numeric_limits<float>::infinity());
    else if constexpr (R == reduce_kind::min)
      return V(std::numeric_limits<float>::infinity());
    else if constexpr (R == reduce_kind::prod)
      return V(1.f);
    else
      return V(0.f);
  }
  /// acc (op) x; for log_sum_exp this is the max pass.
  template <class V>
  static KFUSE_INLINE V step(V acc, V x) {
    if constexpr (R == reduce_kind::max || R == reduce_kind::log_sum_exp)
      return simd::select(x <= x, simd::max(x, acc), x);  // max(x, acc) keeps a NaN acc
    else if constexpr (R == reduce_kind::min)
      return simd::select(x <= x, simd::min(x, acc), x);
    else if constexpr (R == reduce_kind::prod)
      return acc * x;
    else if constexpr (R == reduce_kind::l1)
      return acc + simd::abs(x);
    else if constexpr (R == reduce_kind::l2 || R == reduce_kind::sum_square)
      return simd::fma(x, x, acc);
    else
      return acc + x;
  }
  /// Two partial accumulators merged (l1 / l2 / sum_square partials are sums already).
  template <class V>
  static KFUSE_INLINE V combine(V a, V b) {
    if constexpr (sum_like)
      return a + b;
    else
      return step(a, b);
  }
  /// The same on one float (the lanes folded, the tails): NaN propagates as above.
  static KFUSE_INLINE float step(float acc, float x) {
    if constexpr (R == reduce_kind::max || R == reduce_kind::log_sum_exp)
      return x != x || acc != acc ? x + acc : std::max(acc, x);
    else if constexpr (R == reduce_kind::min)
      return x != x || acc != acc ? x + acc : std::min(acc, x);
    else if constexpr (R == reduce_kind::prod)
      return acc * x;
    else if constexpr (R == reduce_kind::l1)
      return acc + std::fabs(x);
    else if constexpr (R == reduce_kind::l2 || R == reduce_kind::sum_square)
      return std::fma(x, x, acc);
    else
      return acc + x;
  }
};

/// The reduction of the lanes of v: a horizontal sum for the sums, else the scalar combine of
/// each lane (max / min keep NaN as the accumulators do).
template <reduce_kind R, class V>
KFUSE_INLINE float lane_fold(V v) {
  if constexpr (reduce_op<R>::sum_like) {
    return lane_sum(v);
  } else {
    alignas(64) float t[V::lanes];
    simd::store(t, v);
    float m = t[0];
    for (int i = 1; i < V::lanes; ++i) m = reduce_op<R>::combine(m, t[i]);
    return m;
  }
}

/// The output value from the accumulated one (mean: / count; l2: sqrt).
template <reduce_kind R>
KFUSE_INLINE float reduce_finish(float acc, index_t count) {
  if constexpr (R == reduce_kind::mean)
    return acc / float(count);
  else if constexpr (R == reduce_kind::l2)
    return std::sqrt(acc);
  else
    return acc;
}

/// Odometer over the reduced axes except the innermost one when it is reduced (the runs):
/// offsets of the reduced positions in memory order.
struct reduce_walk {
  int n = 0;
  index_t ext[reduce_plan::max_rank] = {}, stride[reduce_plan::max_rank] = {};
  index_t total = 1;
  template <class F>
  KFUSE_INLINE void each(F&& f) const {
    index_t idx[reduce_plan::max_rank] = {};
    index_t off = 0;
    for (index_t it = 0; it < total; ++it) {
      f(off);
      for (int d = n - 1; d >= 0; --d) {  // the innermost walked axis moves first
        off += stride[d];
        if (++idx[d] < ext[d]) break;
        off -= stride[d] * ext[d];
        idx[d] = 0;
      }
    }
  }
};

/// A contiguous run of n values reduced with 4 vector accumulators (then the lanes, the tail).
template <reduce_kind R, class V, class In>
KFUSE_INLINE float reduce_run(const In* x, index_t n, float acc) {
  using Op = reduce_op<R>;
  constexpr int L = V::lanes;
  V a0 = Op::template init<V>(), a1 = a0, a2 = a0, a3 = a0;
  index_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 = Op::step(a0, simd::load<V>(x + i));
    a1 = Op::step(a1, simd::load<V>(x + i + L));
    a2 = Op::step(a2, simd::load<V>(x + i + 2 * L));
    a3 = Op::step(a3, simd::load<V>(x + i + 3 * L));
  }
  for (; i + L <= n; i += L) a0 = Op::step(a0, simd::load<V>(x + i));
  if constexpr (Op::sum_like)
    if (i < n) a1 = Op::step(a1, simd::load_partial<V>(x + i, int(n - i)));  // zeros are neutral
  a0 = Op::combine(Op::combine(a0, a1), Op::combine(a2, a3));
  float r = Op::combine(acc, lane_fold<R>(a0));
  if constexpr (!Op::sum_like)
    for (; i < n; ++i) r = Op::step(r, to_float(x[i]));
  return r;
}

/// sum exp(x - m) over a run (log-sum-exp's second pass; m finite).
template <class V, class In>
KFUSE_INLINE float exp_sum_run(const In* x, index_t n, float m) {
  constexpr int L = V::lanes;
  V a0(0.f), a1(0.f);
  index_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    a0 += simd::exp(simd::load<V>(x + i) - V(m));
    a1 += simd::exp(simd::load<V>(x + i + L) - V(m));
  }
  for (; i + L <= n; i += L) a0 += simd::exp(simd::load<V>(x + i) - V(m));
  float r = lane_sum(a0 + a1);
  for (; i < n; ++i) r += std::exp(to_float(x[i]) - m);
  return r;
}

/// The offset of output row `o` (kept axes except `skip_last` innermost) in the input.
inline index_t kept_offset(const reduce_plan& p, const index_t* strides, index_t o,
                           bool skip_last) {
  index_t off = 0;
  for (int d = p.rank - 1 - (skip_last ? 1 : 0); d >= 0; --d) {
    if (p.reduced[d]) continue;
    off += (o % p.dims[d]) * strides[d];
    o /= p.dims[d];
  }
  return off;
}

template <reduce_kind R, class V, class In, class Out>
void reduce_rows(const In* in, Out* out, const reduce_plan& p, const index_t* strides,
                 const reduce_walk& w, index_t begin, index_t end) {
  const index_t run = p.dims[p.rank - 1];
  for (index_t o = begin; o < end; ++o) {
    const In* base = in + kept_offset(p, strides, o, false);
    float acc = reduce_op<R>::template init<float>();
    w.each([&](index_t off) { acc = reduce_run<R, V>(base + off, run, acc); });
    if constexpr (R == reduce_kind::log_sum_exp) {
      if (std::isfinite(acc)) {
        float s = 0.f;
        w.each([&](index_t off) { s += exp_sum_run<V>(base + off, run, acc); });
        acc += std::log(s);
      }
    }
    out[o] = from_float<Out>(reduce_finish<R>(acc, p.count));
  }
}

template <reduce_kind R, class V, class In, class Out>
void reduce_columns(const In* in, Out* out, const reduce_plan& p, const index_t* strides,
                    const reduce_walk& w, index_t begin, index_t end) {
  using Op = reduce_op<R>;
  constexpr int L = V::lanes;
  constexpr index_t block = 16 * L;  // accumulators of one block of columns stay in L1
  const index_t W = p.dims[p.rank - 1];
  alignas(64) float acc[block], sum[block];
  for (index_t o = begin; o < end; ++o) {
    const In* base = in + kept_offset(p, strides, o, true);
    for (index_t c0 = 0; c0 < W; c0 += block) {
      const index_t nc = std::min(block, W - c0);
      for (index_t c = 0; c < nc; ++c) acc[c] = Op::template init<float>();
      w.each([&](index_t off) {
        const In* x = base + off + c0;
        index_t c = 0;
        for (; c + L <= nc; c += L)
          simd::store(acc + c, Op::step(simd::load<V>(acc + c), simd::load<V>(x + c)));
        for (; c < nc; ++c) acc[c] = Op::step(acc[c], to_float(x[c]));
      });
      if constexpr (R == reduce_kind::log_sum_exp) {
        for (index_t c = 0; c < nc; ++c) sum[c] = 0.f;
        w.each([&](index_t off) {
          const In* x = base + off + c0;
          for (index_t c = 0; c < nc; ++c)
            if (std::isfinite(acc[c])) sum[c] += std::exp(to_float(x[c]) - acc[c]);
        });
        for (index_t c = 0; c < nc; ++c)
          if (std::isfinite(acc[c])) acc[c] += std::log(sum[c]);
      }
      Out* y = out + o * W + c0;
      for (index_t c = 0; c < nc; ++c) y[c] = from_float<Out>(reduce_finish<R>(acc[c], p.count));
    }
  }
}

template <class A, class B, class In, class Out>
run_info reduce_impl(const In* in, Out* out, const reduce_plan& p, reduce_kind kind,
                     const run_options& opt) {
  using V = simd::vec_for<A, B>;
  constexpr std::string_view k = "reduce";
  const index_t n = p.count * p.outputs;
  check_buffer(k, "input", in, n);
  check_buffer(k, "output", out, p.outputs);
  check_overlap(k, in, n, out, p.outputs);
  index_t strides[reduce_plan::max_rank] = {};
  for (index_t s = 1, d = p.rank; d-- > 0;) {
    strides[d] = s;
    s *= p.dims[d];
  }
  // Nothing reduced (or every reduced extent 1): a copy through the same loops.
  const bool rows = p.rank > 0 && p.reduced[p.rank - 1];
  reduce_walk w;
  for (int d = 0; d < p.rank - (rows ? 1 : 0); ++d)
    if (p.reduced[d]) {
      w.ext[w.n] = p.dims[d];
      w.stride[w.n] = strides[d];
      w.total *= p.dims[d];
      ++w.n;
    }
  const index_t W = rows || p.rank == 0 ? 1 : p.dims[p.rank - 1];
  const index_t items = rows ? p.outputs : p.outputs / std::max<index_t>(1, W);
  const index_t per_item = std::max<index_t>(1, n / std::max<index_t>(1, items));
  const index_t grain = std::max<index_t>(1, (index_t(1) << 14) / per_item);
  auto body = [&]<reduce_kind R>() {
    parallel_for(
        0, items, grain,
        [&](range r, int) {
          if (rows)
            reduce_rows<R, V>(in, out, p, strides, w, r.begin, r.end);
          else
            reduce_columns<R, V>(in, out, p, strides, w, r.begin, r.end);
        },
        opt.threads);
  };
  switch (kind) {
    case reduce_kind::sum:
      body.template operator()<reduce_kind::sum>();
      break;
    case reduce_kind::mean:
      body.template operator()<reduce_kind::mean>();
      break;
    case reduce_kind::max:
      body.template operator()<reduce_kind::max>();
      break;
    case reduce_kind::min:
      body.template operator()<reduce_kind::min>();
      break;
    case reduce_kind::prod:
      body.template operator()<reduce_kind::prod>();
      break;
    case reduce_kind::l1:
      body.template operator()<reduce_kind::l1>();
      break;
    case reduce_kind::l2:
      body.template operator()<reduce_kind::l2>();
      break;
    case reduce_kind::sum_square:
      body.template operator()<reduce_kind::sum_square>();
      break;
    case reduce_kind::log_sum_exp:
      body.template operator()<reduce_kind::log_sum_exp>();
      break;
    default:
      fail(k, "unknown reduce_kind " + std::to_string(int(kind)));
  }
  const int used =
      int(std::min<index_t>(pool_threads(opt.threads, "reduce"), (items + grain - 1) / grain));
  return run_info{k, A::name, simd::impl_name<A, B>(), rows ? "rows" : "columns", used};
}

}  // namespace detail

/// The reduction over the axes flagged in `axes` of a dense row-major tensor of extents `shape`
/// (f32 compute; In / Out float, bf16_t or f16_t). out holds one value per kept position, in the
/// order of the kept axes (keepdims only changes the shape, not the data).
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info reduce(const In* in, Out* out, std::span<const index_t> shape, std::span<const bool> axes,
                reduce_kind kind, const run_options& opt = {}) {
  return detail::reduce_impl<A, B>(in, out, detail::make_reduce_plan("reduce", shape, axes), kind,
                                   opt);
}

/// The kernel contract (kernels/kernel_contract.hpp) for the graph: problem = shape, axes, kind.
template <class A = arch::native, class B = backend::xsimd>
struct reduce_kernel {
  static constexpr std::string_view name = "reduce";
  struct problem {
    index_t shape[8] = {};
    bool axes[8] = {};
    int rank = 0;
    reduce_kind kind = reduce_kind::sum;
  };
  struct packed {
    detail::reduce_plan plan{};
    reduce_kind kind = reduce_kind::sum;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;
  using extents = index_t;
  template <class T>
  using view = flat_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] { plan_of(p); });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<reduce_kernel>(p);
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return {plan_of(p), p.kind, true};
  }
  template <class In, class Out>
  static run_info run(flat_view<const In> in, const packed& k, flat_view<Out> out,
                      const epilogue<>&, workspace, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    if (k.empty()) detail::fail(name, "the reduction is not initialized (initialize(problem))");
    if (zero_point != 0) detail::fail(name, "a zero point is only meaningful for integer inputs");
    if (in.count != k.plan.count * k.plan.outputs || out.count != k.plan.outputs)
      detail::fail(name, "views of " + std::to_string(in.count) + " and " +
                             std::to_string(out.count) + " elements, the reduction takes " +
                             std::to_string(k.plan.count * k.plan.outputs) + " and gives " +
                             std::to_string(k.plan.outputs));
    return detail::reduce_impl<A, B>(in.data, out.data, k.plan, k.kind, opt);
  }

 private:
  static detail::reduce_plan plan_of(const problem& p) {
    if (p.rank < 1 || p.rank > 8)
      detail::fail(name, "rank " + std::to_string(p.rank) + " (1 to 8)");
    if (int(p.kind) > int(reduce_kind::log_sum_exp))
      detail::fail(name, "unknown reduce_kind " + std::to_string(int(p.kind)));
    return detail::make_reduce_plan(name, std::span<const index_t>(p.shape, std::size_t(p.rank)),
                                    std::span<const bool>(p.axes, std::size_t(p.rank)));
  }
};

KFUSE_END_NAMESPACE
