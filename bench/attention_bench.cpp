// Attention benchmark: the fused kernel against the same attention as separate
// kfuse kernels (batched_gemm Q.K^T with the scale in its epilogue -> softmax over the rows ->
// batched_gemm P.V: the S x S scores written and read twice) and against oneDNN (matmul with the
// scale as an output scale attribute -> softmax_forward -> matmul), batch 1, 12 heads, head dim
// 64, sequence 128 to 4096, 1 and 2 threads; a small encoder's heads (12 x 32, sequence 128 and
// 384) with f32 and bf16 products; and the decoder step: one new query token against a KV cache
// of 128 to 2048 positions (12 heads, causal), whose floor is reading the cache once.
//
//   name: attention/<impl>/<seq>/<threads>, kv_step/kfuse/<context>/<threads>
//   counters: GFLOP per second (4 H S^2 d), traffic_MB (bytes an implementation moves to and from
//   memory at the least: Q, K, V, O for the fused kernel (and its K / V panels), plus 3 passes over
//   the H S^2 scores unfused), GB per second of that traffic; kv_step: tokens/s and floor_us (cache
//   bytes / the probed one-thread STREAM bandwidth).
//
// Every implementation's output is compared with the fused kernel's after timing (max abs
// difference in the label; SkipWithError above 1e-4).
//
//   scripts/bench_attention.sh       builds, runs (3 repetitions), prints the table
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/epilogue/affine.hpp"
#include "kfuse/kernels/attention.hpp"
#include "kfuse/kernels/gemm/batched_gemm.hpp"
#include "kfuse/kernels/softmax.hpp"
#include "kfuse/tools/machine_limits.hpp"

