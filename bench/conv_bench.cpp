// Convolution benchmark: kfuse conv2d in NHWC and NCHW vs oneDNN (its best layout:
// `any` = blocked, and NHWC; prepacked weights; bias + ReLU as its post-ops) vs XNNPACK (NHWC,
// pthreadpool), on the ResNet-50 layers at batch 1 and 8, bare and with bias + ReLU, 1 and 2
// threads, plus the FMA peak measured in the same run. Run through scripts/bench_conv.sh, which
// prints the table with ratios. FLOP convention: padded taps counted.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "kfuse/kernels/conv/few_channel_conv2d.hpp"
#include "kfuse/kfuse.hpp"

namespace {

using kfuse::conv_shape;
using kfuse::index_t;

// ResNet-50 layers: (C, H=W, K, R=S, pad), stride 1.
struct layer {
  index_t c, hw, k, rs, pad;
};
const layer layers[] = {
    {64, 56, 64, 3, 1}, {256, 56, 64, 1, 0}, {128, 28, 128, 3, 1}, {512, 7, 512, 3, 1}};

conv_shape shape_of(index_t li, index_t batch) {
  const layer& l = layers[li];
  conv_shape s;
  s.n = batch, s.c = l.c, s.h = s.w = l.hw, s.k = l.k, s.r = s.s = l.rs;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = l.pad;
  return s;
}

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// ------------------------------------------------------------------------------ peak probe
// 24 independent FMA chains per thread (2 pipes x 4 cycles of latency covered).
void BM_peak_fp32(benchmark::State& st) {
  const int threads = int(st.range(0));
  constexpr int iters = 1 << 16;
  const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  for (auto _ : st) {
    kfuse::parallel_for(
        0, threads, 1,
        [&](kfuse::range, int) {
          __m512 acc[24];
          for (auto& a : acc) a = _mm512_set1_ps(0.f);
          for (int i = 0; i < iters; ++i) {
#pragma GCC unroll 24
            for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
          }
          float sink = 0;
          for (auto& a : acc) sink += _mm512_reduce_add_ps(a);
          benchmark::DoNotOptimize(sink);
        },
        threads);
  }
  kfuse_bench::set_flops(st, 24.0 * 32.0 * iters * threads);
}

// ------------------------------------------------------------------------------------ kfuse
template <class L, bool Fused, kfuse::conv_algorithm Algo = kfuse::conv_algorithm::automatic>
void BM_kfuse(benchmark::State& st) {
  const conv_shape s = shape_of(st.range(0), st.range(1));
  const int threads = int(st.range(2));
  using Ep =
      std::conditional_t<Fused, kfuse::epilogue<kfuse::bias, kfuse::relu>, kfuse::epilogue<>>;
  using C = kfuse::conv2d<kfuse::f32, L, kfuse::arch::native, Ep>;
  const auto w_oihw = random_vector(std::size_t(s.weight_count()), 2);
  const auto x = random_vector(std::size_t(kfuse::numel(s.in_dims())), 1);
  const auto bias = random_vector(std::size_t(s.k), 3);
  std::vector<float> y(std::size_t(kfuse::numel(s.out_dims())));
  const auto w = C::pack(w_oihw.data(), s, -1, Algo);
  Ep ep{};
  if constexpr (Fused) ep = Ep{{{bias.data(), bias.size()}}, {}};
  const auto xv = kfuse::view<L>(static_cast<const float*>(x.data()), s.in_dims());
  const auto yv = kfuse::view<L>(y.data(), s.out_dims());
  kfuse::run_info info;
  // The contract's form: scratch sized once (kernels/workspace.hpp), as the plan does.
  const kfuse::workspace_buffer ws(C::workspace_size(s, threads));
  for (auto _ : st) info = C::run(xv, w, yv, ep, ws, {threads});
  st.SetLabel(std::string(info.micro_kernel));
  kfuse_bench::set_flops(st, s.flops());
  st.counters["pack_ms"] = w.pack_seconds() * 1e3;
}

// ------------------------------------------------------------------------------------ stems
// RGB stems at 224x224, stride 2: MobileNetV3 (3x3 -> 16), EfficientNet-B0 (3x3 -> 32), ResNet
// (7x7 -> 64); kfuse few_channel_conv2d (NCHW in, NHWC out: the network's entry conversion
// included) vs conv2d NHWC (its input already NHWC, the conversion not counted).
const layer stems[] = {{3, 224, 16, 3, 1}, {3, 224, 32, 3, 1}, {3, 224, 64, 7, 3}};

template <bool Few, class Act = kfuse::relu>
void BM_stem(benchmark::State& st) {
  const layer& l = stems[st.range(0)];
  conv_shape s;
  s.n = st.range(1), s.c = l.c, s.h = s.w = l.hw, s.k = l.k, s.r = s.s = l.rs;
  s.stride_h = s.stride_w = 2;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = l.pad;
  const int threads = int(st.range(2));
  using Ep = kfuse::epilogue<kfuse::bias, Act>;
  const auto w_oihw = random_vector(std::size_t(s.weight_count()), 2);
  const auto x = random_vector(std::size_t(kfuse::numel(s.in_dims())), 1);
  const auto bias = random_vector(std::size_t(s.k), 3);
  std::vector<float> y(std::size_t(kfuse::numel(s.out_dims())));
  const Ep ep{{{bias.data(), bias.size()}}, {}};
  kfuse::run_info info;
  if constexpr (Few) {
    using C = kfuse::few_channel_conv2d<kfuse::arch::native, Ep>;
    const auto w = C::pack(w_oihw.data(), s);
    const kfuse::workspace_buffer ws(C::workspace_size(s, threads));
    for (auto _ : st)
      info = C::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(x.data()), s.in_dims()), w,
                    kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), ep, ws.view(), {threads});
  } else {
    using C = kfuse::conv2d<kfuse::f32, kfuse::nhwc, kfuse::arch::native, Ep>;
    const auto w = C::pack(w_oihw.data(), s);
    const kfuse::workspace_buffer ws(C::workspace_size(s, threads));
    for (auto _ : st)
      info = C::run(kfuse::view<kfuse::nhwc>(static_cast<const float*>(x.data()), s.in_dims()), w,
                    kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), ep, ws.view(), {threads});
  }
  st.SetLabel(std::string(info.micro_kernel));
  kfuse_bench::set_flops(st, s.flops());
}

