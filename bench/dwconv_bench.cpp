// Depthwise convolution benchmark. Two families:
// - dw3x3 (C = 256, 28x28, pad 1, stride 1; batch 1 and 8; bare and with bias + ReLU; 1 and 2
//   threads): kfuse NHWC and NCHW vs XNNPACK (NHWC, grouped weights, pthreadpool) vs oneDNN (NHWC
//   and `any` formats, depthwise = grouped conv with groups = C, bias + ReLU post-op), plus
//   pooling rows (kfuse max / average 3x3 s2 on the same tensor and max on ResNet-18's 64 x 112 x
//   112 stem output, vs oneDNN).
// - layers: the depthwise layers of MobileNetV3-small / -large and EfficientNet-B0 at 224x224
//   (channels, map, kernel, stride as torchvision builds them), batch 1, bias + ReLU, 1 and 2
//   threads: kfuse NHWC vs XNNPACK (target: kfuse >= 1.2x XNNPACK on every shape).
// GFLOP/s counter: 2 * N * OH * OW * C * R * S (padded taps counted).
// Every peer's output is compared with kfuse's once before timing; a mismatch is in the label.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "kfuse/epilogue.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"
#if __has_include("kfuse/kernels/pool2d.hpp")
#include "kfuse/kernels/pool2d.hpp"
#define KFUSE_BENCH_POOL 1
#endif

#include "bench_common.hpp"

namespace {

using kfuse::index_t;

constexpr index_t C = 256, H = 28, W = 28, R = 3;  // the dw3x3 family (and pooling)

/// One depthwise layer: channels, square map, square kernel (padding kernel / 2), stride.
struct dw_layer {
  const char* name;
  index_t c, h, k, stride;
};
/// Case 0 is the dw3x3 family's tensor; the rest are the real networks' layers (torchvision's
/// mobilenet_v3_small / _large and efficientnet_b0 at 224x224, duplicates left out).
constexpr dw_layer layers[] = {
    {"c256_28_k3s1", 256, 28, 3, 1},     {"v3s_c16_112_k3s2", 16, 112, 3, 2},
    {"v3s_c72_56_k3s2", 72, 56, 3, 2},   {"v3s_c88_28_k3s1", 88, 28, 3, 1},
    {"v3s_c96_28_k5s2", 96, 28, 5, 2},   {"v3s_c240_14_k5s1", 240, 14, 5, 1},
    {"v3s_c120_14_k5s1", 120, 14, 5, 1}, {"v3s_c144_14_k5s1", 144, 14, 5, 1},
    {"v3s_c288_14_k5s2", 288, 14, 5, 2}, {"v3s_c576_7_k5s1", 576, 7, 5, 1},
    {"v3l_c16_112_k3s1", 16, 112, 3, 1}, {"v3l_c64_112_k3s2", 64, 112, 3, 2},
    {"v3l_c72_56_k3s1", 72, 56, 3, 1},   {"v3l_c72_56_k5s2", 72, 56, 5, 2},
    {"v3l_c120_28_k5s1", 120, 28, 5, 1}, {"v3l_c240_28_k3s2", 240, 28, 3, 2},
    {"v3l_c200_14_k3s1", 200, 14, 3, 1}, {"v3l_c184_14_k3s1", 184, 14, 3, 1},
    {"v3l_c480_14_k3s1", 480, 14, 3, 1}, {"v3l_c672_14_k3s1", 672, 14, 3, 1},
    {"v3l_c672_14_k5s2", 672, 14, 5, 2}, {"v3l_c960_7_k5s1", 960, 7, 5, 1},
    {"b0_c32_112_k3s1", 32, 112, 3, 1},  {"b0_c96_112_k3s2", 96, 112, 3, 2},
    {"b0_c144_56_k3s1", 144, 56, 3, 1},  {"b0_c144_56_k5s2", 144, 56, 5, 2},
    {"b0_c240_28_k5s1", 240, 28, 5, 1},  {"b0_c240_28_k3s2", 240, 28, 3, 2},
    {"b0_c480_14_k3s1", 480, 14, 3, 1},  {"b0_c480_14_k5s1", 480, 14, 5, 1},
    {"b0_c672_14_k5s1", 672, 14, 5, 1},  {"b0_c672_14_k5s2", 672, 14, 5, 2},
    {"b0_c1152_7_k5s1", 1152, 7, 5, 1},  {"b0_c1152_7_k3s1", 1152, 7, 3, 1},
};

kfuse::conv_shape bench_shape(index_t n, const dw_layer& l = layers[0]) {
  kfuse::conv_shape s;
  s.n = n;
  s.c = s.k = s.groups = l.c;
  s.h = s.w = l.h;
  s.r = s.s = l.k;
  s.stride_h = s.stride_w = l.stride;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = l.k / 2;
  return s;
}

/// 64-byte aligned storage for every tensor of every library (as a framework's allocator gives):
/// std::vector's large blocks start 16 bytes into a page, which splits every 64-byte load.
template <class T>
struct aligned64 {
  using value_type = T;
  aligned64() = default;
  template <class U>
  aligned64(const aligned64<U>&) {}
  T* allocate(std::size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const aligned64<U>&) const {
    return true;
  }
};
using fvec = std::vector<float, aligned64<float>>;

fvec random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  fvec v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["GFLOPs"] = benchmark::Counter(flops_per_iter * 1e-9 * double(st.iterations()),
                                             benchmark::Counter::kIsRate);
}

