// OpenBLAS sgemm on the GEMM benchmark's f32 shapes. Its own process: OpenBLAS reads
// OPENBLAS_CORETYPE (SkylakeX for AVX-512 on this Zen 5, which it does not recognise) at load.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <vector>

namespace {
void BM_openblas(benchmark::State& st) {
  const long m = st.range(0), n = st.range(1), k = st.range(2);
  openblas_set_num_threads(int(st.range(3)));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(std::size_t(m * k)), b(std::size_t(k * n)), c(std::size_t(m * n));
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  for (auto _ : st)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.f, a.data(),
                int(k), b.data(), int(k), 0.f, c.data(), int(n));
  st.counters["GFLOPs"] = benchmark::Counter(2e-9 * double(m * n * k) * double(st.iterations()),
                                             benchmark::Counter::kIsRate);
}
const long shapes[][3] = {{1, 4096, 4096}, {8, 4096, 4096}, {64, 1024, 1024},   {128, 768, 3072},
                          {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}};
const bool registered = [] {
  for (int t : {1, 2})
    for (const auto& s : shapes)
      benchmark::RegisterBenchmark("f32/bare/openblas", BM_openblas)
          ->Args({s[0], s[1], s[2], t})
          ->UseRealTime()
          ->MinTime(0.2)
          ->Unit(benchmark::kMicrosecond);
  return true;
}();
}  // namespace

BENCHMARK_MAIN();
