#pragma once
// layer_norm and rms_norm over the last axis of a rows x cols matrix, optional affine, fused
// epilogue, f32 compute for every float storage type.
//
//   y = (x - mean) / sqrt(var + eps) * gamma + beta        layer_norm
//   y = x / sqrt(mean(x^2) + eps) * gamma                  rms_norm
//
//   kfuse::layer_norm(x, y, rows, cols, {gamma, beta, 1e-5f});
//   kfuse::layer_norm(x, y, rows, cols, {gamma, beta}, kfuse::epilogue<kfuse::gelu_tanh>{{}});
//
// Per row: one read for the statistics, then one pass that normalizes, applies the affine and
// every epilogue stage in registers and stores once (the row is re-read from L1/L2). Epilogue
// stages see the position on the normalized axis as their channel, so per-element `bias` /
// `scale`-like stages take one value per column.
//
// Statistics are accurate to f32 rounding even for large means (1e4 + N(0, 1)) and outliers:
//  - layer_norm: per chunk of up to 8 Ki elements, one pass sums d = x - s and d^2 with s the
//    mean of the row's first vector, so the variance q/n - (mean - s)^2 does not cancel; when an
//    outlier among the first values makes (mean - s)^2 larger than the variance, a second pass
//    over the cached chunk about the mean found repeats the sums (corrected two-pass). Chunks of
//    longer rows are merged in double (Chan et al.). Memory sees one read.
//  - f32 partial sums per lane are added into doubles per block of 64 vectors.
//  - the mean is applied as a double-float pair: y = (x - m_hi) * rstd - m_lo * rstd, where
//    x - m_hi is exact for x near the mean, so a mean of 1e4 costs no precision.
//  - rms_norm sums squares the same way (no cancellation to guard against).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/simd/reduce.hpp"
#include "kfuse/simd/stream.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/convert.hpp"