/// The data of one benchmark case: NHWC input, OIHW weights, bias, and kfuse's NHWC result (the
/// reference the peers are compared with).
struct problem {
  kfuse::conv_shape s;
  fvec x, w, bias, expect;
  problem(index_t n, bool fused, const dw_layer& l = layers[0]) : s(bench_shape(n, l)) {
    x = random_vector(std::size_t(kfuse::numel(s.in_dims())), 1);
    w = random_vector(std::size_t(s.weight_count()), 2);
    bias = random_vector(std::size_t(s.c), 3);
    expect.resize(std::size_t(kfuse::numel(s.out_dims())));
    using DW = kfuse::depthwise_conv2d<kfuse::f32, kfuse::nhwc, kfuse::arch::native,
                                       kfuse::epilogue<kfuse::bias, kfuse::relu>>;
    using DW0 = kfuse::depthwise_conv2d<kfuse::f32, kfuse::nhwc>;
    const auto in = kfuse::view<kfuse::nhwc>(x.data(), s.in_dims());
    const auto out = kfuse::view<kfuse::nhwc>(expect.data(), s.out_dims());
    if (fused)
      DW::run(in, DW::pack(w.data(), s), out, {{bias}, {}});
    else
      DW0::run(in, DW0::pack(w.data(), s), out);
  }
  /// "" when y (NHWC) matches kfuse, else "MISMATCH <max abs diff>".
  std::string compare(const fvec& y) const {
    double d = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      d = std::max(d, std::fabs(double(y[i]) - double(expect[i])));
    return d <= 1e-4 ? std::string() : " MISMATCH " + std::to_string(d);
  }
};

template <class L, bool Fused>
void BM_kfuse(benchmark::State& st) {
  const index_t n = st.range(0);
  const int threads = int(st.range(1));
  const dw_layer& l = layers[st.range(2)];
  const problem p(n, Fused, l);
  const index_t C = l.c, H = l.h, W = l.h;
  using Ep =
      std::conditional_t<Fused, kfuse::epilogue<kfuse::bias, kfuse::relu>, kfuse::epilogue<>>;
  using DW = kfuse::depthwise_conv2d<kfuse::f32, L, kfuse::arch::native, Ep>;
  const auto packed = DW::pack(p.w.data(), p.s);
  fvec x(p.x.size()), y(p.expect.size());
  if constexpr (std::is_same_v<L, kfuse::nchw>) {  // the same tensor in NCHW
    for (index_t b = 0; b < n; ++b)
      for (index_t c = 0; c < C; ++c)
        for (index_t i = 0; i < H * W; ++i)
          x[std::size_t((b * C + c) * H * W + i)] = p.x[std::size_t((b * H * W + i) * C + c)];
  } else {
    x = p.x;
  }
  Ep ep{};
  if constexpr (Fused) ep = Ep{{p.bias}, {}};
  const auto in = kfuse::view<L>(static_cast<const float*>(x.data()), p.s.in_dims());
  const auto out = kfuse::view<L>(y.data(), p.s.out_dims());
  kfuse::run_info info{};
  // The contract's form: scratch sized once (kernels/workspace.hpp), as the plan does.
  const kfuse::workspace_buffer ws(DW::workspace_size(p.s, threads));
  for (auto _ : st) {
    info = DW::run(in, packed, out, ep, ws, {threads});
    benchmark::ClobberMemory();
  }
  fvec y_nhwc(y.size());
  if constexpr (std::is_same_v<L, kfuse::nchw>) {
    for (index_t b = 0; b < n; ++b)
      for (index_t c = 0; c < C; ++c)
        for (index_t i = 0; i < H * W; ++i)
          y_nhwc[std::size_t((b * H * W + i) * C + c)] = y[std::size_t((b * C + c) * H * W + i)];
  } else {
    y_nhwc = y;
  }
  st.SetLabel(std::string(info.micro_kernel) + " " + info.impl + p.compare(y_nhwc));
  set_flops(st, p.s.flops());
}

