// eltwise benchmark: the chain scale -> bias -> relu -> gelu(tanh) over 64 Mi floats (256 MiB
// arrays), fused in one kfuse pass vs the same kfuse stages as separate passes vs an Eigen array
// expression, next to STREAM-like copy and triad measured in the same run.
//
//   y[n,c,h,w] = gelu_tanh( relu( x * s + b[c] ) )     NCHW, C = 64, H = W = 1024
//
// Counters (all from real time):
//   GB/s      effective bandwidth: one read of each input + one write of each output
//             (f32 chain 8 B/elem, bf16 input 6 B/elem, copy 8 B/elem, triad 12 B/elem)
//   traffic   bytes the variant really moves (separate passes: every intermediate)
//   x_triad   GB/s over the median of the triad with the same thread count in this run
//
// Buffers are allocated, huge-page advised and first-touched once, outside any timed loop.
// Every variant's output is checked against a double-precision reference after it is timed.
//
//   scripts/bench_eltwise.sh            builds, runs with JSON output, prints the table
//   eltwise_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/kfuse.hpp"

#if KFUSE_BENCH_HAVE_EIGEN
#include <Eigen/Core>
#endif

namespace {

using kfuse::index_t;

constexpr kfuse::dims4 shape{1, 64, 1024, 1024};
constexpr index_t numel = shape.n * shape.c * shape.h * shape.w;  // 64 Mi
constexpr index_t plane = shape.h * shape.w;
constexpr index_t planes = shape.n * shape.c;
constexpr float scale_value = 1.25f;
constexpr float triad_scalar = 3.f;

// ---------------------------------------------------------------------------------------------
// Memory: anonymous mappings, 2 MiB aligned, MADV_HUGEPAGE unless KFUSE_BENCH_HUGEPAGES=0.

bool want_hugepages() {
  const char* e = std::getenv("KFUSE_BENCH_HUGEPAGES");
  return !(e && std::strcmp(e, "0") == 0);
}

template <class T>
struct big_buffer {
  T* p = nullptr;
  std::size_t bytes = 0;
  explicit big_buffer(index_t n) : bytes(sizeof(T) * std::size_t(n)) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    if (want_hugepages()) madvise(m, bytes, MADV_HUGEPAGE);
    p = static_cast<T*>(m);
  }
  ~big_buffer() { munmap(p, bytes); }
  big_buffer(const big_buffer&) = delete;
  big_buffer& operator=(const big_buffer&) = delete;
};

struct data_set {
  big_buffer<float> in{numel}, out{numel}, t1{numel}, t2{numel};
  big_buffer<kfuse::bf16_t> in_bf16{numel};
  std::vector<float> bias = std::vector<float>(std::size_t(shape.c));

  data_set() {
    for (index_t c = 0; c < shape.c; ++c) bias[std::size_t(c)] = 0.125f * float(c % 13) - 0.75f;
    // First touch of everything, once. Inputs in [-4, 4): exp and the relu both see work.
    std::uint32_t s = 12345u;
    for (index_t i = 0; i < numel; ++i) {
      s = s * 1664525u + 1013904223u;
      const float x = float(s >> 8) * (8.f / 16777216.f) - 4.f;
      in.p[i] = x;
      in_bf16.p[i] = kfuse::from_float<kfuse::bf16_t>(x);
    }
    std::memset(out.p, 0, out.bytes);
    std::memset(t1.p, 0, t1.bytes);
    std::memset(t2.p, 0, t2.bytes);
  }
};

data_set& data() {
  static data_set d;  // created by the first benchmark, before its timed loop
  return d;
}

// ---------------------------------------------------------------------------------------------
// The variants.

using chain = kfuse::epilogue<kfuse::scale, kfuse::bias, kfuse::relu, kfuse::gelu_tanh>;

chain make_chain(const data_set& d) { return chain{{scale_value}, {d.bias}, {}, {}}; }

template <class T>
auto nchw(T* p) {
  return kfuse::view<kfuse::nchw>(p, shape);
}

template <class B, class In>
void kfuse_fused(data_set& d, const In* in, int threads) {
  kfuse::eltwise<kfuse::arch::native, B>(nchw(in), nchw(d.out.p), make_chain(d),
                                         kfuse::run_options{threads});
}