// ------------------------------------------------------------------------------------ oneDNN
#if KFUSE_BENCH_HAVE_DNNL
// Nhwc: activations in NHWC; otherwise `any` (oneDNN picks its blocked layout; the input is
// reordered into it once, outside the timed loop, as a network would keep it).
template <bool Nhwc, bool Fused>
void BM_onednn(benchmark::State& st) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const conv_shape s = shape_of(st.range(0), st.range(1));
  kfuse_bench::dnnl_cpu cpu(int(st.range(2)));
  const memory::dims src_dims{s.n, s.c, s.h, s.w}, wei_dims{s.k, s.c, s.r, s.s}, bias_dims{s.k},
      dst_dims{s.n, s.k, s.out_h(), s.out_w()}, strides{s.stride_h, s.stride_w},
      pad_l{s.pad_top, s.pad_left}, pad_r{s.pad_bottom, s.pad_right};
  const tag act = Nhwc ? tag::nhwc : tag::any;
  memory::desc src_md(src_dims, dt::f32, act), wei_md(wei_dims, dt::f32, tag::any),
      bias_md(bias_dims, dt::f32, tag::a), dst_md(dst_dims, dt::f32, act);
  primitive_attr attr;
  if (Fused) {
    post_ops po;
    po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  auto d =
      Fused ? convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                        src_md, wei_md, bias_md, dst_md, strides, pad_l, pad_r)
            : convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                        src_md, wei_md, dst_md, strides, pad_l, pad_r);
  convolution_forward::primitive_desc pd(d, attr, cpu.eng);
  auto wv = random_vector(std::size_t(s.weight_count()), 2);
  auto xv = random_vector(std::size_t(kfuse::numel(s.in_dims())), 1);
  auto bv = random_vector(std::size_t(s.k), 3);
  memory w_user({wei_dims, dt::f32, tag::oihw}, cpu.eng, wv.data()),
      w_mem(pd.weights_desc(), cpu.eng);
  reorder(w_user, w_mem).execute(cpu.strm, w_user, w_mem);
  memory x_user({src_dims, dt::f32, Nhwc ? tag::nhwc : tag::nchw}, cpu.eng, xv.data()),
      x_mem(pd.src_desc(), cpu.eng);
  reorder(x_user, x_mem).execute(cpu.strm, x_user, x_mem);
  memory b_mem(bias_md, cpu.eng, bv.data()), y_mem(pd.dst_desc(), cpu.eng);
  cpu.strm.wait();
  convolution_forward conv(pd);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, y_mem}};
  if (Fused) args.insert({DNNL_ARG_BIAS, b_mem});
  for (auto _ : st) {
    conv.execute(cpu.strm, args);
    cpu.strm.wait();
  }
  st.SetLabel(pd.impl_info_str());
  kfuse_bench::set_flops(st, s.flops());
}
#endif