#if KFUSE_BENCH_HAVE_XNNPACK
template <bool Fused>
void BM_xnnpack(benchmark::State& st) {
  const index_t n = st.range(0);
  const int threads = int(st.range(1));
  const dw_layer& l = layers[st.range(2)];
  const problem p(n, Fused, l);
  const auto C = uint32_t(l.c), H = uint32_t(l.h), W = uint32_t(l.h), R = uint32_t(l.k),
             P = uint32_t(l.k / 2), S = uint32_t(l.stride);
  if (!kfuse_bench::xnn_ready(st)) return;
  pthreadpool_t pool = threads > 1 ? pthreadpool_create(std::size_t(threads)) : nullptr;
  // Grouped layout: [groups][group_output_channels][R][S][group_input_channels] = [C][R][S] =
  // OIHW with one input channel per group.
  xnn_operator_t op = nullptr;
  const float lo = Fused ? 0.f : -INFINITY;
  if (xnn_create_convolution2d_nhwc_f32(P, P, P, P, R, R, S, S, 1, 1, C, 1, 1, C, C, p.w.data(),
                                        Fused ? p.bias.data() : nullptr, lo, INFINITY, 0,
                                        &op) != xnn_status_success) {
    st.SkipWithError("xnn_create_convolution2d_nhwc_f32 failed");
    return;
  }
  fvec y(p.expect.size());
  xnn_setup_convolution2d_nhwc_f32(op, std::size_t(n), H, W, p.x.data(), y.data(), pool);
  xnn_run_operator(op, pool);
  const std::string check = p.compare(y);
  for (auto _ : st) xnn_run_operator(op, pool);
  xnn_delete_operator(op);
  if (pool) pthreadpool_destroy(pool);
  st.SetLabel("xnnpack" + check);
  set_flops(st, p.s.flops());
}
#endif

#if KFUSE_BENCH_HAVE_DNNL
/// oneDNN grouped convolution (groups = C). Any: src/dst/weights in the primitive's preferred
/// formats (the input is reordered once, outside the timed loop).
template <bool Fused, bool Any>
void BM_onednn(benchmark::State& st) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const index_t n = st.range(0);
  kfuse_bench::dnnl_cpu cpu(int(st.range(1)));
  const problem p(n, Fused);
  const memory::dims src_dims{n, C, H, W}, dst_dims{n, C, H, W}, w_dims{C, 1, 1, R, R};
  const tag act = Any ? tag::any : tag::nhwc;
  memory::desc src_md(src_dims, dt::f32, act), dst_md(dst_dims, dt::f32, act),
      w_md(w_dims, dt::f32, tag::any), b_md({C}, dt::f32, tag::a);
  primitive_attr attr;
  if (Fused) {
    post_ops po;
    po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  const auto d =
      Fused ? convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                        src_md, w_md, b_md, dst_md, {1, 1}, {1, 1}, {1, 1})
            : convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                        src_md, w_md, dst_md, {1, 1}, {1, 1}, {1, 1});
  convolution_forward::primitive_desc pd(d, attr, cpu.eng);
  fvec wv = p.w, bv = p.bias, yv(p.expect.size());
  memory w_user({w_dims, dt::f32, tag::goihw}, cpu.eng, wv.data()),
      w_mem(pd.weights_desc(), cpu.eng);
  reorder(w_user, w_mem).execute(cpu.strm, w_user, w_mem);
  fvec xv = p.x;
  memory x_user({src_dims, dt::f32, tag::nhwc}, cpu.eng, xv.data()), x_mem(pd.src_desc(), cpu.eng);
  reorder(x_user, x_mem).execute(cpu.strm, x_user, x_mem);
  memory y_mem(pd.dst_desc(), cpu.eng), y_user({dst_dims, dt::f32, tag::nhwc}, cpu.eng, yv.data());
  memory b_mem(b_md, cpu.eng, bv.data());
  convolution_forward conv(pd);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, y_mem}};
  if (Fused) args.insert({DNNL_ARG_BIAS, b_mem});
  conv.execute(cpu.strm, args);
  reorder(y_mem, y_user).execute(cpu.strm, y_mem, y_user);
  cpu.strm.wait();
  const std::string check = p.compare(yv);
  for (auto _ : st) {
    conv.execute(cpu.strm, args);
    cpu.strm.wait();
  }
  st.SetLabel(std::string(pd.impl_info_str()) + check);
  set_flops(st, p.s.flops());
}
#endif

