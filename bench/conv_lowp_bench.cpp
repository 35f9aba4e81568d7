// Low-precision convolutions against f32 on the same layer: kfuse conv2d NHWC
// with bias + ReLU in f32 (f32 in and out), bf16 (bf16 in and out, vdpbf16ps where the CPU has
// it) and int8 (u8 in with a zero point, requantized u8 out, vpdpbusd where the CPU has it), on
// compute-bound dense layers (3x3 and 1x1, ResNet / MobileNet shapes) and a depthwise 3x3, batch 1
// and 8, 1 and 2 threads. The machine's probed per-core peaks of the three kinds are printed with
// the results (kfuse::probe_machine_limits). scripts/bench_conv_lowp.sh prints the table of
// bf16 / f32 and int8 / f32 throughput against the targets (>= 1.7x, >= 3x).
// FLOP convention: padded taps counted; an int8 multiply-add is 2 ops.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "kfuse/kfuse.hpp"
#include "kfuse/tools/machine_limits.hpp"

namespace {

using kfuse::conv_shape;
using kfuse::index_t;

// (C, H=W, K, R=S, pad, groups), stride 1.
struct layer {
  index_t c, hw, k, rs, pad, groups;
};
const layer layers[] = {
    {64, 56, 64, 3, 1, 1},     // ResNet-18/50 stage 1: the 3x3 64->64
    {128, 28, 128, 3, 1, 1},   // ResNet stage 2
    {256, 14, 256, 3, 1, 1},   // ResNet stage 3
    {512, 7, 512, 3, 1, 1},    // ResNet stage 4 (7-wide rows: tiles span output rows)
    {256, 56, 64, 1, 0, 1},    // ResNet-50 1x1 reduce
    {96, 28, 576, 1, 0, 1},    // MobileNetV3-large 1x1 expand
    {16, 112, 64, 1, 0, 1},    // MobileNetV3-large's first expand: few channels, big map
    {144, 56, 144, 3, 1, 144}  // depthwise 3x3 (memory-bound: shown, not a target row)
};

conv_shape shape_of(index_t li, index_t batch) {
  const layer& l = layers[li];
  conv_shape s;
  s.n = batch, s.c = l.c, s.h = s.w = l.hw, s.k = l.k, s.r = s.s = l.rs, s.groups = l.groups;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = l.pad;
  return s;
}

template <class T>
std::vector<T> random_vector(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  const float scale = std::is_integral_v<T> ? 100.f : 1.f;  // int8 data spans its range
  std::vector<T> v(n);
  for (auto& x : v) x = kfuse::from_float<T>(scale * u(rng));
  return v;
}

using Ep = kfuse::epilogue<kfuse::bias, kfuse::relu>;
using EpQ = kfuse::epilogue<kfuse::bias, kfuse::relu, kfuse::requantize<kfuse::u8>>;

// Runs one conv2d recipe: X / Y the activation element types, W the OIHW weights' type.
template <class Recipe, class E, class X, class Y, class W>
void run_conv(benchmark::State& st, const E& ep, std::int32_t x_zero_point = 0) {
  using C = kfuse::conv2d<Recipe, kfuse::nhwc, kfuse::arch::native, E>;
  const conv_shape s = shape_of(st.range(0), st.range(1));
  const int threads = int(st.range(2));
  auto w = random_vector<W>(std::size_t(s.weight_count()), 2, -1.f, 1.f);
  if constexpr (std::is_integral_v<W>)  // 7-bit on archs without vpdpbusd (their kernel's limit)
    for (auto& v : w) v = W(std::clamp<int>(v, -C::int8_weight_limit, C::int8_weight_limit));
  const auto x = random_vector<X>(std::size_t(kfuse::numel(s.in_dims())), 1, 0.f, 1.f);
  std::vector<Y> y(std::size_t(kfuse::numel(s.out_dims())));
  const auto pw = C::pack(w.data(), s);
  const auto xv = kfuse::view<kfuse::nhwc>(static_cast<const X*>(x.data()), s.in_dims());
  const auto yv = kfuse::view<kfuse::nhwc>(y.data(), s.out_dims());
  const kfuse::workspace_buffer ws(C::workspace_size(s, threads));
  kfuse::run_info info;
  for (auto _ : st) info = C::run(xv, pw, yv, ep, ws, {threads}, x_zero_point);
  st.SetLabel(std::string(info.micro_kernel));
  kfuse_bench::set_flops(st, s.flops());
}

std::vector<float> bias_of(index_t k) { return random_vector<float>(std::size_t(k), 3, -1, 1); }

void BM_f32(benchmark::State& st) {
  const auto b = bias_of(shape_of(st.range(0), 1).k);
  run_conv<kfuse::f32, Ep, float, float, float>(st, Ep{{{b.data(), b.size()}}, {}});
}

void BM_bf16(benchmark::State& st) {
  const auto b = bias_of(shape_of(st.range(0), 1).k);
  run_conv<kfuse::bf16, Ep, kfuse::bf16_t, kfuse::bf16_t, float>(st,
                                                                 Ep{{{b.data(), b.size()}}, {}});
}

#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
void BM_int8(benchmark::State& st) {
  const index_t k = shape_of(st.range(0), 1).k;
  const auto b = bias_of(k);
  const std::vector<float> mult(std::size_t(k), 1e-4f);
  const EpQ ep{{{b.data(), b.size()}}, {}, {0.f, 3, mult}};
  run_conv<kfuse::i8, EpQ, std::uint8_t, std::uint8_t, std::int8_t>(st, ep, 128);
}
#endif

void register_recipe(const char* name, void (*f)(benchmark::State&)) {
  for (int t : {1, 2})
    for (index_t batch : {1, 8})
      for (index_t li = 0; li < index_t(std::size(layers)); ++li)
        benchmark::RegisterBenchmark(name, f)
            ->Args({li, batch, t})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  const kfuse::machine_limits lim = kfuse::probe_machine_limits();
  benchmark::AddCustomContext("limits", kfuse_bench::limits_text(lim));
  register_recipe("f32", BM_f32);
  register_recipe("bf16", BM_bf16);
#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
  register_recipe("int8", BM_int8);
#endif
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
