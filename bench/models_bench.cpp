// Models benchmark: the demo's MLP (784-1024-1024-10, ReLU, softmax) at batch 1 and 64 and its
// ResNet basic block (64 channels, 56x56, NHWC) at batch 1 and 8, at 1 and 2 threads:
//
//   kfuse/replay     compile() once, record() once, replay() per iteration (fused plan)
//   kfuse/eager      the unfused plan run op by op through plan::run(): one kernel per graph
//                    node, intermediates allocated per call (what an eager framework does)
//   torch/frozen     libtorch 1.13: the same model as a TorchScript module (Module::define),
//                    eval(), torch::jit::freeze (folds BN into the convs), InferenceMode,
//                    channels-last images
//   dnnl/chained     oneDNN 2.6 primitives chained by hand with preallocated buffers: matmul /
//                    convolution with prepacked (format any) weights, bias and post-ops (ReLU,
//                    binary add for the residual), BN folded into the conv weights, softmax and
//                    pooling primitives
//
// plus the MLP at batch 1 in bf16 and int8 (kfuse plans; int8 calibrated on N(0,1) samples).
// Every implementation's output is checked against a double-precision forward pass first.
// Counters: GFLOP/s. ONNX Runtime is timed in the same run by scripts/bench_executor.sh (npm
// onnxruntime-node on the same models exported by scripts/make_models.py), not here.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../examples/04_models/models.hpp"
#include "bench_common.hpp"
#include "kfuse/graph/compile.hpp"
#include "kfuse/tools/calibrate_graph.hpp"
#include "kfuse/tools/machine_limits.hpp"
#if KFUSE_BENCH_HAVE_TORCH
#include <torch/csrc/jit/api/module.h>
#include <torch/script.h>
#include <torch/torch.h>
#endif

namespace {

using kfuse::index_t;
using models::block_weights;
using models::mlp_weights;

constexpr index_t block_c = 64, block_hw = 56;
constexpr std::uint64_t seed = 2024;

const mlp_weights& mlp_w() {
  static const mlp_weights w = mlp_weights::make(seed);
  return w;
}
const block_weights& block_w() {
  static const block_weights w = block_weights::make(seed + 10, block_c);
  return w;
}

std::vector<float> input(std::size_t n, std::uint64_t s) {
  models::rng r(s);
  return r.normal(n, 0, 1);
}

void set_counters(benchmark::State& st, index_t batch, double flops) {
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetItemsProcessed(st.iterations() * batch);
}

double model_flops(bool mlp, index_t batch) {
  return mlp ? mlp_weights::flops(batch) : block_w().flops(batch, block_hw, block_hw);
}

index_t out_count(bool mlp, index_t batch) {
  return batch * (mlp ? mlp_weights::out : block_weights::classes);
}

std::vector<float> model_input(bool mlp, index_t batch) {
  return input(std::size_t(batch * (mlp ? mlp_weights::in : block_c * block_hw * block_hw)),
               seed + 100 + std::uint64_t(batch));
}

kfuse::graph model_graph(bool mlp, index_t batch) {
  return mlp ? models::build_mlp(mlp_w(), batch).g
             : models::build_block(block_w(), batch, block_hw, block_hw).g;
}

// The reference output of every implementation: the double-precision forward pass of
// models.hpp (computed once per model and batch; a few seconds for the block at batch 8).
const std::vector<double>& reference(bool mlp, index_t batch) {
  static std::map<std::pair<bool, index_t>, std::vector<double>> cache;
  auto& y = cache[{mlp, batch}];
  if (y.empty()) {
    const auto x = model_input(mlp, batch);
    if (mlp) {
      y = models::mlp_reference(mlp_w(), x.data(), batch);
    } else {
      for (index_t n = 0; n < batch; ++n) {
        const auto yn = models::block_reference(block_w(), x.data(), n, block_hw, block_hw);
        y.insert(y.end(), yn.begin(), yn.end());
      }
    }
  }
  return y;
}

// Relative L2 error against the double reference; the benchmark is skipped with an error above
// `tol` (fp32: 1e-4; bf16 / int8: their accuracy budget).
bool check(benchmark::State& st, bool mlp, index_t batch, const float* y, double tol) {
  const auto& ref = reference(mlp, batch);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
    den += ref[i] * ref[i];
  }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  st.counters["rel_err"] = rel;
  if (!(rel <= tol)) {
    st.SkipWithError(
        ("output differs from the double reference: rel L2 error " + std::to_string(rel)).c_str());
    return false;
  }
  return true;
}