namespace {

using kfuse::index_t;
constexpr index_t H = 12, D = 64;

struct qkv {
  std::vector<float> q, k, v, o;
  explicit qkv(index_t S) : q(std::size_t(S * H * D)), k(q.size()), v(q.size()), o(q.size()) {
    std::mt19937 rng{unsigned(S)};
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto* x : {&q, &k, &v})
      for (float& e : *x) e = u(rng);
  }
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

/// The fused kernel's output for (S, causal), the reference the others are compared with.
std::vector<float> fused_out(index_t S) {
  qkv d(S);
  kfuse::attention_kernel<>::run(d.q.data(), d.k.data(), d.v.data(), nullptr, d.o.data(),
                                 kfuse::attention_problem::bshd(1, H, S, S, D), {.threads = 1});
  return d.o;
}

void counters(benchmark::State& s, index_t S, double traffic) {
  const double flops = 4.0 * double(H) * double(S) * double(S) * double(D);
  s.counters["GFLOP"] =
      benchmark::Counter(flops * 1e-9 * double(s.iterations()), benchmark::Counter::kIsRate);
  s.counters["traffic_MB"] = traffic * 1e-6;
  s.counters["GB"] =
      benchmark::Counter(traffic * 1e-9 * double(s.iterations()), benchmark::Counter::kIsRate);
}

void BM_fused(benchmark::State& s) {
  const index_t S = s.range(0);
  const int threads = int(s.range(1));
  qkv d(S);
  using K = kfuse::attention_kernel<>;
  const auto p = kfuse::attention_problem::bshd(1, H, S, S, D);
  const kfuse::workspace_buffer ws(K::workspace_size(p, threads));
  const auto packed = K::initialize(p);
  for (auto _ : s)
    K::run(d.q.data(), d.k.data(), d.v.data(), nullptr, packed, d.o.data(), ws, {threads});
  // Q, K, V, O once, and K / V packed into the workspace (written and read).
  counters(s, S, 4.0 * double(d.q.size()) * 4 + 2.0 * 2 * double(d.k.size()) * 4);
  s.SetLabel("max diff 0");
}

void BM_unfused(benchmark::State& s) {
  const index_t S = s.range(0);
  const int threads = int(s.range(1));
  qkv d(S);
  std::vector<float> scores(std::size_t(H * S * S));
  // Q.K^T * scale: Q [S, H, D] read per head (row stride H D), K^T through strides.
  kfuse::batched_gemm_problem qk;
  qk.m = S;
  qk.k = D;
  qk.n = S;
  qk.batch_rank = 1;
  qk.batch = {H};
  qk.a_batch = {D};
  qk.b_batch = {D};
  qk.c_batch = {S * S};
  qk.a_row = H * D;
  qk.b_row = 1;
  qk.b_col = H * D;
  qk.c_row = S;
  kfuse::batched_gemm_problem pv = qk;
  pv.k = S;
  pv.n = D;
  pv.a_batch = {S * S};
  pv.a_row = S;
  pv.b_batch = {D};
  pv.b_row = H * D;
  pv.b_col = 1;
  pv.c_batch = {D};
  pv.c_row = H * D;
  using QK = kfuse::batched_gemm<kfuse::f32, kfuse::arch::native, kfuse::epilogue<kfuse::scale>>;
  using PV = kfuse::batched_gemm<kfuse::f32>;
  const kfuse::workspace_buffer ws1(QK::workspace_size(qk, threads)),
      ws2(PV::workspace_size(pv, threads));
  const auto p1 = QK::initialize(qk);
  const auto p2 = PV::initialize(pv);
  const kfuse::epilogue<kfuse::scale> sc{{1.f / 8.f}};
  for (auto _ : s) {
    QK::run(d.q.data(), d.k.data(), p1, scores.data(), sc, ws1, {threads});
    kfuse::softmax(scores.data(), scores.data(), H * S, S, {}, {threads});
    PV::run(scores.data(), d.v.data(), p2, d.o.data(), {}, ws2, {threads});
  }
  counters(s, S, 4.0 * double(d.q.size()) * 4 + 3.0 * double(scores.size()) * 4);
  const double diff = max_diff(d.o, fused_out(S));
  s.SetLabel("max diff " + std::to_string(diff));
  if (diff > 1e-4) s.SkipWithError("the unfused chain differs from the fused kernel");
}

#if KFUSE_BENCH_HAVE_DNNL
void BM_onednn(benchmark::State& s) {
  using namespace dnnl;
  const index_t S = s.range(0);
  const int threads = int(s.range(1));
  kfuse_bench::dnnl_cpu cpu(threads);
  qkv d(S);
  std::vector<float> scores(std::size_t(H * S * S));
  using dt = memory::data_type;
  // Q as [H, S, D] with strides over the [S, H, D] buffer; K^T as [H, D, S]; V [H, S, D].
  const memory::desc q_md({H, S, D}, dt::f32, memory::dims{D, H * D, 1});
  const memory::desc kt_md({H, D, S}, dt::f32, memory::dims{D, 1, H * D});
  const memory::desc s_md({H, S, S}, dt::f32, memory::dims{S * S, S, 1});
  const memory::desc v_md({H, S, D}, dt::f32, memory::dims{D, H * D, 1});
  const memory::desc o_md({H, S, D}, dt::f32, memory::dims{D, H * D, 1});
  primitive_attr qk_attr;
  qk_attr.set_output_scales(0, {1.f / 8.f});  // oneDNN 2.x: the scale on the product
  const auto qk_pd = matmul::primitive_desc(matmul::desc(q_md, kt_md, s_md), qk_attr, cpu.eng);
  const auto sm_pd = softmax_forward::primitive_desc(
      softmax_forward::desc(prop_kind::forward_inference, s_md, 2), cpu.eng);
  const auto pv_pd = matmul::primitive_desc(matmul::desc(s_md, v_md, o_md), cpu.eng);
  memory q_m(q_md, cpu.eng, d.q.data()), kt_m(kt_md, cpu.eng, d.k.data()),
      s_m(s_md, cpu.eng, scores.data()), v_m(v_md, cpu.eng, d.v.data()),
      o_m(o_md, cpu.eng, d.o.data());
  const matmul qk(qk_pd);
  const softmax_forward sm(sm_pd);
  const matmul pv(pv_pd);
  for (auto _ : s) {
    qk.execute(cpu.strm, {{DNNL_ARG_SRC, q_m}, {DNNL_ARG_WEIGHTS, kt_m}, {DNNL_ARG_DST, s_m}});
    sm.execute(cpu.strm, {{DNNL_ARG_SRC, s_m}, {DNNL_ARG_DST, s_m}});
    pv.execute(cpu.strm, {{DNNL_ARG_SRC, s_m}, {DNNL_ARG_WEIGHTS, v_m}, {DNNL_ARG_DST, o_m}});
    cpu.strm.wait();
  }
  counters(s, S, 4.0 * double(d.q.size()) * 4 + 3.0 * double(scores.size()) * 4);
  const double diff = max_diff(d.o, fused_out(S));
  s.SetLabel("max diff " + std::to_string(diff));
  if (diff > 1e-4) s.SkipWithError("oneDNN's chain differs from the fused kernel");
}
#endif

// A small encoder's heads (MiniLM: 12 heads of 32, sequence 128 / 384), the fused kernel with
// its products in f32 or in bf16 (vdpbf16ps where the arch has it): the attention of the
// encoder benchmark's rows.
template <class Math>
void BM_encoder_heads(benchmark::State& s) {
  const index_t S = s.range(0), d = 32;
  const int threads = int(s.range(1));
  std::vector<float> q(std::size_t(S * H * d)), o(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(float(i) * 0.37f);
  using K = kfuse::attention_kernel<kfuse::arch::native, kfuse::backend::xsimd, Math>;
  const auto p = kfuse::attention_problem::bshd(1, H, S, S, d);
  const kfuse::workspace_buffer ws(K::workspace_size(p, threads));
  const auto packed = K::initialize(p);
  for (auto _ : s) K::run(q.data(), q.data(), q.data(), nullptr, packed, o.data(), ws, {threads});
  s.counters["GFLOP"] = benchmark::Counter(
      4.0 * double(H) * double(S) * double(S) * double(d) * 1e-9 * double(s.iterations()),
      benchmark::Counter::kIsRate);
}

// One new token against a cache of `ctx` positions (causal: it sees all of them); T = the
// cache's element type (a bf16 cache is half the bytes to stream).
template <class T>
void BM_kv_step(benchmark::State& s) {
  const index_t ctx = s.range(0);
  const int threads = int(s.range(1));
  using K = kfuse::attention_kernel<>;
  auto p = kfuse::attention_problem::bshd(1, H, 1, ctx, D);
  p.causal = true;
  const T half = kfuse::from_float<T>(0.5f), quarter = kfuse::from_float<T>(0.25f);
  std::vector<T> q(std::size_t(H * D), half), kv(std::size_t(ctx * H * D), quarter), o(q.size());
  const kfuse::workspace_buffer ws(K::workspace_size(p, threads));
  const auto packed = K::initialize(p);
  for (auto _ : s) K::run(q.data(), kv.data(), kv.data(), nullptr, packed, o.data(), ws, {threads});
  const double cache_bytes = 2.0 * double(kv.size()) * sizeof(T);
  const double bw = kfuse::cached_machine_limits().bandwidth(1);
  s.counters["tokens/s"] = benchmark::Counter(double(s.iterations()), benchmark::Counter::kIsRate);
  s.counters["floor_us"] = cache_bytes / (bw * 1e9) * 1e6;
  s.counters["cache_MB"] = cache_bytes * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  for (int t : {1, 2})
    for (index_t S : {128, 256, 512, 1024, 2048, 4096}) {
      benchmark::RegisterBenchmark("attention/fused", BM_fused)
          ->Args({S, t})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark("attention/unfused", BM_unfused)
          ->Args({S, t})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
#if KFUSE_BENCH_HAVE_DNNL
      benchmark::RegisterBenchmark("attention/onednn", BM_onednn)
          ->Args({S, t})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
#endif
    }
  for (int t : {1, 2})
    for (index_t S : {128, 384}) {
      benchmark::RegisterBenchmark("encoder_heads/f32", BM_encoder_heads<kfuse::f32>)
          ->Args({S, t})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark("encoder_heads/bf16", BM_encoder_heads<kfuse::bf16>)
          ->Args({S, t})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  for (int t : {1, 2})
    for (index_t ctx : {128, 512, 1024, 2048})
      for (auto [name, fn] : {std::pair{"kv_step/kfuse", &BM_kv_step<float>},
                              std::pair{"kv_step/kfuse_bf16_cache", &BM_kv_step<kfuse::bf16_t>}})
        benchmark::RegisterBenchmark(name, fn)->Args({ctx, t})->UseRealTime()->Unit(
            benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto& lim = kfuse::cached_machine_limits();
  benchmark::AddCustomContext("kfuse.limits", kfuse_bench::limits_text(lim));
  benchmark::AddCustomContext("kfuse.impl",
                              kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::xsimd>());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