// ------------------------------------------------------------------------------------ pooling
#if KFUSE_BENCH_POOL
/// The pooled tensors (C, H = W), range(2) of a pooling row: the benchmark tensor and ResNet-18's
/// max pool after its stem (batch 1 only: registered as a layer).
constexpr struct { index_t c, hw; } pool_tensors[] = {{C, H}, {64, 112}};

/// kfuse max / average pooling 3x3 stride 2 pad 1 on pool_tensors[range(2)]; GB/s counter (one
/// read of the input, one write of the output).
template <class L, kfuse::pool_kind Kind>
void BM_kfuse_pool(benchmark::State& st) {
  const index_t n = st.range(0);
  const int threads = int(st.range(1));
  const auto t = pool_tensors[st.range(2)];
  kfuse::pool_shape ps;
  ps.n = n;
  ps.c = t.c;
  ps.h = ps.w = t.hw;
  ps.kind = Kind;
  ps.r = ps.s = 3;
  ps.stride_h = ps.stride_w = 2;
  ps.pad_top = ps.pad_left = ps.pad_bottom = ps.pad_right = 1;
  const auto x = random_vector(std::size_t(kfuse::numel(ps.in_dims())), 4);
  fvec y(std::size_t(kfuse::numel(ps.out_dims())));
  using P = kfuse::pool2d<kfuse::f32, L>;
  kfuse::run_info info{};
  const auto packed = P::initialize(ps);
  const kfuse::workspace_buffer ws(P::workspace_size(ps, threads));
  for (auto _ : st) {
    info = P::run(kfuse::view<L>(x.data(), ps.in_dims()), packed,
                  kfuse::view<L>(y.data(), ps.out_dims()), {}, ws, {threads});
    benchmark::ClobberMemory();
  }
  st.SetLabel(std::string(info.micro_kernel) + " " + info.impl);
  st.counters["GBs"] = benchmark::Counter(
      double(x.size() + y.size()) * 4e-9 * double(st.iterations()), benchmark::Counter::kIsRate);
}

#if KFUSE_BENCH_HAVE_DNNL
template <bool Max>
void BM_onednn_pool(benchmark::State& st) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const index_t n = st.range(0);
  kfuse_bench::dnnl_cpu cpu(int(st.range(1)));
  const auto t = pool_tensors[st.range(2)];
  const index_t c = t.c, h = t.hw, oh = (h + 2 - 3) / 2 + 1;
  memory::desc src_md({n, c, h, h}, dt::f32, tag::nhwc), dst_md({n, c, oh, oh}, dt::f32, tag::nhwc);
  pooling_forward::desc d(prop_kind::forward_inference,
                          Max ? algorithm::pooling_max : algorithm::pooling_avg_include_padding,
                          src_md, dst_md, {2, 2}, {3, 3}, {1, 1}, {1, 1});
  pooling_forward::primitive_desc pd(d, cpu.eng);
  auto x = random_vector(std::size_t(n * c * h * h), 4);
  fvec y(std::size_t(n * c * oh * oh));
  memory xm(src_md, cpu.eng, x.data()), ym(dst_md, cpu.eng, y.data());
  pooling_forward pool(pd);
  for (auto _ : st) {
    pool.execute(cpu.strm, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}});
    cpu.strm.wait();
  }
  st.SetLabel(pd.impl_info_str());
  st.counters["GBs"] = benchmark::Counter(
      double(x.size() + y.size()) * 4e-9 * double(st.iterations()), benchmark::Counter::kIsRate);
}
#endif
#endif  // KFUSE_BENCH_POOL

