#pragma once
// Compute-rate probes of the dot products the GEMM micro-kernels use (f32 FMA, bf16 vdpbf16ps) and
// the once-per-process verdict on whether bf16 pays on this CPU: plan compilation reads it
// (graph/compile.hpp), the roofline limits build on the same probes (tools/machine_limits.hpp).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "kfuse/arch/tags.hpp"
#include "kfuse/config/macros.hpp"
#include "kfuse/simd/vec.hpp"

#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
#include <immintrin.h>
#endif

KFUSE_BEGIN_NAMESPACE
namespace detail {

using probe_clock = std::chrono::steady_clock;

inline double seconds_since(probe_clock::time_point t0) {
  return std::chrono::duration<double>(probe_clock::now() - t0).count();
}

// One step of every chain, unrolled at compile time whatever the optimisation level (constant
// indices let the compiler keep the array in registers: a loop over k kept it in memory at -O1/-O2
// and measured store-forwarding latency instead of the FMA pipes).
template <class T, class F, std::size_t... I>
KFUSE_INLINE void step_chains(T* acc, F&& f, std::index_sequence<I...>) {
  ((acc[I] = f(acc[I])), ...);
}

/// Twelve independent FMA chains on registers (enough to cover FMA latency x pipes on every
/// kfuse arch). Returns flops per second of one thread.
template <class V>
KFUSE_NOINLINE double probe_fma_rate(std::int64_t iters) {
  constexpr int chains = 12;
  V acc[chains];
  for (int k = 0; k < chains; ++k) acc[k] = V(float(k) * 0.001f);
  const V m(0.9999999f), c(1e-7f);  // a fixed point near 1: no overflow, no denormals
  const auto t0 = probe_clock::now();
  for (std::int64_t i = 0; i < iters; ++i) {
    step_chains(
        acc, [&](V a) KFUSE_INLINE_LAMBDA { return simd::fma(a, m, c); },
        std::make_index_sequence<chains>{});
  }
  const double s = seconds_since(t0);
  alignas(64) float out[V::lanes];
  V sum = acc[0];
  for (int k = 1; k < chains; ++k) sum = sum + acc[k];
  simd::store(out, sum);
  volatile float sink = out[0];
  (void)sink;
  return 2.0 * chains * V::lanes * double(iters) / s;
}

#if KFUSE_TIER == KFUSE_TIER_AVX512_BF16
/// vdpbf16ps: 16 lanes x 2 pairs x 2 flops per instruction.
KFUSE_NOINLINE inline double probe_bf16_rate(std::int64_t iters) {
  constexpr int chains = 12;
  __m512 acc[chains];
  for (int k = 0; k < chains; ++k) acc[k] = _mm512_setzero_ps();
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3c00);  // tiny bf16 values: sums stay finite
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3c00);
  const auto t0 = probe_clock::now();
  for (std::int64_t i = 0; i < iters; ++i) {
    step_chains(
        acc, [&](__m512 x) KFUSE_INLINE_LAMBDA { return _mm512_dpbf16_ps(x, a, b); },
        std::make_index_sequence<chains>{});
  }
  const double s = seconds_since(t0);
  __m512 sum = acc[0];
  for (int k = 1; k < chains; ++k) sum = _mm512_add_ps(sum, acc[k]);
  volatile float sink = _mm512_reduce_add_ps(sum);
  (void)sink;
  return 64.0 * chains * double(iters) / s;
}
#endif

/// Best of `reps` runs of rate(iters) in G/s, with iters sized from a short trial so that one run
/// takes about `seconds` (the scalar generic path is far slower than a vector FMA pipe).
template <class F>
double best_rate(F&& rate, double seconds, int reps) {
  const std::int64_t trial = 1 << 12;
  rate(trial);  // warm-up
  const auto t0 = probe_clock::now();
  rate(trial);
  const double per_iter = std::max(seconds_since(t0) / double(trial), 1e-12);
  const std::int64_t iters =
      std::clamp<std::int64_t>(std::int64_t(seconds / per_iter), trial, 1 << 26);
  double best = 0;
  for (int r = 0; r < reps; ++r) best = std::max(best, rate(iters));
  return best * 1e-9;
}

}  // namespace detail

/// This CPU's bf16 dot product (vdpbf16ps) against its f32 FMAs, per core (GFLOP/s): where it is
/// not faster, bf16 buys no arithmetic, only half the bytes, and a bf16 plan ran 1.0-1.5x
/// slower than f32 (the Intel Xeon of 2026-12-01: 123 against 246, one vdpbf16ps per two
/// cycles; Zen 4: 235 against 114).
struct bf16_dot_speed {
  double bf16 = 0, f32 = 0;
  bool measured = false;  // only in a TU built for avx512_bf16 (the probe is that arch's code)
  bool pays() const { return !measured || bf16 > f32; }
};

/// Probed once per process (~20 ms: the two compute probes of probe_machine_limits, shorter).
inline const bf16_dot_speed& cached_bf16_dot_speed() {
  static const bf16_dot_speed s = [] {
    bf16_dot_speed r;
#if KFUSE_TIER == KFUSE_TIER_AVX512_BF16
    using V = simd::vec_for<arch::native, backend::xsimd>;
    r.f32 = detail::best_rate(detail::probe_fma_rate<V>, 2e-3, 2);
    r.bf16 = detail::best_rate(detail::probe_bf16_rate, 2e-3, 2);
    r.measured = true;
#endif
    return r;
  }();
  return s;
}

KFUSE_END_NAMESPACE