// ---- kfuse -------------------------------------------------------------------------------------
kfuse::graph calibrated_mlp(index_t batch) {
  models::mlp_graph mg = models::build_mlp(mlp_w(), 64);
  std::vector<std::vector<float>> samples;
  for (int i = 0; i < 4; ++i)
    samples.push_back(input(std::size_t(64 * mlp_weights::in), seed + 7 + i));
  const auto cal = kfuse::calibrate_graph(mg.g, mg.linear_inputs(), samples,
                                          {kfuse::observer_method::percentile, 99.99});
  models::mlp_graph g = models::build_mlp(mlp_w(), batch);
  for (std::size_t i = 0; i < cal.tensors.size(); ++i)
    g.g.set_quant(g.linear_inputs()[i], cal.quant[i]);
  return g.g;
}

void kfuse_replay(benchmark::State& st, bool mlp, kfuse::precision prec) {
  const index_t batch = st.range(0);
  const int threads = int(st.range(1));
  const kfuse::graph g =
      prec == kfuse::precision::int8 ? calibrated_mlp(batch) : model_graph(mlp, batch);
  kfuse::plan p;
  try {
    p = kfuse::compile(g, {.threads = threads, .prec = prec});
  } catch (const kfuse::error& e) {
    st.SkipWithError(e.what());
    return;
  }
  const auto x = model_input(mlp, batch);
  std::vector<float> y(std::size_t(out_count(mlp, batch)));
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  r.replay();
  const double tol = prec == kfuse::precision::f32    ? 1e-4
                     : prec == kfuse::precision::bf16 ? 3e-2
                                                      : 8e-2;
  if (!check(st, mlp, batch, y.data(), tol)) return;
  for (auto _ : st) {
    r.replay();
    benchmark::ClobberMemory();
  }
  set_counters(st, batch, model_flops(mlp, batch));
  st.SetLabel(std::to_string(p.steps().size()) + " steps");
}

void kfuse_eager(benchmark::State& st, bool mlp) {
  const index_t batch = st.range(0);
  const int threads = int(st.range(1));
  const kfuse::plan p =
      kfuse::compile(model_graph(mlp, batch), {.threads = threads, .fuse = false});
  const auto x = model_input(mlp, batch);
  std::vector<float> y(std::size_t(out_count(mlp, batch)));
  p.run({kfuse::bind(x)}, {kfuse::bind(y)});
  if (!check(st, mlp, batch, y.data(), 1e-4)) return;
  for (auto _ : st) {
    p.run({kfuse::bind(x)}, {kfuse::bind(y)});
    benchmark::ClobberMemory();
  }
  set_counters(st, batch, model_flops(mlp, batch));
  st.SetLabel(std::to_string(p.steps().size()) + " ops");
}

// ---- libtorch ----------------------------------------------------------------------------------
#if KFUSE_BENCH_HAVE_TORCH
torch::Tensor to_torch(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}