namespace kfuse {

/// Affine parameters: gamma and beta are each empty (1 and 0) or one value per column.
struct layer_norm_params {
  std::span<const float> gamma{};
  std::span<const float> beta{};
  float eps = 1e-5f;
};

/// gamma is empty (1) or one value per column.
struct rms_norm_params {
  std::span<const float> gamma{};
  float eps = 1e-6f;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

enum : int { norm_gamma = 1, norm_beta = 2 };

struct row_stats {
  float m_hi, m_lo, rstd;  // mean as a double-float pair (0 for rms_norm), 1 / sqrt(var + eps)
};

struct moments {
  double mean, m2;  // mean and sum of squared deviations of a chunk
};

/// Statistics work on blocks of up to 64 vectors: f32 partial sums per lane (2 chains), added
/// into doubles per block, so that small squares next to an outlier's are not lost to the
/// rounding of a long f32 accumulation, and rows of 1024 f32 reduce once.
inline constexpr int norm_block_vectors = 64;

// Sums of d = x - shift and d^2 over n elements, in double.
template <class V, class In>
KFUSE_INLINE void shifted_sums(const In* x, index_t n, float shift, double& s, double& q) {
  constexpr int L = V::lanes;
  const V vs(shift);
  s = 0;
  q = 0;
  index_t j = 0;
  while (j + 2 * L <= n) {
    V s0(0.f), s1(0.f), q0(0.f), q1(0.f);
    const index_t end = std::min(n, j + norm_block_vectors * L);
    for (; j + 2 * L <= end; j += 2 * L) {
      const V d0 = simd::load<V>(x + j) - vs, d1 = simd::load<V>(x + j + L) - vs;
      s0 += d0;
      s1 += d1;
      q0 = simd::fma(d0, d0, q0);
      q1 = simd::fma(d1, d1, q1);
    }
    s += double(lane_sum(s0 + s1));
    q += double(lane_sum(q0 + q1));
  }
  for (; j < n; ++j) {
    const double d = double(to_float(x[j])) - double(shift);
    s += d;
    q += d * d;
  }
}

// Moments of a chunk (up to norm_chunk elements, in L1) in one pass over d = x - shift, with
// the shift the mean of the first vector: then var = q / n - (s / n)^2 loses nothing, because
// (s / n)^2, the squared distance between shift and mean, is far below the variance. When it
// is not (an outlier among the first values), a second pass over the cached chunk about the
// mean just found makes it so (the corrected two-pass algorithm).
template <class V, class In>
KFUSE_INLINE moments chunk_moments(const In* x, index_t n) {
  constexpr int L = V::lanes;
  float shift;
  if (n >= L && L > 1) {
    shift = lane_sum(simd::load<V>(x)) * (1.f / float(L));
  } else {
    shift = 0.f;
    const index_t k = std::min<index_t>(n, 8);
    for (index_t j = 0; j < k; ++j) shift += to_float(x[j]);
    shift /= float(k);
  }
  double s, q;
  shifted_sums<V>(x, n, shift, s, q);
  double mean_d = s / double(n);
  if (mean_d * mean_d > q / double(n) - mean_d * mean_d) {
    shift = float(double(shift) + mean_d);
    shifted_sums<V>(x, n, shift, s, q);
    mean_d = s / double(n);
  }
  return {double(shift) + mean_d, std::max(0.0, q - s * mean_d)};
}

/// Chunk length for the statistics: 8 Ki elements (32 KiB of f32) stay in L1 for a second
/// pass; longer rows merge their chunks' moments (Chan et al.), so memory sees one read.
inline constexpr index_t norm_chunk = index_t(1) << 13;

template <class V, class In>
KFUSE_INLINE row_stats layer_norm_stats(const In* x, index_t n, float eps) {
  moments m = chunk_moments<V>(x, std::min(n, norm_chunk));
  for (index_t j = norm_chunk; j < n; j += norm_chunk) {
    const index_t na = j, nb = std::min(norm_chunk, n - j);
    const moments b = chunk_moments<V>(x + j, nb);
    const double delta = b.mean - m.mean, total = double(na + nb);
    m.mean += delta * double(nb) / total;
    m.m2 += b.m2 + delta * delta * double(na) * double(nb) / total;
  }
  const double var = m.m2 / double(n);
  const float m_hi = float(m.mean);
  return {m_hi, float(m.mean - double(m_hi)), float(1.0 / std::sqrt(var + double(eps)))};
}

// Sum of squares: 4 f32 chains per lane, added into a double per block of 64 vectors.
template <class V, class In>
KFUSE_INLINE row_stats rms_norm_stats(const In* x, index_t n, float eps) {
  constexpr int L = V::lanes;
  double sum = 0;
  index_t j = 0;
  while (j + 4 * L <= n) {
    V s0(0.f), s1(0.f), s2(0.f), s3(0.f);
    const index_t end = std::min(n, j + norm_block_vectors * L);
    for (; j + 4 * L <= end; j += 4 * L) {
      const V a = simd::load<V>(x + j), b = simd::load<V>(x + j + L);
      const V c = simd::load<V>(x + j + 2 * L), d = simd::load<V>(x + j + 3 * L);
      s0 = simd::fma(a, a, s0);
      s1 = simd::fma(b, b, s1);
      s2 = simd::fma(c, c, s2);
      s3 = simd::fma(d, d, s3);
    }
    sum += double(lane_sum((s0 + s1) + (s2 + s3)));
  }
  for (; j < n; ++j) sum += double(to_float(x[j])) * double(to_float(x[j]));
  return {0.f, 0.f, float(1.0 / std::sqrt(sum / double(n) + double(eps)))};
}

// y = epilogue(affine((x - mean) * rstd)) over one row whose first element has flat index i0.
template <class V, int Affine, bool Centered, bool Stream, class In, class Out, class Ep>
KFUSE_INLINE void norm_apply_row(const In* KFUSE_RESTRICT x, Out* KFUSE_RESTRICT y, index_t n,
                                 index_t i0, row_stats st, const float* gamma, const float* beta,
                                 const Ep& ep) {
  constexpr int L = V::lanes;
  const V m_hi(st.m_hi), r(st.rstd), c(-st.m_lo * st.rstd);
  // Affine parameters are indexed by column (lane_ctx::load would index by flat position).
  auto param = [](const float* p, index_t j, int lanes) {
    return lanes == L ? simd::load<V>(p + j) : simd::load_partial<V>(p + j, lanes);
  };
  auto one = [&](V v, index_t j, int lanes) {
    v = Centered ? simd::fma(v - m_hi, r, c) : v * r;
    if constexpr (Affine == (norm_gamma | norm_beta))
      v = simd::fma(v, param(gamma, j, lanes), param(beta, j, lanes));
    else if constexpr (Affine == norm_gamma)
      v = v * param(gamma, j, lanes);
    else if constexpr (Affine == norm_beta)
      v = v + param(beta, j, lanes);
    return apply(ep, v, lane_ctx<V, true>{i0 + j, j, lanes});
  };
  index_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    const V a = one(simd::load<V>(x + j), j, L);
    const V b = one(simd::load<V>(x + j + L), j + L, L);
    store_row<Stream>(y + j, a);
    store_row<Stream>(y + j + L, b);
  }
  for (; j + L <= n; j += L) store_row<Stream>(y + j, one(simd::load<V>(x + j), j, L));
  if (j < n) {  // never with Stream: streamed rows are whole vectors
    const int rest = int(n - j);
    simd::store_partial(y + j, one(simd::load_partial<V>(x + j, rest), j, rest), rest);
  }
}

template <class T>
inline constexpr bool norm_float_storage =
    std::is_same_v<T, float> || std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

template <class A, class B, bool Rms, class In, class Out, class... S>
run_info norm_impl(std::string_view k, const In* in, Out* out, index_t rows, index_t cols,
                   std::span<const float> gamma, std::span<const float> beta, float eps,
                   const epilogue<S...>& ep, const run_options& opt) {
  static_assert(norm_float_storage<In> && norm_float_storage<Out>,
                "kfuse::layer_norm / rms_norm: input and output must be float storage types "
                "(float, bf16_t, f16_t)");
  static_assert(
      std::is_void_v<typename epilogue_traits<epilogue<S...>>::output_elem> ||
          std::is_same_v<typename epilogue_traits<epilogue<S...>>::output_elem, elem_of<Out>>,
      "kfuse::layer_norm / rms_norm: the epilogue's type-changing stage produces a "
      "different element type than the output holds");
  if constexpr (epilogue_traits<epilogue<S...>>::out_of_line)
    if (is_identity(ep))  // inlined rows instead of a call per vector
      return norm_impl<A, B, Rms>(k, in, out, rows, cols, gamma, beta, eps, epilogue<>{}, opt);
  using V = simd::vec_for<A, B>;
  if (rows < 0) fail(k, "negative row count " + std::to_string(rows));
  if (cols < 1) fail(k, "normalized axis length must be positive, not " + std::to_string(cols));
  if (!(eps > 0.f) || !std::isfinite(eps))
    fail(k, "eps must be positive and finite, not " + std::to_string(eps));
  if (!gamma.empty() && index_t(gamma.size()) != cols)
    fail(k, "gamma has " + std::to_string(gamma.size()) + " values for rows of " +
                std::to_string(cols));
  if (!beta.empty() && index_t(beta.size()) != cols)
    fail(k,
         "beta has " + std::to_string(beta.size()) + " values for rows of " + std::to_string(cols));
  check_buffer(k, "gamma", gamma.data(), index_t(gamma.size()));
  check_buffer(k, "beta", beta.data(), index_t(beta.size()));
  const index_t n = checked_mul(k, "rows x cols", rows, cols);
  check_buffer(k, "input", in, n);
  check_buffer(k, "output", out, n);
  check_overlap(k, in, n, out, n);
  validate(ep, k, n, cols, out, sizeof(Out) * std::size_t(n), sizeof(Out));
  if (n == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};
  constexpr index_t target = index_t(1) << 14;  // ~64 KiB of f32 input per chunk
  const bool stream = use_streaming_stores<V>(out, rows, cols);
  const int pool = pool_threads(opt.threads, "norm");
  const index_t grain = streaming_grain(std::max<index_t>(1, target / cols), rows, pool, stream);
  const int affine = (gamma.empty() ? 0 : norm_gamma) | (beta.empty() ? 0 : norm_beta);
  auto rows_with = [&]<int Affine, bool Stream>() {
    parallel_for(
        0, rows, grain,
        [&](range r, int) {
          auto stats = [&](const In* x) {
            return Rms ? rms_norm_stats<V>(x, cols, eps) : layer_norm_stats<V>(x, cols, eps);
          };
          // The next row's statistics are computed before this row is normalized: their
          // reduction and sqrt latency overlaps this row's pass, and its loads start early.
          row_stats st = stats(in + r.begin * cols);
          for (index_t row = r.begin; row < r.end; ++row) {
            const In* x = in + row * cols;
            const row_stats next = row + 1 < r.end ? stats(x + cols) : st;
            norm_apply_row<V, Affine, !Rms, Stream>(x, out + row * cols, cols, row * cols, st,
                                                    gamma.data(), beta.data(), ep);
            st = next;
          }
          if constexpr (Stream) stream_fence();
        },
        opt.threads);
  };
  auto run = [&]<int Affine>() {
    if constexpr (std::is_same_v<Out, float> && stream_ops<typename V::impl>::available) {
      if (stream) return rows_with.template operator()<Affine, true>();
    }
    rows_with.template operator()<Affine, false>();
  };
  switch (affine) {
    case norm_gamma | norm_beta:
      run.template operator()<norm_gamma | norm_beta>();
      break;
    case norm_gamma:
      run.template operator()<norm_gamma>();
      break;
    case norm_beta:
      run.template operator()<norm_beta>();
      break;
    default:
      run.template operator()<0>();
      break;
  }
  const int used = int(std::min<index_t>(pool, (rows + grain - 1) / grain));
  const char* mk = Rms ? (stream ? "rms rows, streaming stores" : "rms rows")
                       : (stream ? "rows (shifted sums), streaming stores" : "rows (shifted sums)");
  return run_info{k, A::name, simd::impl_name<A, B>(), mk, used};
}

template <class In, class Out>
void check_norm_spans(std::string_view k, std::size_t in, std::size_t out, index_t cols) {
  if (in != out)
    fail(k, "input has " + std::to_string(in) + " elements, the output " + std::to_string(out));
  if (cols < 1) fail(k, "normalized axis length must be positive, not " + std::to_string(cols));
  if (index_t(in) % cols != 0)
    fail(k, "input size " + std::to_string(in) + " is not a multiple of the row length " +
                std::to_string(cols));
}

}  // namespace detail

