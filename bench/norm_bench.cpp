// Normalization benchmark: softmax, layer norm and RMS norm over the last axis of a 4096 x 1024
// f32 matrix (and bf16 rows), kfuse vs oneDNN (softmax_forward / layer_normalization_forward
// with scale + shift) vs a plain hand-written AVX-512 loop (intrinsics, two passes over memory,
// OpenMP for 2 threads; also a variant with streaming stores, loop_nt), 1 and 2 threads, side by
// side in one run.
//
//   name: <op>_<dtype>/<impl>/<threads>     counters: GB/s (one read of the input + one write
//   of the output: 8 B per f32 element, 4 B per bf16 element), label: the path that ran.
//
// Every variant's output is checked against a double-precision reference on sampled rows
// after it is timed (SkipWithError on a mismatch). Buffers are allocated and touched once.
//
//   scripts/bench_norm.sh       builds, runs (5 repetitions), prints the table with ratios
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/kernels/norm.hpp"
#include "kfuse/kernels/softmax.hpp"

namespace {

using kfuse::index_t;
constexpr index_t rows = 4096, cols = 1024, numel = rows * cols;
constexpr float eps = 1e-5f;

template <class T>
struct buffer {
  T* p = nullptr;
  std::size_t bytes;
  explicit buffer(index_t n)
      : bytes((sizeof(T) * std::size_t(n) + (2u << 20) - 1) & ~((2u << 20) - 1)) {
    p = static_cast<T*>(std::aligned_alloc(2u << 20, bytes));
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(static_cast<void*>(p), 0, bytes);
  }
  ~buffer() { std::free(p); }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
};

struct data_set {
  buffer<float> x{numel}, y{numel};
  buffer<kfuse::bf16_t> xb{numel}, yb{numel};
  std::vector<float> gamma = std::vector<float>(cols), beta = std::vector<float>(cols);
  data_set() {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (index_t i = 0; i < numel; ++i) {
      x.p[i] = 0.5f + 2.f * normal(rng);
      xb.p[i] = kfuse::to_bf16(x.p[i]);
    }
    for (index_t j = 0; j < cols; ++j) {
      gamma[std::size_t(j)] = 0.5f + 0.001f * float(j);
      beta[std::size_t(j)] = -0.25f + 0.0005f * float(j);
    }
  }
};

data_set& data() {
  static data_set d;
  return d;
}

enum class op { softmax, layer_norm, rms_norm };

// Reference of row r into ref (double).
template <class T>
void reference(op o, const T* x, index_t r, std::vector<double>& ref) {
  const auto& d = data();
  ref.assign(std::size_t(cols), 0);
  auto at = [&](index_t j) { return double(kfuse::to_float(x[r * cols + j])); };
  if (o == op::softmax) {
    double m = -INFINITY, s = 0;
    for (index_t j = 0; j < cols; ++j) m = std::max(m, at(j));
    for (index_t j = 0; j < cols; ++j) s += std::exp(at(j) - m);
    for (index_t j = 0; j < cols; ++j) ref[std::size_t(j)] = std::exp(at(j) - m) / s;
    return;
  }
  double mean = 0, var = 0;
  if (o == op::layer_norm) {
    for (index_t j = 0; j < cols; ++j) mean += at(j);
    mean /= double(cols);
  }
  for (index_t j = 0; j < cols; ++j) var += (at(j) - mean) * (at(j) - mean);
  const double rstd = 1.0 / std::sqrt(var / double(cols) + double(eps));
  for (index_t j = 0; j < cols; ++j)
    ref[std::size_t(j)] = (at(j) - mean) * rstd * d.gamma[std::size_t(j)] +
                          (o == op::layer_norm ? d.beta[std::size_t(j)] : 0.0);
}

// Checks sampled rows of y; returns false (and skips the benchmark) on a mismatch.
template <class T, class U>
bool verify(benchmark::State& st, op o, const T* x, const U* y) {
  std::vector<double> ref;
  const double tol = std::is_same_v<U, float> ? 2e-5 : 1e-2;
  for (index_t r : {index_t(0), rows / 3, rows - 1}) {
    reference(o, x, r, ref);
    for (index_t j = 0; j < cols; ++j) {
      const double got = double(kfuse::to_float(y[r * cols + j])), want = ref[std::size_t(j)];
      if (!(std::fabs(got - want) <= tol * (std::fabs(want) + (o == op::softmax ? 1e-3 : 1.0)))) {
        st.SkipWithError(("wrong result at row " + std::to_string(r) + " col " + std::to_string(j) +
                          ": " + std::to_string(got) + " vs " + std::to_string(want))
                             .c_str());
        return false;
      }
    }
  }
  return true;
}

void set_bytes(benchmark::State& st, double bytes_per_elem) {
  st.counters["GB/s"] =
      benchmark::Counter(bytes_per_elem * double(numel) * double(st.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// ------------------------------------------------------------------------------------ kfuse
template <op O, class T>
void BM_kfuse(benchmark::State& st, kfuse::softmax_method method) {
  auto& d = data();
  const int threads = int(st.range(0));
  const T* x;
  T* y;
  if constexpr (std::is_same_v<T, float>) {
    x = d.x.p;
    y = d.y.p;
  } else {
    x = d.xb.p;
    y = d.yb.p;
  }
  const kfuse::layer_norm_params ln{d.gamma, d.beta, eps};
  const kfuse::rms_norm_params rn{d.gamma, eps};
  kfuse::run_info info;
  for (auto _ : st) {
    if constexpr (O == op::softmax)
      info = kfuse::softmax(x, y, rows, cols, {false, method}, {threads});
    else if constexpr (O == op::layer_norm)
      info = kfuse::layer_norm(x, y, rows, cols, ln, kfuse::epilogue<>{}, {threads});
    else
      info = kfuse::rms_norm(x, y, rows, cols, rn, kfuse::epilogue<>{}, {threads});
    benchmark::ClobberMemory();
  }
  st.SetLabel(std::string(info.impl) + " " + std::string(info.micro_kernel) + " " +
              std::to_string(info.threads) + "T");
  set_bytes(st, 2.0 * sizeof(T));
  verify(st, O, x, y);
}

// --------------------------------------------------------------- hand-written AVX-512 loops
// exp(x) for x <= 0: 2^(x log2 e) = 2^n * p(f), degree-5 polynomial, vscalefps.
inline __m512 exp512(__m512 x) {
  const __m512 s =
      _mm512_max_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.4426950408889634f)), _mm512_set1_ps(-127.f));
  const __m512 n = _mm512_roundscale_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(s, n);
  __m512 p = _mm512_set1_ps(1.3276472167819944e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.675541331021392e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550713272875391e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402211972396918e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931469670652649e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0000000716546416f));
  return _mm512_scalef_ps(p, n);
}

