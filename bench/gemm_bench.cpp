// GEMM benchmark: kfuse vs oneDNN matmul (prepacked weights, same post-ops) vs Eigen, plus the
// machine's peaks measured in the same run (FMA / vdpbf16ps / vpdpbusd probes). OpenBLAS runs in
// its own process (gemm_bench_openblas): its core type is read from the environment at load time.
// Run through scripts/bench_gemm.sh, which prints the table with ratios.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <random>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/kfuse.hpp"

#if KFUSE_BENCH_HAVE_EIGEN
#include <Eigen/Core>
#endif

namespace {

using kfuse::index_t;

struct shape {
  index_t m, n, k;
};
// After the square and transformer shapes, the small CNNs': 1x1 convs as GEMMs
// (pixels, out, in channels) of MobileNetV3 / EfficientNet-B0, and squeeze-excite GEMVs.
const shape f32_shapes[] = {
    {1, 4096, 4096}, {8, 4096, 4096},    {64, 1024, 1024},   {128, 768, 3072}, {256, 256, 256},
    {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {196, 672, 112},  {196, 112, 672},
    {784, 240, 40},  {49, 960, 160},     {1, 240, 960},      {1, 960, 240},    {1, 120, 480},
    {12544, 96, 16}, {3136, 144, 24}};
const shape bf16_shapes[] = {{1, 4096, 4096},    {64, 1024, 1024}, {256, 1024, 1024},
                             {1024, 1024, 1024}, {1, 240, 960},    {1, 960, 240},
                             {1, 120, 480},      {12544, 96, 16},  {3136, 144, 24},
                             {196, 672, 112},    {196, 112, 672}};
const shape int8_shapes[] = {{1, 4096, 4096},    {64, 1024, 1024}, {256, 1024, 1024},
                             {1024, 1024, 1024}, {1, 240, 960},    {1, 960, 240},
                             {1, 120, 480},      {12544, 96, 16},  {3136, 144, 24}};

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["GFLOPs"] = benchmark::Counter(flops_per_iter * 1e-9 * double(st.iterations()),
                                             benchmark::Counter::kIsRate);
}

// ------------------------------------------------------------------------------- peak probes
// AVX-512 only (zmm FMA, vdpbf16ps, vpdpbusd): an AVX2 build has no peak rows (and no "% peak"
// column in scripts/gemm_table.py's table).
#if defined(__AVX512F__)
// 24 independent accumulator chains per thread: enough to cover 2 pipes x 4 cycles of latency.
// Runs `step` on every thread of st.range(0) and sets the GFLOPs counter.
template <class Step>
void probe(benchmark::State& st, Step step, double flops_per_step) {
  const int threads = int(st.range(0));
  constexpr int iters = 1 << 16;
  for (auto _ : st) {
    kfuse::parallel_for(
        0, threads, 1,
        [&](kfuse::range, int) {
          __m512 acc[24];
          for (auto& a : acc) a = _mm512_set1_ps(0.f);
          for (int i = 0; i < iters; ++i) step(acc);
          float sink = 0;
          for (auto& a : acc) sink += _mm512_reduce_add_ps(a);
          benchmark::DoNotOptimize(sink);
        },
        threads);
  }
  set_flops(st, flops_per_step * iters * threads);
}

void BM_peak_fp32(benchmark::State& st) {
  const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  probe(
      st,
      [&](__m512(&acc)[24]) {
#pragma GCC unroll 24
        for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
      },
      24 * 32.0);
}
#endif
#if defined(__AVX512BF16__)
void BM_peak_bf16(benchmark::State& st) {
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = x;
  probe(
      st,
      [&](__m512(&acc)[24]) {
#pragma GCC unroll 24
        for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
      },
      24 * 64.0);
}
#endif
#if defined(__AVX512VNNI__)
void BM_peak_int8(benchmark::State& st) {
  const __m512i x = _mm512_set1_epi32(0x01010101);
  // 12 chains: the measured best for vpdpbusd here
  probe(
      st,
      [&](__m512(&acc)[24]) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i)
          acc[i] = _mm512_castsi512_ps(_mm512_dpbusd_epi32(_mm512_castps_si512(acc[i]), x, x));
      },
      12 * 128.0);
}
#endif