// ----------------------------------------------------------------------------------- XNNPACK
#if KFUSE_BENCH_HAVE_XNNPACK
template <bool Fused>
void BM_xnnpack(benchmark::State& st) {
  const conv_shape s = shape_of(st.range(0), st.range(1));
  const int threads = int(st.range(2));
  if (!kfuse_bench::xnn_ready(st)) return;
  // XNNPACK takes OHWI weights [K, R, S, C/groups].
  const auto w_oihw = random_vector(std::size_t(s.weight_count()), 2);
  std::vector<float> w_ohwi(w_oihw.size());
  const index_t cg = s.c / s.groups;
  for (index_t k = 0; k < s.k; ++k)
    for (index_t c = 0; c < cg; ++c)
      for (index_t r = 0; r < s.r; ++r)
        for (index_t q = 0; q < s.s; ++q)
          w_ohwi[std::size_t(((k * s.r + r) * s.s + q) * cg + c)] =
              w_oihw[std::size_t(((k * cg + c) * s.r + r) * s.s + q)];
  const auto bias = random_vector(std::size_t(s.k), 3);
  const auto x = random_vector(std::size_t(kfuse::numel(s.in_dims())), 1);
  std::vector<float> y(std::size_t(kfuse::numel(s.out_dims())));
  const float inf = std::numeric_limits<float>::infinity();
  xnn_operator_t op = nullptr;
  if (xnn_create_convolution2d_nhwc_f32(
          uint32_t(s.pad_top), uint32_t(s.pad_right), uint32_t(s.pad_bottom), uint32_t(s.pad_left),
          uint32_t(s.r), uint32_t(s.s), uint32_t(s.stride_h), uint32_t(s.stride_w),
          uint32_t(s.dilation_h), uint32_t(s.dilation_w), uint32_t(s.groups), std::size_t(cg),
          std::size_t(s.k / s.groups), std::size_t(s.c), std::size_t(s.k), w_ohwi.data(),
          Fused ? bias.data() : nullptr, Fused ? 0.f : -inf, inf, 0, &op) != xnn_status_success) {
    st.SkipWithError("xnn_create_convolution2d_nhwc_f32 failed");
    return;
  }
  pthreadpool_t pool = pthreadpool_create(std::size_t(threads));
  xnn_setup_convolution2d_nhwc_f32(op, std::size_t(s.n), std::size_t(s.h), std::size_t(s.w),
                                   x.data(), y.data(), pool);
  for (auto _ : st) xnn_run_operator(op, pool);
  xnn_delete_operator(op);
  pthreadpool_destroy(pool);
  st.SetLabel("xnnpack nhwc");
  kfuse_bench::set_flops(st, s.flops());
}
#endif

template <class F>
void add_layers(const std::string& name, F f) {
  for (int t : {1, 2})
    for (index_t batch : {1, 8})
      for (index_t li = 0; li < index_t(std::size(layers)); ++li)
        benchmark::RegisterBenchmark(name.c_str(), f)
            ->Args({li, batch, t})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  for (int t : {1, 2})
    benchmark::RegisterBenchmark("peak/fp32", BM_peak_fp32)->Arg(t)->UseRealTime();
  add_layers("bare/kfuse_nhwc", BM_kfuse<kfuse::nhwc, false>);
  add_layers("bare/kfuse_nhwc_direct", BM_kfuse<kfuse::nhwc, false, kfuse::conv_algorithm::direct>);
  add_layers("bare/kfuse_nchw", BM_kfuse<kfuse::nchw, false>);
  add_layers("bias_relu/kfuse_nhwc", BM_kfuse<kfuse::nhwc, true>);
  add_layers("bias_relu/kfuse_nhwc_direct",
             BM_kfuse<kfuse::nhwc, true, kfuse::conv_algorithm::direct>);
  add_layers("bias_relu/kfuse_nchw", BM_kfuse<kfuse::nchw, true>);
  for (int t : {1, 2})
    for (index_t batch : {1, 8})
      for (index_t li = 0; li < index_t(std::size(stems)); ++li) {
        benchmark::RegisterBenchmark("stem/kfuse_few_channel", BM_stem<true>)
            ->Args({li, batch, t})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        // EfficientNet's stem ends in SiLU: the epilogue's cost on a 16- or 32-channel tile.
        benchmark::RegisterBenchmark("stem/kfuse_few_channel_silu", BM_stem<true, kfuse::silu>)
            ->Args({li, batch, t})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark("stem/kfuse_nhwc", BM_stem<false>)
            ->Args({li, batch, t})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
#if KFUSE_BENCH_HAVE_DNNL
  add_layers("bare/onednn_any", BM_onednn<false, false>);
  add_layers("bare/onednn_nhwc", BM_onednn<true, false>);
  add_layers("bias_relu/onednn_any", BM_onednn<false, true>);
  add_layers("bias_relu/onednn_nhwc", BM_onednn<true, true>);
#endif
#if KFUSE_BENCH_HAVE_XNNPACK
  add_layers("bare/xnnpack", BM_xnnpack<false>);
  add_layers("bias_relu/xnnpack", BM_xnnpack<true>);
#endif
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