torch::jit::Module torch_model(bool mlp) {
  torch::jit::Module m(mlp ? "mlp" : "block");
  if (mlp) {
    const auto& w = mlp_w();
    using W = mlp_weights;
    m.register_parameter("w1", to_torch(w.w1, {W::hidden, W::in}), false);
    m.register_parameter("b1", to_torch(w.b1, {W::hidden}), false);
    m.register_parameter("w2", to_torch(w.w2, {W::hidden, W::hidden}), false);
    m.register_parameter("b2", to_torch(w.b2, {W::hidden}), false);
    m.register_parameter("w3", to_torch(w.w3, {W::out, W::hidden}), false);
    m.register_parameter("b3", to_torch(w.b3, {W::out}), false);
    m.define(R"(
def forward(self, x):
    h = torch.relu(torch.linear(x, self.w1, self.b1))
    h = torch.relu(torch.linear(h, self.w2, self.b2))
    return torch.softmax(torch.linear(h, self.w3, self.b3), 1)
)");
  } else {
    const auto& b = block_w();
    const index_t c = b.c;
    m.register_parameter("c1", to_torch(b.w1, {c, c, 3, 3}), false);
    m.register_parameter("c2", to_torch(b.w2, {c, c, 3, 3}), false);
    auto bn = [&](const std::string& n, const models::bn_params& p) {
      m.register_buffer(n + "_m", to_torch(p.mean, {c}));
      m.register_buffer(n + "_v", to_torch(p.var, {c}));
      m.register_parameter(n + "_g", to_torch(p.gamma, {c}), false);
      m.register_parameter(n + "_b", to_torch(p.beta, {c}), false);
    };
    bn("bn1", b.bn1);
    bn("bn2", b.bn2);
    m.register_parameter("fw", to_torch(b.fc_w, {block_weights::classes, c}), false);
    m.register_parameter("fb", to_torch(b.fc_b, {block_weights::classes}), false);
    m.define(R"(
def forward(self, x):
    y = torch.conv2d(x, self.c1, None, [1, 1], [1, 1])
    y = torch.batch_norm(y, self.bn1_g, self.bn1_b, self.bn1_m, self.bn1_v, False, 0.1, 1e-5, False)
    y = torch.relu(y)
    y = torch.conv2d(y, self.c2, None, [1, 1], [1, 1])
    y = torch.batch_norm(y, self.bn2_g, self.bn2_b, self.bn2_m, self.bn2_v, False, 0.1, 1e-5, False)
    y = torch.relu(y + x)
    y = torch.adaptive_avg_pool2d(y, [1, 1]).flatten(1)
    return torch.linear(y, self.fw, self.fb)
)");
  }
  m.eval();
  return torch::jit::freeze(m);
}

void torch_frozen(benchmark::State& st, bool mlp) {
  const index_t batch = st.range(0);
  const int threads = int(st.range(1));
  at::set_num_threads(threads);
  c10::InferenceMode guard;
  torch::jit::Module m = torch_model(mlp);
  const auto xv = model_input(mlp, batch);
  torch::Tensor x;
  if (mlp) {
    x = to_torch(xv, {batch, mlp_weights::in});
  } else {  // the data is NHWC: view it as NCHW in channels-last memory
    x = to_torch(xv, {batch, block_hw, block_hw, block_c}).permute({0, 3, 1, 2});
  }
  std::vector<torch::jit::IValue> in{x};
  torch::Tensor y = m.forward(in).toTensor().contiguous();
  if (!check(st, mlp, batch, y.data_ptr<float>(), 1e-4)) return;
  for (auto _ : st) {
    auto out = m.forward(in);
    benchmark::DoNotOptimize(out);
  }
  set_counters(st, batch, model_flops(mlp, batch));
  st.SetLabel("torch " + std::string(TORCH_VERSION) + ", " + std::to_string(at::get_num_threads()) +
              " threads");
}
#endif