// Softmax, the standard three passes (the row stays in L1 after the first).
inline void loop_softmax_row(const float* x, float* y) {
  __m512 m0 = _mm512_loadu_ps(x), m1 = m0, m2 = m0, m3 = m0;
  for (index_t j = 0; j < cols; j += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + j + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + j + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + j + 48));
  }
  const __m512 vm = _mm512_set1_ps(
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (index_t j = 0; j < cols; j += 64) {
    const __m512 e0 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
    const __m512 e1 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm));
    const __m512 e2 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 32), vm));
    const __m512 e3 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 48), vm));
    _mm512_storeu_ps(y + j, e0);
    _mm512_storeu_ps(y + j + 16, e1);
    _mm512_storeu_ps(y + j + 32, e2);
    _mm512_storeu_ps(y + j + 48, e3);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
    s2 = _mm512_add_ps(s2, e2);
    s3 = _mm512_add_ps(s3, e3);
  }
  const __m512 r = _mm512_set1_ps(
      1.f / _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))));
  for (index_t j = 0; j < cols; j += 32) {
    _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(y + j), r));
    _mm512_storeu_ps(y + j + 16, _mm512_mul_ps(_mm512_loadu_ps(y + j + 16), r));
  }
}

// Layer norm / RMS norm, two passes: sum and sum of squares, then normalize with the affine.
template <bool Rms>
inline void loop_norm_row(const float* x, float* y, const float* g, const float* b) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
  for (index_t j = 0; j < cols; j += 32) {
    const __m512 a = _mm512_loadu_ps(x + j), c = _mm512_loadu_ps(x + j + 16);
    if (!Rms) {
      s0 = _mm512_add_ps(s0, a);
      s1 = _mm512_add_ps(s1, c);
    }
    q0 = _mm512_fmadd_ps(a, a, q0);
    q1 = _mm512_fmadd_ps(c, c, q1);
  }
  const float mean = Rms ? 0.f : _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / float(cols);
  const float var = _mm512_reduce_add_ps(_mm512_add_ps(q0, q1)) / float(cols) - mean * mean;
  const __m512 vm = _mm512_set1_ps(mean), r = _mm512_set1_ps(1.f / std::sqrt(var + eps));
  for (index_t j = 0; j < cols; j += 32) {
    const __m512 a = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm), r);
    const __m512 c = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm), r);
    if (Rms) {
      _mm512_storeu_ps(y + j, _mm512_mul_ps(a, _mm512_loadu_ps(g + j)));
      _mm512_storeu_ps(y + j + 16, _mm512_mul_ps(c, _mm512_loadu_ps(g + j + 16)));
    } else {
      _mm512_storeu_ps(y + j, _mm512_fmadd_ps(a, _mm512_loadu_ps(g + j), _mm512_loadu_ps(b + j)));
      _mm512_storeu_ps(
          y + j + 16, _mm512_fmadd_ps(c, _mm512_loadu_ps(g + j + 16), _mm512_loadu_ps(b + j + 16)));
    }
  }
}