// ------------------------------------------------------------------------------------- kfuse
template <class T, bool Fused>
void BM_kfuse(benchmark::State& st) {
  const shape s{st.range(0), st.range(1), st.range(2)};
  const int threads = int(st.range(3));
  std::vector<float> af = random_vector(std::size_t(s.m * s.k), 1),
                     bf = random_vector(std::size_t(s.k * s.n), 2);
  std::vector<T> a(af.size()), b(bf.size());
  for (std::size_t i = 0; i < af.size(); ++i) a[i] = kfuse::from_float<T>(af[i]);
  for (std::size_t i = 0; i < bf.size(); ++i) b[i] = kfuse::from_float<T>(bf[i]);
  std::vector<float> bias = random_vector(std::size_t(s.n), 3), c(std::size_t(s.m * s.n));
  using Ep =
      std::conditional_t<Fused, kfuse::epilogue<kfuse::bias, kfuse::gelu_tanh>, kfuse::epilogue<>>;
  using G = kfuse::gemm<kfuse::elem_of<T>, kfuse::arch::native, Ep>;
  const auto w = G::pack(b.data(), s.k, s.n, kfuse::b_layout::nk);
  Ep ep{};
  if constexpr (Fused) ep = Ep{{{bias.data(), bias.size()}}, {}};
  kfuse::run_info info;
  for (auto _ : st) info = G::run(a.data(), s.m, s.k, w, c.data(), s.n, ep, {threads});
  st.SetLabel(std::string(info.micro_kernel));
  set_flops(st, 2.0 * double(s.m * s.n * s.k));
  st.counters["pack_ms"] = w.pack_seconds() * 1e3;
}

// kfuse int8: u8 activations x s8 weights, requantized to u8 with per-output-channel multipliers
// (the "requantize epilogue" row), or the raw s32 accumulators (bare).
template <bool Requant>
void BM_kfuse_int8(benchmark::State& st) {
  const shape s{st.range(0), st.range(1), st.range(2)};
  const int threads = int(st.range(3));
  std::mt19937 rng(5);
  std::vector<std::uint8_t> a(std::size_t(s.m * s.k));
  std::vector<std::int8_t> b(std::size_t(s.k * s.n));
  for (auto& x : a) x = std::uint8_t(rng());
  std::vector<float> mult(std::size_t(s.n), 1.f / 4096.f);
  using Ep =
      std::conditional_t<Requant, kfuse::epilogue<kfuse::requantize<kfuse::u8>>, kfuse::epilogue<>>;
  using Out = std::conditional_t<Requant, std::uint8_t, std::int32_t>;
  using G = kfuse::gemm<kfuse::i8, kfuse::arch::native, Ep>;
  // Any s8, or 7-bit where the arch has no vpdpbusd (its vpmaddubsw kernel's limit).
  const int wl = std::min(127, G::int8_weight_limit);
  for (auto& x : b) x = std::int8_t(int(rng() % unsigned(2 * wl + 1)) - wl);
  const auto w = G::pack(b.data(), s.k, s.n, kfuse::b_layout::nk);
  std::vector<Out> c(std::size_t(s.m * s.n));
  Ep ep{};
  if constexpr (Requant) ep = Ep{{1.f, 128, {mult.data(), mult.size()}}};
  kfuse::run_info info;
  for (auto _ : st) info = G::run(a.data(), s.m, s.k, w, c.data(), s.n, ep, {threads}, 3);
  st.SetLabel(std::string(info.micro_kernel));
  set_flops(st, 2.0 * double(s.m * s.n * s.k));
}

// ------------------------------------------------------------------------------------ oneDNN
#if KFUSE_BENCH_HAVE_DNNL
template <bool BF16, bool Fused>
void BM_onednn(benchmark::State& st) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const shape s{st.range(0), st.range(1), st.range(2)};
  kfuse_bench::dnnl_cpu cpu(int(st.range(3)));
  const dt in_t = BF16 ? dt::bf16 : dt::f32;
  memory::desc a_md({s.m, s.k}, in_t, tag::ab), w_any({s.k, s.n}, in_t, tag::any),
      w_user({s.k, s.n}, dt::f32, tag::ba), c_md({s.m, s.n}, dt::f32, tag::ab),
      b_md({1, s.n}, dt::f32, tag::ab);
  primitive_attr attr;
  if (Fused) {
    post_ops po;
    po.append_eltwise(1.f, algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  auto pd = Fused ? matmul::primitive_desc(matmul::desc(a_md, w_any, b_md, c_md), attr, cpu.eng)
                  : matmul::primitive_desc(matmul::desc(a_md, w_any, c_md), attr, cpu.eng);
  // Weights: reorder once from PyTorch's [N, K] (= "ba" of [K, N]) f32 into the primitive's layout.
  std::vector<float> wv = random_vector(std::size_t(s.k * s.n), 2),
                     bias = random_vector(std::size_t(s.n), 3), cv(std::size_t(s.m * s.n));
  memory w_src(w_user, cpu.eng, wv.data()), w_mem(pd.weights_desc(), cpu.eng);
  reorder(w_src, w_mem).execute(cpu.strm, w_src, w_mem);
  std::vector<float> af = random_vector(std::size_t(s.m * s.k), 1);
  memory a_f32({{s.m, s.k}, dt::f32, tag::ab}, cpu.eng, af.data()), a_mem(a_md, cpu.eng);
  reorder(a_f32, a_mem).execute(cpu.strm, a_f32, a_mem);
  memory b_mem(b_md, cpu.eng, bias.data()), c_mem(c_md, cpu.eng, cv.data());
  matmul mm(pd);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, c_mem}};
  if (Fused) args.insert({DNNL_ARG_BIAS, b_mem});
  for (auto _ : st) {
    mm.execute(cpu.strm, args);
    cpu.strm.wait();
  }
  st.SetLabel(pd.impl_info_str());
  set_flops(st, 2.0 * double(s.m * s.n * s.k));
}
#endif

