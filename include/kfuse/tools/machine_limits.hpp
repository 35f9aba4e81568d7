#pragma once
// The machine's roofline limits: compute peak per core (f32 FMA, bf16 dot, int8 dot) and
// streaming memory bandwidth at 1 thread and at every thread of the pool. Measured once by a
// short probe (~60-100 ms: FMA chains on registers, a STREAM triad over 36 MiB) and cached, or
// given by the user. The probe is meant for optimised builds (-O2 and above); at -O1 the compiler
// keeps the FMA chains in memory and the compute peak reads low.
#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kfuse/arch/tags.hpp"
#include "kfuse/config/macros.hpp"
#include "kfuse/kernels/gemm/amx.hpp"
#include "kfuse/kernels/gemm/dot_rates.hpp"
#include "kfuse/kernels/gemm/microkernels.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/threading/parallel_for.hpp"

#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
#include <immintrin.h>
#endif

namespace kfuse {

/// What a node computes in, which selects the compute peak it is judged against.
enum class compute_kind { f32, bf16, int8 };

inline const char* compute_kind_name(compute_kind k) {
  return k == compute_kind::f32 ? "f32" : k == compute_kind::bf16 ? "bf16" : "int8";
}

/// Roofline limits. Peaks are per core (GFLOP/s; int8 in GOP/s); bandwidth in GB/s (10^9 B/s,
/// STREAM convention: triad counts two reads and one write per element).
struct machine_limits {
  double f32_gflops = 0;   // per core
  double bf16_gflops = 0;  // per core; equals f32 where the arch has no bf16 dot instruction
  double int8_gops = 0;    // per core; equals f32 where the arch has no int8 dot instruction
  double mem_gbs_1t = 0;   // streaming triad, one thread
  double mem_gbs_all = 0;  // streaming triad, `cores` threads
  int cores = 1;           // threads the "all" figures were measured with
  std::string source;      // "probe" or "given"

  /// Compute peak of `threads` cores (linear in cores: the FMA units are per core).
  double peak(compute_kind k, int threads) const {
    const double per_core = k == compute_kind::f32    ? f32_gflops
                            : k == compute_kind::bf16 ? bf16_gflops
                                                      : int8_gops;
    return per_core * std::clamp(threads, 1, std::max(cores, 1));
  }
  /// Memory bandwidth available to `threads` threads.
  double bandwidth(int threads) const { return threads <= 1 ? mem_gbs_1t : mem_gbs_all; }