// ---- oneDNN ------------------------------------------------------------------------------------
#if KFUSE_BENCH_HAVE_DNNL
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct dnnl_net {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  std::vector<dnnl::primitive> prims;
  std::vector<std::unordered_map<int, dnnl::memory>> args;
  dnnl::memory in, out;

  void run() {
    for (std::size_t i = 0; i < prims.size(); ++i) prims[i].execute(s, args[i]);
    s.wait();
  }
  // Weights into the layout the primitive chose (prepacked once).
  dnnl::memory pack(const dnnl::memory::desc& want, const dnnl::memory::desc& have,
                    const float* p) {
    dnnl::memory user(have, eng, const_cast<float*>(p));
    dnnl::memory packed(want, eng);
    dnnl::reorder(user, packed).execute(s, user, packed);
    s.wait();
    return packed;
  }
  dnnl::memory vec(const std::vector<float>& v, dnnl::memory::dims d, tag t) {
    dnnl::memory m({d, dt::f32, t}, eng);
    std::copy(v.begin(), v.end(), static_cast<float*>(m.get_data_handle()));
    return m;
  }

  // y = act(x . W^T + b), W given [N, K] (PyTorch), as a matmul with prepacked weights.
  dnnl::memory linear(const dnnl::memory& x, index_t M, index_t K, index_t N,
                      const std::vector<float>& w, const std::vector<float>& b, bool relu) {
    const dnnl::memory::desc x_md({M, K}, dt::f32, tag::ab), w_any({K, N}, dt::f32, tag::any),
        b_md({1, N}, dt::f32, tag::ab), y_md({M, N}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    if (relu) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(po);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_any, b_md, y_md), attr, eng);
    dnnl::memory wp = pack(pd.weights_desc(), {{K, N}, dt::f32, tag::ba}, w.data());
    dnnl::memory y(y_md, eng);
    prims.push_back(dnnl::matmul(pd));
    args.push_back({{DNNL_ARG_SRC, x},
                    {DNNL_ARG_WEIGHTS, wp},
                    {DNNL_ARG_BIAS, vec(b, {1, N}, tag::ab)},
                    {DNNL_ARG_DST, y}});
    return y;
  }

  // 3x3 same conv, NHWC, BN folded into weights and bias, ReLU, optional residual added first.
  dnnl::memory conv_bn(const dnnl::memory& x, index_t n, index_t c, index_t hw,
                       const std::vector<float>& w, const models::bn_params& bn,
                       const dnnl::memory* residual) {
    std::vector<float> wf(w.size()), bf(static_cast<std::size_t>(c));
    for (index_t k = 0; k < c; ++k) {
      const float sc =
          bn.gamma[std::size_t(k)] / std::sqrt(bn.var[std::size_t(k)] + block_weights::bn_eps);
      for (index_t i = 0; i < c * 9; ++i)
        wf[std::size_t(k * c * 9 + i)] = w[std::size_t(k * c * 9 + i)] * sc;
      bf[std::size_t(k)] = bn.beta[std::size_t(k)] - bn.mean[std::size_t(k)] * sc;
    }
    const dnnl::memory::desc x_md({n, c, hw, hw}, dt::f32, tag::nhwc),
        w_any({c, c, 3, 3}, dt::f32, tag::any), b_md({c}, dt::f32, tag::a);
    dnnl::post_ops po;
    if (residual) po.append_binary(dnnl::algorithm::binary_add, x_md);
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, x_md, w_any, b_md,
                                        x_md, {1, 1}, {1, 1}, {1, 1}),
        attr, eng);
    dnnl::memory wp = pack(pd.weights_desc(), {{c, c, 3, 3}, dt::f32, tag::oihw}, wf.data());
    dnnl::memory y(x_md, eng);
    std::unordered_map<int, dnnl::memory> a{{DNNL_ARG_SRC, x},
                                            {DNNL_ARG_WEIGHTS, wp},
                                            {DNNL_ARG_BIAS, vec(bf, {c}, tag::a)},
                                            {DNNL_ARG_DST, y}};
    if (residual) a[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = *residual;
    prims.push_back(dnnl::convolution_forward(pd));
    args.push_back(std::move(a));
    return y;
  }
};