// The same loops with non-temporal stores (what kfuse does for outputs of 8 MiB and more):
// softmax keeps exp(x - max) in an L1 buffer and streams the scaled row out.
inline void loop_softmax_row_nt(const float* x, float* y) {
  alignas(64) float buf[cols];
  __m512 m0 = _mm512_loadu_ps(x), m1 = m0, m2 = m0, m3 = m0;
  for (index_t j = 0; j < cols; j += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + j));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + j + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + j + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + j + 48));
  }
  const __m512 vm = _mm512_set1_ps(
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (index_t j = 0; j < cols; j += 64) {
    const __m512 e0 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
    const __m512 e1 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm));
    const __m512 e2 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 32), vm));
    const __m512 e3 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 48), vm));
    _mm512_store_ps(buf + j, e0);
    _mm512_store_ps(buf + j + 16, e1);
    _mm512_store_ps(buf + j + 32, e2);
    _mm512_store_ps(buf + j + 48, e3);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
    s2 = _mm512_add_ps(s2, e2);
    s3 = _mm512_add_ps(s3, e3);
  }
  const __m512 r = _mm512_set1_ps(
      1.f / _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))));
  for (index_t j = 0; j < cols; j += 32) {
    _mm512_stream_ps(y + j, _mm512_mul_ps(_mm512_load_ps(buf + j), r));
    _mm512_stream_ps(y + j + 16, _mm512_mul_ps(_mm512_load_ps(buf + j + 16), r));
  }
}

inline void loop_layer_norm_row_nt(const float* x, float* y, const float* g, const float* b) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
  for (index_t j = 0; j < cols; j += 32) {
    const __m512 a = _mm512_loadu_ps(x + j), c = _mm512_loadu_ps(x + j + 16);
    s0 = _mm512_add_ps(s0, a);
    s1 = _mm512_add_ps(s1, c);
    q0 = _mm512_fmadd_ps(a, a, q0);
    q1 = _mm512_fmadd_ps(c, c, q1);
  }
  const float mean = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / float(cols);
  const float var = _mm512_reduce_add_ps(_mm512_add_ps(q0, q1)) / float(cols) - mean * mean;
  const __m512 vm = _mm512_set1_ps(mean), r = _mm512_set1_ps(1.f / std::sqrt(var + eps));
  for (index_t j = 0; j < cols; j += 32) {
    const __m512 a = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm), r);
    const __m512 c = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm), r);
    _mm512_stream_ps(y + j, _mm512_fmadd_ps(a, _mm512_loadu_ps(g + j), _mm512_loadu_ps(b + j)));
    _mm512_stream_ps(y + j + 16,
                     _mm512_fmadd_ps(c, _mm512_loadu_ps(g + j + 16), _mm512_loadu_ps(b + j + 16)));
  }
}

template <op O>
void BM_loop_nt(benchmark::State& st) {
  auto& d = data();
  const int threads = int(st.range(0));
  const float *x = d.x.p, *g = d.gamma.data(), *b = d.beta.data();
  float* y = d.y.p;
  for (auto _ : st) {
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
      for (index_t r = 0; r < rows; ++r) {
        if constexpr (O == op::softmax)
          loop_softmax_row_nt(x + r * cols, y + r * cols);
        else
          loop_layer_norm_row_nt(x + r * cols, y + r * cols, g, b);
      }
      _mm_sfence();
    }
    benchmark::ClobberMemory();
  }
  st.SetLabel("AVX-512 intrinsics, streaming stores, OpenMP " + std::to_string(threads) + "T");
  set_bytes(st, 8.0);
  verify(st, O, x, y);
}