/// Registers f for batch 1 and 8 (or only 1 with `layer` > 0: a real network's layer), 1 and 2
/// threads; range(2) is the index into `layers`.
void reg(const std::string& name, void (*f)(benchmark::State&), index_t layer = 0) {
  for (int t : {1, 2})
    for (index_t n : {1, 8})
      if (layer == 0 || n == 1)
        benchmark::RegisterBenchmark(name.c_str(), f)
            ->Args({n, t, layer})
            ->ArgNames({"N", "T", "L"})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond)
            // On a shared, loaded machine the best repetition is the stable figure: report the
            // min time / max rate of the repetitions next to the median.
            ->ComputeStatistics(
                "min",
                [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
            ->ComputeStatistics("max", [](const std::vector<double>& v) {
              return *std::max_element(v.begin(), v.end());
            });
}

int register_all() {
  for (index_t i = 1; i < index_t(std::size(layers)); ++i) {
    reg(std::string("layers/") + layers[i].name + "/kfuse_nhwc", BM_kfuse<kfuse::nhwc, true>, i);
#if KFUSE_BENCH_HAVE_XNNPACK
    reg(std::string("layers/") + layers[i].name + "/xnnpack_nhwc", BM_xnnpack<true>, i);
#endif
  }
  reg("dw3x3/kfuse_nhwc/bare", BM_kfuse<kfuse::nhwc, false>);
  reg("dw3x3/kfuse_nhwc/bias_relu", BM_kfuse<kfuse::nhwc, true>);
  reg("dw3x3/kfuse_nchw/bare", BM_kfuse<kfuse::nchw, false>);
  reg("dw3x3/kfuse_nchw/bias_relu", BM_kfuse<kfuse::nchw, true>);
#if KFUSE_BENCH_HAVE_XNNPACK
  reg("dw3x3/xnnpack_nhwc/bare", BM_xnnpack<false>);
  reg("dw3x3/xnnpack_nhwc/bias_relu", BM_xnnpack<true>);
#endif
#if KFUSE_BENCH_HAVE_DNNL
  reg("dw3x3/onednn_nhwc/bare", BM_onednn<false, false>);
  reg("dw3x3/onednn_nhwc/bias_relu", BM_onednn<true, false>);
  reg("dw3x3/onednn_any/bare", BM_onednn<false, true>);
  reg("dw3x3/onednn_any/bias_relu", BM_onednn<true, true>);
#endif
#if KFUSE_BENCH_POOL
  reg("pool3x3s2/kfuse_nhwc/max", BM_kfuse_pool<kfuse::nhwc, kfuse::pool_kind::max>);
  reg("pool3x3s2/kfuse_nchw/max", BM_kfuse_pool<kfuse::nchw, kfuse::pool_kind::max>);
  reg("pool3x3s2/kfuse_nhwc/avg", BM_kfuse_pool<kfuse::nhwc, kfuse::pool_kind::avg>);
  reg("pool3x3s2/kfuse_nchw/avg", BM_kfuse_pool<kfuse::nchw, kfuse::pool_kind::avg>);
#if KFUSE_BENCH_HAVE_DNNL
  reg("pool3x3s2/onednn_nhwc/max", BM_onednn_pool<true>);
  reg("pool3x3s2/onednn_nhwc/avg", BM_onednn_pool<false>);
#endif
  reg("pool3x3s2_resnet18/kfuse_nhwc/max", BM_kfuse_pool<kfuse::nhwc, kfuse::pool_kind::max>, 1);
  reg("pool3x3s2_resnet18/kfuse_nchw/max", BM_kfuse_pool<kfuse::nchw, kfuse::pool_kind::max>, 1);
#if KFUSE_BENCH_HAVE_DNNL
  reg("pool3x3s2_resnet18/onednn_nhwc/max", BM_onednn_pool<true>, 1);
#endif
#endif
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