std::unique_ptr<dnnl_net> dnnl_model(bool mlp, index_t batch) {
  auto net = std::make_unique<dnnl_net>();
  if (mlp) {
    using W = mlp_weights;
    const auto& w = mlp_w();
    net->in = dnnl::memory({{batch, W::in}, dt::f32, tag::ab}, net->eng);
    auto h1 = net->linear(net->in, batch, W::in, W::hidden, w.w1, w.b1, true);
    auto h2 = net->linear(h1, batch, W::hidden, W::hidden, w.w2, w.b2, true);
    auto z = net->linear(h2, batch, W::hidden, W::out, w.w3, w.b3, false);
    const dnnl::memory::desc z_md({batch, W::out}, dt::f32, tag::ab);
    const dnnl::softmax_forward::primitive_desc pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, z_md, 1), net->eng);
    net->out = dnnl::memory(z_md, net->eng);
    net->prims.push_back(dnnl::softmax_forward(pd));
    net->args.push_back({{DNNL_ARG_SRC, z}, {DNNL_ARG_DST, net->out}});
  } else {
    const auto& b = block_w();
    const index_t c = b.c, hw = block_hw;
    net->in = dnnl::memory({{batch, c, hw, hw}, dt::f32, tag::nhwc}, net->eng);
    auto r1 = net->conv_bn(net->in, batch, c, hw, b.w1, b.bn1, nullptr);
    auto r2 = net->conv_bn(r1, batch, c, hw, b.w2, b.bn2, &net->in);
    const dnnl::memory::desc p_md({batch, c, 1, 1}, dt::f32, tag::nhwc);
    const dnnl::pooling_forward::primitive_desc pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::pooling_avg_exclude_padding, r2.get_desc(),
                                    p_md, {hw, hw}, {hw, hw}, {0, 0}, {0, 0}),
        net->eng);
    dnnl::memory pooled(p_md, net->eng);
    net->prims.push_back(dnnl::pooling_forward(pd));
    net->args.push_back({{DNNL_ARG_SRC, r2}, {DNNL_ARG_DST, pooled}});
    // [N, C, 1, 1] NHWC is [N, C] row-major.
    dnnl::memory flat({{batch, c}, dt::f32, tag::ab}, net->eng, pooled.get_data_handle());
    net->out = net->linear(flat, batch, c, block_weights::classes, b.fc_w, b.fc_b, false);
  }
  return net;
}

void dnnl_chained(benchmark::State& st, bool mlp) {
  const index_t batch = st.range(0);
  const int threads = int(st.range(1));
  omp_set_num_threads(threads);
  auto net = dnnl_model(mlp, batch);
  const auto x = model_input(mlp, batch);
  std::copy(x.begin(), x.end(), static_cast<float*>(net->in.get_data_handle()));
  net->run();
  if (!check(st, mlp, batch, static_cast<const float*>(net->out.get_data_handle()), 1e-4)) return;
  for (auto _ : st) net->run();
  set_counters(st, batch, model_flops(mlp, batch));
  st.SetLabel(std::to_string(net->prims.size()) + " primitives");
}
#endif

void mlp_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "threads"});
  for (int t : {1, 2})
    for (int batch : {1, 64}) b->Args({batch, t});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void block_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "threads"});
  for (int t : {1, 2})
    for (int batch : {1, 8}) b->Args({batch, t});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void batch1_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "threads"});
  for (int t : {1, 2}) b->Args({1, t});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_CAPTURE(kfuse_replay, mlp_f32, true, kfuse::precision::f32)->Apply(mlp_args);
BENCHMARK_CAPTURE(kfuse_replay, mlp_bf16, true, kfuse::precision::bf16)->Apply(batch1_args);
BENCHMARK_CAPTURE(kfuse_replay, mlp_int8, true, kfuse::precision::int8)->Apply(batch1_args);
BENCHMARK_CAPTURE(kfuse_eager, mlp_f32, true)->Apply(mlp_args);
#if KFUSE_BENCH_HAVE_TORCH
BENCHMARK_CAPTURE(torch_frozen, mlp_f32, true)->Apply(mlp_args);
#endif
#if KFUSE_BENCH_HAVE_DNNL
BENCHMARK_CAPTURE(dnnl_chained, mlp_f32, true)->Apply(mlp_args);
#endif
BENCHMARK_CAPTURE(kfuse_replay, block_f32, false, kfuse::precision::f32)->Apply(block_args);
BENCHMARK_CAPTURE(kfuse_eager, block_f32, false)->Apply(block_args);
#if KFUSE_BENCH_HAVE_TORCH
BENCHMARK_CAPTURE(torch_frozen, block_f32, false)->Apply(block_args);
#endif
#if KFUSE_BENCH_HAVE_DNNL
BENCHMARK_CAPTURE(dnnl_chained, block_f32, false)->Apply(block_args);
#endif

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("kfuse.limits",
                              kfuse_bench::limits_text(kfuse::cached_machine_limits()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