template <class B, class In>
void kfuse_fused_nhwc(data_set& d, const In* in, int threads) {
  const kfuse::dims4 s{shape.n, shape.c, shape.h, shape.w};
  kfuse::eltwise<kfuse::arch::native, B>(kfuse::view<kfuse::nhwc>(in, s),
                                         kfuse::view<kfuse::nhwc>(d.out.p, s), make_chain(d),
                                         kfuse::run_options{threads});
}

// Compute ceiling: the same fused call on a cache-resident slice (32 Ki floats in, 32 Ki out:
// 256 KiB, inside the 1 MiB L2), 64 calls per iteration. Not a memory-bound number.
constexpr kfuse::dims4 cached_shape{1, 64, 32, 16};
constexpr int cached_calls = 64;
constexpr index_t cached_numel = cached_shape.n * cached_shape.c * cached_shape.h * cached_shape.w;

template <class B, class In>
void kfuse_fused_cached(data_set& d, const In* in, int threads) {
  for (int k = 0; k < cached_calls; ++k)
    kfuse::eltwise<kfuse::arch::native, B>(kfuse::view<kfuse::nchw>(in, cached_shape),
                                           kfuse::view<kfuse::nchw>(d.out.p, cached_shape),
                                           make_chain(d), kfuse::run_options{threads});
}

// One stage per eltwise call: in -> t1 -> t2 -> t1 -> out.
template <class B, class In>
void kfuse_separate(data_set& d, const In* in, int threads) {
  const kfuse::run_options o{threads};
  using kfuse::epilogue;
  const float* t1 = d.t1.p;
  const float* t2 = d.t2.p;
  kfuse::eltwise<kfuse::arch::native, B>(in, d.t1.p, numel, epilogue<kfuse::scale>{{scale_value}},
                                         o);
  kfuse::eltwise<kfuse::arch::native, B>(nchw(t1), nchw(d.t2.p), epilogue<kfuse::bias>{{d.bias}},
                                         o);
  kfuse::eltwise<kfuse::arch::native, B>(t2, d.t1.p, numel, epilogue<kfuse::relu>{{}}, o);
  kfuse::eltwise<kfuse::arch::native, B>(t1, d.out.p, numel, epilogue<kfuse::gelu_tanh>{{}}, o);
}

#if KFUSE_BENCH_HAVE_EIGEN
// The natural Eigen form: one array expression per channel plane (the bias is a scalar there).
// Eigen does not thread coefficient-wise expressions; at 2 threads the planes are split over the
// kfuse pool.
void eigen_planes(data_set& d, index_t p0, index_t p1) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2/pi)
  for (index_t p = p0; p < p1; ++p) {
    Eigen::Map<const Eigen::ArrayXf> x(d.in.p + p * plane, plane);
    Eigen::Map<Eigen::ArrayXf> y(d.out.p + p * plane, plane);
    const float b = d.bias[std::size_t(p % shape.c)];
    const auto z = (x * scale_value + b).max(0.f);
    y = 0.5f * z * (1.f + (k * (z + 0.044715f * z.cube())).tanh());
  }
}

void eigen_chain(data_set& d, int threads) {
  if (threads <= 1) return eigen_planes(d, 0, planes);
  kfuse::parallel_for(
      0, planes, 1, [&](kfuse::range r, int) { eigen_planes(d, r.begin, r.end); }, threads);
}
#endif

// STREAM-like references: AVX-512, regular (not non-temporal) stores like kfuse's, each thread
// one contiguous part, over the same kfuse pool.
// numel and every thread's part are multiples of 64 floats: no scalar tails.
static_assert(numel % 128 == 0);
template <class Body>
void split_static(int threads, Body body) {
  if (threads <= 1) return body(index_t(0), numel);
  const index_t per = (numel / threads + 63) / 64 * 64;
  kfuse::parallel_for(
      0, threads, 1,
      [&](kfuse::range r, int) {
        for (index_t t = r.begin; t < r.end; ++t)
          body(std::min(numel, t * per), std::min(numel, (t + 1) * per));
      },
      threads);
}

