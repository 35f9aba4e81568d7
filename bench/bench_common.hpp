#pragma once
// What the benchmarks share: the peers' setup (oneDNN's CPU engine and stream, XNNPACK's
// initialization), timing, and the machine context printed above the results. A peer's part is
// compiled when CMake found it (kfuse_add_bench in bench/CMakeLists.txt defines
// KFUSE_BENCH_HAVE_<PEER>).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <string>

#if KFUSE_BENCH_HAVE_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif
#if KFUSE_BENCH_HAVE_XNNPACK
#include <pthreadpool.h>
#include <xnnpack.h>
#endif

namespace kfuse_bench {

using clock = std::chrono::steady_clock;

inline double seconds_since(clock::time_point t0) {
  return std::chrono::duration<double>(clock::now() - t0).count();
}
inline double us_since(clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
}

// GFLOPs (a rate over the benchmark's time) and MFLOP per iteration, so that a table script can
// also rate single-thread rows by CPU time (robust when other jobs share the cores).
inline void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["GFLOPs"] = benchmark::Counter(flops_per_iter * 1e-9 * double(st.iterations()),
                                             benchmark::Counter::kIsRate);
  st.counters["MFLOP"] = flops_per_iter * 1e-6;
}

// A kfuse::machine_limits as one context line: the peaks the results are compared with.
template <class Limits>
std::string limits_text(const Limits& lim) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "f32 %.0f, bf16 %.0f, int8 %.0f G/s per core; memory %.1f GB/s (1 thread), %.1f "
                "GB/s (%d threads)",
                lim.f32_gflops, lim.bf16_gflops, lim.int8_gops, lim.mem_gbs_1t, lim.mem_gbs_all,
                lim.cores);
  return buf;
}

#if KFUSE_BENCH_HAVE_DNNL
// oneDNN on the CPU with `threads` OpenMP threads, set before the engine exists:
//   kfuse_bench::dnnl_cpu cpu(threads);  // cpu.eng, cpu.strm
struct dnnl_omp_threads {
  explicit dnnl_omp_threads(int threads) { omp_set_num_threads(threads); }
};
struct dnnl_cpu : private dnnl_omp_threads {
  explicit dnnl_cpu(int threads)
      : dnnl_omp_threads(threads), eng(dnnl::engine::kind::cpu, 0), strm(eng) {}
  dnnl::engine eng;
  dnnl::stream strm;
};
#endif

#if KFUSE_BENCH_HAVE_XNNPACK
// XNNPACK initialized (once per process; the call is idempotent); false, and the benchmark
// skipped, when it cannot be.
inline bool xnn_ready(benchmark::State& st) {
  static const bool ok = xnn_initialize(nullptr) == xnn_status_success;
  if (!ok) st.SkipWithError("xnn_initialize failed");
  return ok;
}
#endif

}  // namespace kfuse_bench