template <op O>
void BM_loop(benchmark::State& st) {
  auto& d = data();
  const int threads = int(st.range(0));
  const float *x = d.x.p, *g = d.gamma.data(), *b = d.beta.data();
  float* y = d.y.p;
  for (auto _ : st) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (index_t r = 0; r < rows; ++r) {
      if constexpr (O == op::softmax)
        loop_softmax_row(x + r * cols, y + r * cols);
      else
        loop_norm_row<O == op::rms_norm>(x + r * cols, y + r * cols, g, b);
    }
    benchmark::ClobberMemory();
  }
  st.SetLabel("AVX-512 intrinsics, OpenMP " + std::to_string(threads) + "T");
  set_bytes(st, 8.0);
  verify(st, O, x, y);
}

// ------------------------------------------------------------------------------------ oneDNN
#if KFUSE_BENCH_HAVE_DNNL
template <op O>
void BM_onednn(benchmark::State& st) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  auto& d = data();
  kfuse_bench::dnnl_cpu cpu(int(st.range(0)));
  const memory::desc md({rows, cols}, dt::f32, tag::ab), pmd({cols}, dt::f32, tag::a);
  memory src(md, cpu.eng, d.x.p), dst(md, cpu.eng, d.y.p);
  memory scale(pmd, cpu.eng, d.gamma.data()), shift(pmd, cpu.eng, d.beta.data());
  primitive prim;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  std::string impl;
  if constexpr (O == op::softmax) {
    auto pd = softmax_forward::primitive_desc(
        softmax_forward::desc(prop_kind::forward_inference, md, 1), cpu.eng);
    prim = softmax_forward(pd);
    impl = pd.impl_info_str();
  } else {
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    auto pd = layer_normalization_forward::primitive_desc(
        layer_normalization_forward::desc(prop_kind::forward_inference, md, eps, flags), cpu.eng);
    prim = layer_normalization_forward(pd);
    args.insert({DNNL_ARG_SCALE, scale});
    args.insert({DNNL_ARG_SHIFT, shift});
    impl = pd.impl_info_str();
  }
  for (auto _ : st) {
    prim.execute(cpu.strm, args);
    cpu.strm.wait();
  }
  st.SetLabel(impl + " " + std::to_string(st.range(0)) + "T");
  set_bytes(st, 8.0);
  verify(st, O, d.x.p, d.y.p);
}
#endif

template <class F>
void add(const std::string& name, F f) {
  for (int t : {1, 2})
    benchmark::RegisterBenchmark((name + "/" + std::to_string(t)).c_str(), f)
        ->Arg(t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  using kfuse::softmax_method;
  add("softmax_f32/kfuse",
      [](benchmark::State& s) { BM_kfuse<op::softmax, float>(s, softmax_method::automatic); });
  add("softmax_f32/kfuse_online",
      [](benchmark::State& s) { BM_kfuse<op::softmax, float>(s, softmax_method::online); });
#if KFUSE_BENCH_HAVE_DNNL
  add("softmax_f32/onednn", BM_onednn<op::softmax>);
#endif
  add("softmax_f32/loop", BM_loop<op::softmax>);
  add("softmax_f32/loop_nt", BM_loop_nt<op::softmax>);
  add("layer_norm_f32/kfuse",
      [](benchmark::State& s) { BM_kfuse<op::layer_norm, float>(s, softmax_method::automatic); });
#if KFUSE_BENCH_HAVE_DNNL
  add("layer_norm_f32/onednn", BM_onednn<op::layer_norm>);
#endif
  add("layer_norm_f32/loop", BM_loop<op::layer_norm>);
  add("layer_norm_f32/loop_nt", BM_loop_nt<op::layer_norm>);
  add("rms_norm_f32/kfuse",
      [](benchmark::State& s) { BM_kfuse<op::rms_norm, float>(s, softmax_method::automatic); });
  add("rms_norm_f32/loop", BM_loop<op::rms_norm>);
  add("softmax_bf16/kfuse", [](benchmark::State& s) {
    BM_kfuse<op::softmax, kfuse::bf16_t>(s, softmax_method::automatic);
  });
  add("layer_norm_bf16/kfuse", [](benchmark::State& s) {
    BM_kfuse<op::layer_norm, kfuse::bf16_t>(s, softmax_method::automatic);
  });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  data();  // allocate and touch outside any timing
  benchmark::AddCustomContext("kfuse.impl",
                              kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::xsimd>());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