/// Layer norm over each row of a rows x cols matrix (row-major).
template <class A = arch::native, class B = backend::xsimd, class In, class Out, class... S>
run_info layer_norm(const In* in, Out* out, index_t rows, index_t cols,
                    const layer_norm_params& p = {}, const epilogue<S...>& ep = {},
                    const run_options& opt = {}) {
  return detail::norm_impl<A, B, false>("layer_norm", in, out, rows, cols, p.gamma, p.beta, p.eps,
                                        ep, opt);
}

/// Spans: rows = size / cols.
template <class A = arch::native, class B = backend::xsimd, class In, class Out, class... S>
run_info layer_norm(std::span<In> in, std::span<Out> out, index_t cols,
                    const layer_norm_params& p = {}, const epilogue<S...>& ep = {},
                    const run_options& opt = {}) {
  detail::check_norm_spans<In, Out>("layer_norm", in.size(), out.size(), cols);
  return layer_norm<A, B>(static_cast<const std::remove_const_t<In>*>(in.data()), out.data(),
                          index_t(in.size()) / cols, cols, p, ep, opt);
}

/// RMS norm over each row of a rows x cols matrix (row-major).
template <class A = arch::native, class B = backend::xsimd, class In, class Out, class... S>
run_info rms_norm(const In* in, Out* out, index_t rows, index_t cols, const rms_norm_params& p = {},
                  const epilogue<S...>& ep = {}, const run_options& opt = {}) {
  return detail::norm_impl<A, B, true>("rms_norm", in, out, rows, cols, p.gamma, {}, p.eps, ep,
                                       opt);
}