// ------------------------------------------------------------------------------------- Eigen
#if KFUSE_BENCH_HAVE_DNNL
// oneDNN u8 x s8 matmul with a u8 output and per-output-channel scales (its requantize), or s32.
template <bool Requant>
void BM_onednn_int8(benchmark::State& st) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const shape s{st.range(0), st.range(1), st.range(2)};
  kfuse_bench::dnnl_cpu cpu(int(st.range(3)));
  memory::desc a_md({s.m, s.k}, dt::u8, tag::ab), w_any({s.k, s.n}, dt::s8, tag::any),
      w_user({s.k, s.n}, dt::s8, tag::ba), c_md({s.m, s.n}, Requant ? dt::u8 : dt::s32, tag::ab);
  primitive_attr attr;
  if (Requant) attr.set_output_scales(2, std::vector<float>(std::size_t(s.n), 1.f / 4096.f));
  auto pd = matmul::primitive_desc(matmul::desc(a_md, w_any, c_md), attr, cpu.eng);
  std::mt19937 rng(5);
  std::vector<std::uint8_t> av(std::size_t(s.m * s.k));
  std::vector<std::int8_t> wv(std::size_t(s.k * s.n));
  for (auto& x : av) x = std::uint8_t(rng());
  for (auto& x : wv) x = std::int8_t(rng());
  std::vector<std::int32_t> cv(std::size_t(s.m * s.n));
  memory w_src(w_user, cpu.eng, wv.data()), w_mem(pd.weights_desc(), cpu.eng);
  reorder(w_src, w_mem).execute(cpu.strm, w_src, w_mem);
  memory a_mem(a_md, cpu.eng, av.data()), c_mem(c_md, cpu.eng, cv.data());
  matmul mm(pd);
  for (auto _ : st) {
    mm.execute(cpu.strm, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, c_mem}});
    cpu.strm.wait();
  }
  st.SetLabel(pd.impl_info_str());
  set_flops(st, 2.0 * double(s.m * s.n * s.k));
}
#endif

#if KFUSE_BENCH_HAVE_EIGEN
void BM_eigen(benchmark::State& st) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const shape s{st.range(0), st.range(1), st.range(2)};
  Eigen::setNbThreads(int(st.range(3)));
  Mat a = Mat::Random(s.m, s.k), b = Mat::Random(s.k, s.n), c(s.m, s.n);
  for (auto _ : st) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(st, 2.0 * double(s.m * s.n * s.k));
}
#endif

template <class F, class Shapes>
void add_shapes(const char* name, F f, const Shapes& shapes) {
  for (int t : {1, 2})
    for (const shape& s : shapes)
      benchmark::RegisterBenchmark(name, f)
          ->Args({s.m, s.n, s.k, t})
          ->UseRealTime()
          ->MinTime(0.2)
          ->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  for (int t : {1, 2}) {
#if defined(__AVX512F__)
    benchmark::RegisterBenchmark("peak/fp32", BM_peak_fp32)->Arg(t)->UseRealTime();
#endif
#if defined(__AVX512BF16__)
    benchmark::RegisterBenchmark("peak/bf16", BM_peak_bf16)->Arg(t)->UseRealTime();
#endif
#if defined(__AVX512VNNI__)
    benchmark::RegisterBenchmark("peak/int8", BM_peak_int8)->Arg(t)->UseRealTime();
#endif
  }
  add_shapes("f32/bare/kfuse", BM_kfuse<float, false>, f32_shapes);
  add_shapes("f32/bias_gelu/kfuse", BM_kfuse<float, true>, f32_shapes);
  add_shapes("bf16/bare/kfuse", BM_kfuse<kfuse::bf16_t, false>, bf16_shapes);
  add_shapes("bf16/bias_gelu/kfuse", BM_kfuse<kfuse::bf16_t, true>, bf16_shapes);
  add_shapes("int8/bare/kfuse", BM_kfuse_int8<false>, int8_shapes);
  add_shapes("int8/requant/kfuse", BM_kfuse_int8<true>, int8_shapes);
#if KFUSE_BENCH_HAVE_DNNL
  add_shapes("int8/bare/onednn", BM_onednn_int8<false>, int8_shapes);
  add_shapes("int8/requant/onednn", BM_onednn_int8<true>, int8_shapes);
  add_shapes("f32/bare/onednn", BM_onednn<false, false>, f32_shapes);
  add_shapes("f32/bias_gelu/onednn", BM_onednn<false, true>, f32_shapes);
  add_shapes("bf16/bare/onednn", BM_onednn<true, false>, bf16_shapes);
  add_shapes("bf16/bias_gelu/onednn", BM_onednn<true, true>, bf16_shapes);
#endif
#if KFUSE_BENCH_HAVE_EIGEN
  add_shapes("f32/bare/eigen", BM_eigen, f32_shapes);
#endif
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