  /// Limits given by the user: the same per-core peak for every kind unless stated, and one
  /// bandwidth figure for any thread count.
  static machine_limits given(double f32_gflops_per_core, double mem_gbs, int cores = 1,
                              double bf16_gflops_per_core = 0, double int8_gops_per_core = 0) {
    machine_limits m;
    m.f32_gflops = f32_gflops_per_core;
    m.bf16_gflops = bf16_gflops_per_core > 0 ? bf16_gflops_per_core : f32_gflops_per_core;
    m.int8_gops = int8_gops_per_core > 0 ? int8_gops_per_core : f32_gflops_per_core;
    m.mem_gbs_1t = m.mem_gbs_all = mem_gbs;
    m.cores = std::max(cores, 1);
    m.source = "given";
    return m;
  }
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
/// The i8 micro-kernel's dot product (vnni_regs: vpdpbusd, or vpmaddubsw + vpmaddwd + vpaddd
/// without it) on 12 chains: lanes x 4 products x 2 ops per step.
KFUSE_NOINLINE inline double probe_int8_rate(std::int64_t iters) {
  constexpr int lanes = simd::vec_for<arch::native, backend::xsimd>::lanes;
  using R = vnni_regs<lanes>;
  constexpr int chains = 12;
  R::reg acc[chains];
  for (int k = 0; k < chains; ++k) acc[k] = R::set1(0);
  const R::reg a = R::set1(0x01010101);
  const auto t0 = probe_clock::now();
  for (std::int64_t i = 0; i < iters; ++i) {
    step_chains(
        acc, [&](R::reg x) KFUSE_INLINE_LAMBDA { return R::dot(x, a, a); },
        std::make_index_sequence<chains>{});
  }
  const double s = seconds_since(t0);
  std::int32_t sum = 0;
  for (int k = 0; k < chains; ++k) sum += std::bit_cast<std::array<std::int32_t, lanes>>(acc[k])[0];
  volatile std::int32_t sink = sum;
  (void)sink;
  return 8.0 * lanes * chains * double(iters) / s;
}
#endif

#if KFUSE_AMX
/// AMX tile products (kernels/gemm/amx.hpp) on 4 accumulator tiles from tiles of zeros (64
/// bytes of A per row: 32 bf16 or 64 int8 values).
template <amx_op Op>
KFUSE_NOINLINE double probe_amx_rate(std::int64_t iters) {
  alignas(64) static const std::byte zeros[16 * 64] = {};
  amx_scope tiles;
  __asm__ volatile(
      "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t"
      "tileloadd (%0,%1,1), %%tmm4\n\ttileloadd (%0,%1,1), %%tmm5\n\t"
      "tileloadd (%0,%1,1), %%tmm6\n\ttileloadd (%0,%1,1), %%tmm7" ::"r"(zeros),
      "r"(index_t(64))
      : "memory");
  const auto t0 = probe_clock::now();
  for (std::int64_t i = 0; i < iters; ++i) {
    if constexpr (Op == amx_op::bf16)
      __asm__ volatile(
          "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\ttdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
          "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\ttdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::
              : "memory");
    else
      __asm__ volatile(
          "tdpbusd %%tmm6, %%tmm4, %%tmm0\n\ttdpbusd %%tmm7, %%tmm4, %%tmm1\n\t"
          "tdpbusd %%tmm6, %%tmm5, %%tmm2\n\ttdpbusd %%tmm7, %%tmm5, %%tmm3" ::
              : "memory");
  }
  const double s = seconds_since(t0);
  // Per product, 16 x 16 outputs of 32 bf16 (16 pairs) or 64 int8 multiply-adds, 2 ops each.
  constexpr double ops = 16.0 * 16 * (Op == amx_op::bf16 ? 32 : 64) * 2;
  return 4.0 * ops * double(iters) / s;
}
#endif

/// STREAM triad a = b + s*c over [r.begin, r.end), written on simd::vec.
template <class V>
KFUSE_NOINLINE void triad_range(float* a, const float* b, const float* c, index_t begin,
                                index_t end) {
  const V s(1.5f);
  index_t i = begin;
  for (; i + V::lanes <= end; i += V::lanes)
    simd::store(a + i, simd::fma(simd::load<V>(c + i), s, simd::load<V>(b + i)));
  for (; i < end; ++i) a[i] = b[i] + 1.5f * c[i];
}

}  // namespace detail

/// Measures the limits now (about 60-100 ms; more on a loaded machine). Prefer
/// cached_machine_limits(), which probes once per process.
inline machine_limits probe_machine_limits() {
  using V = simd::vec_for<arch::native, backend::xsimd>;
  machine_limits m;
  m.source = "probe";
  m.cores = pool_threads(0);
  // About 4 ms per run: enough for the clock to ramp and the timer to be negligible.
  m.f32_gflops = detail::best_rate(detail::probe_fma_rate<V>, 4e-3, 3);
  m.bf16_gflops = m.f32_gflops;
  m.int8_gops = m.f32_gflops;
#if KFUSE_TIER == KFUSE_TIER_AVX512_BF16
  m.bf16_gflops = detail::best_rate(detail::probe_bf16_rate, 4e-3, 2);
#endif
#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
  m.int8_gops = detail::best_rate(detail::probe_int8_rate, 4e-3, 2);
#endif
#if KFUSE_AMX
  // Where the bf16 and i8 GEMMs run on tiles, the tiles' rate is their roof.
  if (amx_enabled()) {
    m.bf16_gflops = detail::best_rate(detail::probe_amx_rate<detail::amx_op::bf16>, 4e-3, 2);
    m.int8_gops = detail::best_rate(detail::probe_amx_rate<detail::amx_op::u8s8>, 4e-3, 2);
  }
#endif

  // Triad over 3 x 12 MiB: larger than the 32 MiB L3 of the machines kfuse is tuned on, small
  // enough that first touch (slow in VMs) stays within tens of milliseconds.
  const index_t n = index_t(3) << 20;
  auto alloc = [n] { return std::unique_ptr<float[]>(new float[std::size_t(n)]); };
  auto a = alloc(), b = alloc(), c = alloc();
  const index_t grain = 1 << 16;
  parallel_for(0, n, grain, [&](range r, int) {
    for (index_t i = r.begin; i < r.end; ++i) {
      a[std::size_t(i)] = 0.f;
      b[std::size_t(i)] = 1.f;
      c[std::size_t(i)] = 2.f;
    }
  });
  const double bytes = 3.0 * 4.0 * double(n);
  auto triad = [&](int threads) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = detail::probe_clock::now();
      if (threads <= 1) {
        detail::triad_range<V>(a.get(), b.get(), c.get(), 0, n);
      } else {
        parallel_for(
            0, n, (n + threads - 1) / threads,
            [&](range r, int) {
              detail::triad_range<V>(a.get(), b.get(), c.get(), r.begin, r.end);
            },
            threads);
      }
      best = std::min(best, detail::seconds_since(t0));
    }
    return bytes / best * 1e-9;
  };
  m.mem_gbs_1t = triad(1);
  m.mem_gbs_all = m.cores > 1 ? std::max(m.mem_gbs_1t, triad(m.cores)) : m.mem_gbs_1t;
  return m;
}

/// The limits of this machine, probed on first use (thread-safe) and cached for the process.
inline const machine_limits& cached_machine_limits() {
  static const machine_limits m = probe_machine_limits();
  return m;
}

KFUSE_END_NAMESPACE