template <class A = arch::native, class B = backend::xsimd, class In, class Out, class... S>
run_info rms_norm(std::span<In> in, std::span<Out> out, index_t cols, const rms_norm_params& p = {},
                  const epilogue<S...>& ep = {}, const run_options& opt = {}) {
  detail::check_norm_spans<In, Out>("rms_norm", in.size(), out.size(), cols);
  return rms_norm<A, B>(static_cast<const std::remove_const_t<In>*>(in.data()), out.data(),
                        index_t(in.size()) / cols, cols, p, ep, opt);
}

/// layer_norm (Rms = false) or rms_norm over the rows of a rows x cols matrix as a kernel of the
/// contract (kernels/kernel_contract.hpp): initialize() keeps the affine parameters, run() takes
/// matrix views (dense rows) and the epilogue; no workspace (a row's statistics live in
/// registers).
template <bool Rms, class A = arch::native, class Ep = epilogue<>, class B = backend::xsimd>
struct norm_kernel {
  static constexpr std::string_view name = Rms ? "rms_norm" : "layer_norm";
  struct problem {
    index_t rows = 0, cols = 0;
  };
  struct packed {
    problem shape{};
    std::vector<float> gamma, beta;  // empty: 1 and 0
    float eps = 1e-5f;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = Ep;
  using extents = matrix_extents;
  template <class T>
  using view = matrix_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      if (p.rows < 0) detail::fail(name, "negative row count " + std::to_string(p.rows));
      if (p.cols < 1)
        detail::fail(name,
                     "normalized axis length must be positive, not " + std::to_string(p.cols));
      detail::checked_mul(name, "rows x cols", p.rows, p.cols);
    });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<norm_kernel>(p);
  }
  /// gamma (and beta, layer_norm only) empty or one value per column; eps >= 0.
  static packed initialize(const problem& p, std::span<const float> gamma,
                           std::span<const float> beta, float eps) {
    detail::require(name, can_implement(p));
    if (!gamma.empty() && index_t(gamma.size()) != p.cols)
      detail::fail(name, "gamma has " + std::to_string(gamma.size()) + " values for " +
                             std::to_string(p.cols) + " columns");
    if (!beta.empty() && (Rms || index_t(beta.size()) != p.cols))
      detail::fail(name, Rms ? std::string("takes no beta")
                             : "beta has " + std::to_string(beta.size()) + " values for " +
                                   std::to_string(p.cols) + " columns");
    if (!(eps >= 0.f)) detail::fail(name, "eps must be non-negative");
    packed k;
    k.shape = p;
    k.gamma.assign(gamma.begin(), gamma.end());
    k.beta.assign(beta.begin(), beta.end());
    k.eps = eps;
    k.ready = true;
    return k;
  }
  template <class In, class Out>
  static run_info run(matrix_view<const In> in, const packed& p, matrix_view<Out> out, const Ep& ep,
                      workspace, const run_options& opt = {}, std::int32_t zero_point = 0) {
    if (p.empty()) detail::fail(name, "the norm is not initialized (initialize(problem, ...))");
    if (zero_point != 0) detail::fail(name, "a zero point is only meaningful for integer inputs");
    for (const matrix_extents& e : {in.dims, out.dims})
      if (e.rows != p.shape.rows || e.cols != p.shape.cols || e.stride() != e.cols)
        detail::fail(name, "a view is " + std::to_string(e.rows) + " x " + std::to_string(e.cols) +
                               " (ld " + std::to_string(e.stride()) +
                               "), the norm was initialized for dense " +
                               std::to_string(p.shape.rows) + " x " + std::to_string(p.shape.cols));
    return detail::norm_impl<A, B, Rms>(name, in.data, out.data, p.shape.rows, p.shape.cols,
                                        p.gamma, p.beta, p.eps, ep, opt);
  }
};

KFUSE_END_NAMESPACE