void stream_copy(data_set& d, int threads) {
  float* a = d.t1.p;
  const float* b = d.t2.p;
  split_static(threads, [=](index_t i0, index_t i1) {
    index_t i = i0;
    for (; i + 64 <= i1; i += 64) {
      const __m512 v0 = _mm512_loadu_ps(b + i), v1 = _mm512_loadu_ps(b + i + 16);
      const __m512 v2 = _mm512_loadu_ps(b + i + 32), v3 = _mm512_loadu_ps(b + i + 48);
      _mm512_storeu_ps(a + i, v0);
      _mm512_storeu_ps(a + i + 16, v1);
      _mm512_storeu_ps(a + i + 32, v2);
      _mm512_storeu_ps(a + i + 48, v3);
    }
  });
}

void stream_triad(data_set& d, int threads) {
  float* a = d.t1.p;
  const float* b = d.t2.p;
  const float* c = d.out.p;
  split_static(threads, [=](index_t i0, index_t i1) {
    const __m512 s = _mm512_set1_ps(triad_scalar);
    index_t i = i0;
    for (; i + 64 <= i1; i += 64) {
      for (int u = 0; u < 64; u += 16)
        _mm512_storeu_ps(
            a + i + u, _mm512_fmadd_ps(s, _mm512_loadu_ps(c + i + u), _mm512_loadu_ps(b + i + u)));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Checks: a strided sample of the output against the chain in double.

double chain_ref(double x, double b) {
  double y = std::max(x * double(scale_value) + b, 0.0);
  const double u = 0.7978845608028654 * (y + 0.044715 * y * y * y);
  return 0.5 * y * (1.0 + std::tanh(u));
}

template <class In>
double max_chain_error(const data_set& d, const In* in, bool channels_last = false) {
  double worst = 0;
  for (index_t i = 0; i < numel; i += 4093) {
    const double x = double(kfuse::to_float(in[i]));
    const index_t c = channels_last ? i % shape.c : (i / plane) % shape.c;
    const double ref = chain_ref(x, double(d.bias[std::size_t(c)]));
    const double err = std::abs(double(d.out.p[i]) - ref) / std::max(1.0, std::abs(ref));
    worst = std::max(worst, err);
  }
  return worst;
}

double max_triad_error(const data_set& d) {
  double worst = 0;
  for (index_t i = 0; i < numel; i += 4093)
    worst = std::max(worst, std::abs(double(d.t1.p[i]) -
                                     (double(d.t2.p[i]) + triad_scalar * double(d.out.p[i]))));
  return worst;
}

// ---------------------------------------------------------------------------------------------
// Harness.

std::map<int, std::vector<double>> triad_gbps;  // per thread count, every triad run of this process

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

enum class check_kind { chain_f32, chain_f32_nhwc, chain_bf16, triad, none };

struct bench_case {
  std::string name;
  double bytes;    // effective bytes per call
  double traffic;  // bytes really moved per call
  check_kind check;
  void (*run)(data_set&, int);
  int max_threads = 2;
};

void run_case(benchmark::State& state, const bench_case& bc) {
  const int threads = int(state.range(0));
  data_set& d = data();
  if (bc.check == check_kind::triad) {
    // Triad reads t2 and out: give them values that are not all zero.
    std::memcpy(d.t2.p, d.in.p, d.in.bytes);
    std::memcpy(d.out.p, d.in.p, d.in.bytes);
  }
  bc.run(d, threads);  // warm-up
  const auto t0 = kfuse_bench::clock::now();
  for (auto _ : state) {
    bc.run(d, threads);
    benchmark::ClobberMemory();
  }
  const double secs = kfuse_bench::seconds_since(t0);
  const double gbps = bc.bytes * double(state.iterations()) / secs * 1e-9;

  double err = 0;
  switch (bc.check) {
    case check_kind::chain_f32:
      err = max_chain_error(d, d.in.p);
      break;
    case check_kind::chain_f32_nhwc:
      err = max_chain_error(d, d.in.p, true);
      break;
    case check_kind::chain_bf16:
      err = max_chain_error(d, d.in_bf16.p);
      break;
    case check_kind::triad:
      err = max_triad_error(d);
      break;
    case check_kind::none:
      break;
  }
  if (err > 1e-4) {
    state.SkipWithError((bc.name + ": wrong result, max rel error " + std::to_string(err)).c_str());
    return;
  }
  if (bc.name == "triad") triad_gbps[threads].push_back(gbps);

  using C = benchmark::Counter;
  state.counters["GB/s"] = C(bc.bytes * 1e-9, C::kIsIterationInvariantRate);
  state.counters["traffic"] = C(bc.traffic * 1e-9, C::kIsIterationInvariantRate);
  const double triad = median(triad_gbps[threads]);
  if (triad > 0) state.counters["x_triad"] = gbps / triad;
  state.counters["max_err"] = err;
}

void register_all() {
  const double n = double(numel);
  const double f32 = 4 * n, bf = 2 * n;
  using xs = kfuse::backend::xsimd;
  using hw = kfuse::backend::hwy;
  static const std::vector<bench_case> cases = {
    // References first: x_triad of every later case divides by this run's triad median.
    {"triad", 3 * f32, 3 * f32, check_kind::triad, stream_triad},
    {"copy", 2 * f32, 2 * f32, check_kind::none, stream_copy},
    {"fused_f32_xsimd", 2 * f32, 2 * f32, check_kind::chain_f32,
     [](data_set& d, int t) { kfuse_fused<xs>(d, d.in.p, t); }},
    {"fused_f32_hwy", 2 * f32, 2 * f32, check_kind::chain_f32,
     [](data_set& d, int t) { kfuse_fused<hw>(d, d.in.p, t); }},
    {"fused_bf16_xsimd", bf + f32, bf + f32, check_kind::chain_bf16,
     [](data_set& d, int t) { kfuse_fused<xs>(d, d.in_bf16.p, t); }},
    {"fused_bf16_hwy", bf + f32, bf + f32, check_kind::chain_bf16,
     [](data_set& d, int t) { kfuse_fused<hw>(d, d.in_bf16.p, t); }},
    {"fused_f32_xsimd_nhwc", 2 * f32, 2 * f32, check_kind::chain_f32_nhwc,
     [](data_set& d, int t) { kfuse_fused_nhwc<xs>(d, d.in.p, t); }},
    {"separate_f32_xsimd", 2 * f32, 8 * f32, check_kind::chain_f32,
     [](data_set& d, int t) { kfuse_separate<xs>(d, d.in.p, t); }},
    {"separate_f32_hwy", 2 * f32, 8 * f32, check_kind::chain_f32,
     [](data_set& d, int t) { kfuse_separate<hw>(d, d.in.p, t); }},
    {"separate_bf16_xsimd", bf + f32, bf + 7 * f32, check_kind::chain_bf16,
     [](data_set& d, int t) { kfuse_separate<xs>(d, d.in_bf16.p, t); }},
    {"separate_bf16_hwy", bf + f32, bf + 7 * f32, check_kind::chain_bf16,
     [](data_set& d, int t) { kfuse_separate<hw>(d, d.in_bf16.p, t); }},
    {"cached_fused_f32_xsimd", 8. * cached_numel * cached_calls, 8. * cached_numel * cached_calls,
     check_kind::none, [](data_set& d, int t) { kfuse_fused_cached<xs>(d, d.in.p, t); }, 1},
    {"cached_fused_bf16_xsimd", 6. * cached_numel * cached_calls, 6. * cached_numel * cached_calls,
     check_kind::none, [](data_set& d, int t) { kfuse_fused_cached<xs>(d, d.in_bf16.p, t); }, 1},
#if KFUSE_BENCH_HAVE_EIGEN
    {"eigen_f32", 2 * f32, 2 * f32, check_kind::chain_f32, eigen_chain},
#endif
  };
  const int max_threads = std::min(2, kfuse::default_pool().size());
  for (const bench_case& bc : cases) {
    auto* b = benchmark::RegisterBenchmark(bc.name.c_str(),
                                           [&bc](benchmark::State& s) { run_case(s, bc); });
    b->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
    // Extremes of the repetitions next to the median: "max" holds the best GB/s (and the worst
    // time), "min" the worst GB/s. Other jobs on a shared machine only ever slow a run down.
    b->ComputeStatistics(
        "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
    b->ComputeStatistics(
        "max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
    for (int t = 1; t <= std::min(max_threads, bc.max_threads); ++t) b->Arg(t);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("kfuse.impl.xsimd",
                              kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::xsimd>());
  benchmark::AddCustomContext("kfuse.impl.hwy",
                              kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::hwy>());
  benchmark::AddCustomContext("kfuse.pool_threads", std::to_string(kfuse::default_pool().size()));
  benchmark::AddCustomContext("kfuse.hugepages", want_hugepages() ? "madvise" : "off");
  benchmark::AddCustomContext("kfuse.numel", std::to_string(numel));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
