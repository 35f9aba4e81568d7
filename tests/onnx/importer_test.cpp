// kfuse::onnx on real PyTorch exports (tests/onnx/models, made by
// scripts/make_onnx_test_models.py with PyTorch's outputs as the golden values): every model
// loads, compiles and matches PyTorch in NCHW and NHWC, on 1 and 2 threads; the pattern pass
// rewrites what it should; the graph's inputs and outputs are the model's. encoder_b2 is two
// BERT-style layers as PyTorch exports them (MatMul of two run-time tensors, Transpose, Softmax,
// the erf GELU, LayerNormalization).
//
// Tolerance: fp32 against PyTorch's fp32 on the same inputs. Both sum the same products in
// another order (blocked GEMM, FMA); with K <= 400 terms of size ~1 the difference stays near
// K * 2^-24 relative to the sum of magnitudes: 1e-4 relative plus 1e-5 absolute leaves a wide
// margin and still catches a wrong tap, channel or layout (errors of order 1).
#include "kfuse/onnx/importer.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/tools/npy.hpp"
#include "kfuse/types/convert.hpp"
#include "onnx/model_builder.hpp"

namespace {

const std::string models = KFUSE_ONNX_TEST_MODELS;

std::vector<float> load_f32(const std::string& file) {
  return kfuse::npy_to_f32(kfuse::read_npy(file));
}

// Runs model `name` on its saved input and returns the largest error relative to tolerance
// (<= 1 passes).
double run_model(const std::string& name, kfuse::tensor_layout layout, int threads,
                 kfuse::onnx::model* out = nullptr, kfuse::onnx::import_options opt = {}) {
  opt.layout = layout;
  kfuse::onnx::model m = kfuse::onnx::load(models + "/" + name + ".onnx", opt);
  kfuse::plan p = kfuse::compile(m.graph, {.threads = threads, .fork_join_ns = 0});
  const std::vector<float> x = load_f32(models + "/" + name + ".input.npy");
  const std::vector<float> ref = load_f32(models + "/" + name + ".output.npy");
  std::vector<float> y(ref.size(), std::nanf(""));
  kfuse::replay_buffer r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  r.replay();
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double tol = 1e-4 * std::fabs(ref[i]) + 1e-5;
    const double err = std::fabs(double(y[i]) - ref[i]) / tol;
    worst = std::isnan(err) ? 1e30 : std::max(worst, err);
  }
  if (out) *out = std::move(m);
  return worst;
}

}  // namespace

TEST_CASE("onnx: PyTorch exports match PyTorch in both layouts, on 1 and 2 threads") {
  for (const char* name :
       {"small_cnn_b1", "mlp_b3", "conv1d_b2", "decomposed_b2", "upsampling_b2",
        "layernorm_op12_b2", "encoder_b2", "shuffle_units_b2", "convnext_blocks_b2"})
    for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc})
      for (int threads : {1, 2}) {
        INFO(name << " layout " << kfuse::layout_name(layout) << " threads " << threads);
        CHECK(run_model(name, layout, threads) <= 1.0);
      }
}

// Axis 0 symbolic ("batch", bound by --dim): the models of kfuse-run's --split tests, one of
// them mixing samples (it subtracts the batch mean).
TEST_CASE("onnx: exports with a symbolic batch match PyTorch at the batch they were run at") {
  kfuse::onnx::import_options at4;
  at4.dims = {{"batch", 4}};
  for (const char* name : {"small_cnn_dyn_b4", "batch_centered_dyn_b4"})
    for (int threads : {1, 2}) {
      INFO(name << " threads " << threads);
      CHECK(run_model(name, kfuse::tensor_layout::nhwc, threads, nullptr, at4) <= 1.0);
    }
}

// BERT as Hugging Face writes it (tests/onnx/models/bert_tiny_b2): int64 token ids and mask
// bound straight from the tokenizer's arrays, embeddings gathered, the padded positions of the
// second sequence masked, two outputs (hidden states and the pooled first token).
TEST_CASE("onnx: a BERT export with int64 ids and a padding mask matches PyTorch") {
  const std::string base = models + "/bert_tiny_b2";
  const kfuse::npy_array ids = kfuse::read_npy(base + ".input_ids.npy");
  const kfuse::npy_array mask = kfuse::read_npy(base + ".attention_mask.npy");
  REQUIRE(ids.dtype == kfuse::npy_dtype::i64);
  const auto id_s = kfuse::npy_data<std::int64_t>(ids);
  const auto mask_s = kfuse::npy_data<std::int64_t>(mask);
  const std::vector<std::int64_t> id_v(id_s.begin(), id_s.end()),
      mask_v(mask_s.begin(), mask_s.end());
  const std::vector<float> hidden_ref = load_f32(base + ".hidden.npy");
  const std::vector<float> pooled_ref = load_f32(base + ".pooled.npy");
  kfuse::onnx::model m = kfuse::onnx::load(base + ".onnx");
  REQUIRE(m.inputs.size() == 2);
  CHECK(m.inputs[0].type == kfuse::dtype::i64);
  for (int threads : {1, 2}) {
    kfuse::plan p = kfuse::compile(m.graph, {.threads = threads, .fork_join_ns = 0});
    std::vector<float> hidden(hidden_ref.size(), std::nanf("")), pooled(pooled_ref.size());
    kfuse::replay_buffer r = p.record({kfuse::bind(id_v), kfuse::bind(mask_v)},
                                      {kfuse::bind(hidden), kfuse::bind(pooled)});
    r.replay();
    for (std::size_t i = 0; i < hidden.size(); ++i) {
      INFO("threads " << threads << " hidden " << i);
      REQUIRE(std::fabs(hidden[i] - hidden_ref[i]) <= 1e-4 * std::fabs(hidden_ref[i]) + 1e-5);
    }
    for (std::size_t i = 0; i < pooled.size(); ++i)
      REQUIRE(std::fabs(pooled[i] - pooled_ref[i]) <= 1e-4 * std::fabs(pooled_ref[i]) + 1e-5);
    // An id outside the vocabulary stops the replay with an error naming the gather node.
    std::vector<std::int64_t> bad = id_v;
    bad[3] = 50;
    kfuse::replay_buffer rb = p.record({kfuse::bind(bad), kfuse::bind(mask_v)},
                                       {kfuse::bind(hidden), kfuse::bind(pooled)});
    CHECK_THROWS_WITH(rb.replay(), Catch::Contains("(gather)") &&
                                       Catch::Contains("index 50 at position 3 is out of range"));
  }
}

TEST_CASE("onnx: the model's inputs and outputs, in order, with their shapes") {
  kfuse::onnx::model m;
  run_model("small_cnn_b1", kfuse::tensor_layout::nhwc, 1, &m);
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].name == "x");
  CHECK(m.inputs[0].shape == std::vector<kfuse::index_t>{1, 3, 24, 24});
  REQUIRE(m.outputs.size() == 1);
  CHECK(m.outputs[0].name == "y");
  CHECK(m.outputs[0].shape == std::vector<kfuse::index_t>{1, 10});
  CHECK(m.opset == 17);
  CHECK(m.producer.find("pytorch") != std::string::npos);
  // NHWC inside, NCHW at the edges: the graph input stays nchw.
  CHECK(m.graph.tensor(m.inputs[0].id).layout == kfuse::tensor_layout::nchw);
}

TEST_CASE("onnx: decomposed activations become one stage each") {
  auto rewrites_of = [](const std::string& name) {
    std::string all;
    for (const std::string& r : kfuse::onnx::load(models + "/" + name + ".onnx").rewrites)
      all += r + "\n";
    return all;
  };
  const std::string mlp = rewrites_of("mlp_b3");
  CHECK(mlp.find("gelu: the erf form") != std::string::npos);
  CHECK(mlp.find("gelu: the tanh form") != std::string::npos);
  const std::string dec = rewrites_of("decomposed_b2");
  CHECK(dec.find("hardswish: x * clip(x + 3, 0, 6) / 6") != std::string::npos);
  CHECK(dec.find("silu: x * Sigmoid(x)") != std::string::npos);
  CHECK(rewrites_of("layernorm_op12_b2").find("layer_norm: the decomposed form") !=
        std::string::npos);
  // Without the pattern pass the same models still import and run (the decomposed form).
  kfuse::onnx::import_options opt;
  opt.fuse_patterns = false;
  kfuse::onnx::model m = kfuse::onnx::load(models + "/decomposed_b2.onnx", opt);
  CHECK(m.rewrites.empty());
}

// ShuffleNet's reshape -> transpose -> reshape and the chunk / Split after it: channel_shuffle
// nodes (runs of a shuffle read its source), no strided view, and the whole model in NHWC.
TEST_CASE("onnx: channel shuffles and channel slices become channel_shuffle nodes") {
  const kfuse::onnx::model m = kfuse::onnx::load(models + "/shuffle_units_b2.onnx");
  int shuffles = 0, views = 0;
  for (const kfuse::node_desc& n : m.graph.nodes()) {
    views += n.op == kfuse::op_kind::strided_view;
    shuffles += n.op == kfuse::op_kind::channel_shuffle &&
                n.attr<kfuse::channel_shuffle_params>().groups > 1;
  }
  CHECK(views == 0);
  // Three whole shuffles, the chunk's two halves and the Split's three runs (of the shuffles
  // they read); the first and last whole shuffles are read only through their runs.
  CHECK(shuffles == 8);
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  std::string kernels;
  for (const kfuse::step_info& s : p.steps()) kernels += s.kernel + "\n";
  CHECK(kernels.find("channel_shuffle nhwc groups 2 channels 0+8") != std::string::npos);
  CHECK(kernels.find("channel_shuffle nhwc groups 4 channels 8+8") != std::string::npos);
  CHECK(kernels.find("reshape of nhwc") == std::string::npos);
  CHECK(p.report().text().find(" node(s) whose outputs nothing reads do not run") !=
        std::string::npos);
}

// ConvNeXt's permutes of an image to [N, H, W, C] (its channels-last layer norms and linears)
// and back: in an NHWC plan they read the image's memory as it is, so they are views, and no
// step but the output's converts an image to nchw.
TEST_CASE("onnx: ConvNeXt's permutes around NHWC images are views") {
  kfuse::onnx::import_options opt;
  opt.layout = kfuse::tensor_layout::nhwc;
  const kfuse::onnx::model m = kfuse::onnx::load(models + "/convnext_blocks_b2.onnx", opt);
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  int views = 0, copies = 0;
  std::string kernels;
  for (const kfuse::step_info& s : p.steps()) {
    kernels += s.kernel + "\n";
    if (s.op == kfuse::op_kind::strided_view) (s.kernel == "view" ? views : copies) += 1;
  }
  INFO(kernels);
  CHECK(views == 10);  // 5 permutes there and 5 back
  CHECK(copies == 0);
  // The one conversion to nchw is the last step, the model's output (declared [N, C, H, W]).
  const std::size_t first = kernels.find("nhwc->nchw");
  CHECK(first != std::string::npos);
  CHECK(first + std::string("nhwc->nchw\n").size() == kernels.size());
}

TEST_CASE("onnx: supported_ops lists the default-domain ops, sorted") {
  const auto ops = kfuse::onnx::supported_ops();
  CHECK(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"Conv", "Gemm", "MatMul", "Relu", "MaxPool", "Reshape", "Softmax"})
    CHECK(std::find(ops.begin(), ops.end(), op) != ops.end());
  for (const std::string& op : ops) CHECK(op.find('.') == std::string::npos);
}

// A QDQ model as ONNX Runtime's quantizer writes it: the activation quantized and dequantized
// (uint8, zero point 128), the weights int8 per output channel and the bias int32, both
// dequantized at load time. The fp32 plan is ONNX's semantics exactly (against a double
// reference of the same integer arithmetic); the int8 plan runs with the model's activation
// scale (no calibration) and stays within a few quantization steps.
TEST_CASE("onnx: a QDQ model keeps ONNX's semantics and becomes an int8 plan") {
  const float sx = 0.05f;
  const std::vector<float> ws{0.01f, 0.02f, 0.004f};
  std::vector<std::int32_t> wq(3 * 2 * 3 * 3), bq{100, -250, 37};
  for (std::size_t i = 0; i < wq.size(); ++i) wq[i] = std::int32_t((i * 37) % 255) - 127;
  kt::model_builder b({1, 2, 4, 4}, 13);
  b.init("sx", {}, {sx});
  b.init_ints("zx", {}, 2, {128});
  b.init_ints("wq", {3, 2, 3, 3}, 3, wq);
  b.init("ws", {3}, ws);
  b.init_ints("wz", {3}, 3, {0, 0, 0});
  b.init_ints("bq", {3}, 6, bq);
  b.init("bs", {3}, {sx * ws[0], sx * ws[1], sx * ws[2]});
  b.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  kt::attr_int(b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}), "axis", 0);
  kt::attr_int(b.node("DequantizeLinear", {"bq", "bs"}, {"bias"}), "axis", 0);
  kt::attr_ints(b.node("Conv", {"xd", "w", "bias"}, {"c"}), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"y"});
  std::vector<float> x(32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.7f) * 7.f;
  x[3] = 0.025f;  // a tie: rounds to the even integer (0), not up
  x[5] = 100.f;   // saturates at 255
  std::vector<double> want(3 * 16);
  for (int k = 0; k < 3; ++k)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) {
        double acc = double(bq[std::size_t(k)]) * double(sx * ws[std::size_t(k)]);
        for (int c = 0; c < 2; ++c)
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
              const int ih = h + r - 1, iw = w + s - 1;
              if (ih < 0 || ih >= 4 || iw < 0 || iw >= 4) continue;
              const float v = x[std::size_t((c * 4 + ih) * 4 + iw)];
              const double q = std::clamp(std::nearbyint(double(v / sx)) + 128, 0.0, 255.0);
              acc += (q - 128) * double(sx) *
                     (wq[std::size_t(((k * 2 + c) * 3 + r) * 3 + s)] * double(ws[std::size_t(k)]));
            }
        want[std::size_t((k * 4 + h) * 4 + w)] = std::max(0.0, acc);
      }
  double peak = 0;
  for (double v : want) peak = std::max(peak, v);
  for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc})
    for (auto prec : {kfuse::precision::f32, kfuse::precision::int8}) {
      INFO("layout " << kfuse::layout_name(layout) << " int8 " << (prec == kfuse::precision::int8));
      kfuse::onnx::import_options opt;
      opt.layout = layout;
      const kfuse::onnx::model m = b.load(opt);
      const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1, .prec = prec});
      std::vector<float> y(want.size(), std::nanf(""));
      auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
      r.replay();
      // int8: the model's activation grid is exact; kfuse requantizes the weights per channel
      // with its own scales (|error| <= half a step of each, over 18 taps).
      const double tol = prec == kfuse::precision::f32 ? 1e-5 : 0.02 * peak;
      for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(std::fabs(y[i] - want[i]) <= tol);
    }
  // Quantized data as a model input, dequantized per tensor and per channel.
  kt::model_builder u({1, 3, 2, 2}, 13, 2);
  u.init("s", {3}, {0.5f, 0.25f, 2.f});
  u.init_ints("z", {3}, 2, {10, 0, 255});
  kt::attr_int(u.node("DequantizeLinear", {"x", "s", "z"}, {"y"}), "axis", 1);
  const kfuse::onnx::model mu = u.load();
  const kfuse::plan pu = kfuse::compile(mu.graph, {.threads = 1});
  std::vector<std::uint8_t> xu(12);
  for (std::size_t i = 0; i < 12; ++i) xu[i] = std::uint8_t(i * 21);
  std::vector<float> yu(12, std::nanf(""));
  auto ru = pu.record({kfuse::bind(xu)}, {kfuse::bind(yu)});
  ru.replay();
  const float s[] = {0.5f, 0.25f, 2.f};
  const int z[] = {10, 0, 255};
  for (std::size_t i = 0; i < 12; ++i) CHECK(yu[i] == float(int(xu[i]) - z[i / 4]) * s[i / 4]);
}

// Bool tensors: comparisons, Not, Where (broadcast operands, Inf and NaN kept) and bool model
// inputs and outputs (bound as uint8 0 / 1), in both layouts, against the C++ operators.
TEST_CASE("onnx: comparisons, Not, Where and bool inputs and outputs, against a reference") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<float> x(2 * 3 * 4 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.7f) * 2;
  x[3] = inf;
  x[7] = nan;
  x[11] = 0.5f;                                                    // equal to the threshold
  const std::vector<float> other = {-1.f, 2.f, -inf, nan, 0.25f};  // broadcast along W
  for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
    kt::model_builder b({2, 3, 4, 5}, 13);
    b.init("t", {}, {0.5f});
    b.init("o", {5}, other);
    b.node("LessOrEqual", {"x", "t"}, {"le"});
    b.node("Greater", {"t", "x"}, {"gt"});  // constant first: flips to x < t
    b.node("Xor", {"le", "gt"}, {"eq"});    // x == t (or NaN: neither)
    b.node("Not", {"eq"}, {"ne"});
    b.node("Where", {"gt", "x", "o"}, {"y"});
    b.m.mutable_graph()->add_output()->set_name("ne");
    kfuse::onnx::import_options opt;
    opt.layout = layout;
    const kfuse::onnx::model m = b.load(opt);
    REQUIRE(m.outputs.size() == 2);
    CHECK(m.outputs[1].type == kfuse::dtype::u8);
    CHECK(m.outputs[1].onnx_type == 9);
    const kfuse::plan p = kfuse::compile(m.graph, {.threads = 2, .fork_join_ns = 0});
    std::vector<float> y(x.size(), 123.f);
    std::vector<std::uint8_t> ne(x.size(), 7);
    auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y), kfuse::bind(ne)});
    r.replay();
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO("i = " << i << ", x = " << x[i]);
      const float want = x[i] < 0.5f ? x[i] : other[i % 5];
      CHECK((std::isnan(want) ? std::isnan(y[i]) : y[i] == want));
      CHECK(int(ne[i]) == int(!(x[i] == 0.5f)));
    }
  }
  // A bool model input (uint8 0 / 1), And with a bool constant, a bool output.
  kt::model_builder u({6}, 13, 9);
  u.init_ints("c", {6}, 9, {1, 1, 0, 0, 1, 0});
  u.node("And", {"x", "c"}, {"y"});
  const kfuse::onnx::model mu = u.load();
  CHECK(mu.inputs[0].type == kfuse::dtype::u8);
  const kfuse::plan pu = kfuse::compile(mu.graph, {.threads = 1});
  const std::vector<std::uint8_t> xu = {1, 0, 1, 0, 1, 1};
  std::vector<std::uint8_t> yu(6, 9);
  auto ru = pu.record({kfuse::bind(xu)}, {kfuse::bind(yu)});
  ru.replay();
  CHECK(yu == std::vector<std::uint8_t>{1, 0, 0, 0, 1, 0});
  // Rows gathered from a bool tensor stay bools (a uint8 output of ONNX type bool).
  kt::model_builder gb({6}, 13, 9);
  gb.init_ints("i", {3}, 7, {5, 0, 2});
  gb.node("Gather", {"x", "i"}, {"y"});
  const kfuse::onnx::model mg = gb.load();
  CHECK(mg.outputs[0].onnx_type == 9);
  const kfuse::plan pg = kfuse::compile(mg.graph, {.threads = 1});
  std::vector<std::uint8_t> yg(3, 9);
  auto rg = pg.record({kfuse::bind(xu)}, {kfuse::bind(yg)});
  rg.replay();
  CHECK(yg == std::vector<std::uint8_t>{1, 1, 1});
}

// ONNX Runtime's dynamic quantization (quantize_dynamic): DynamicQuantizeLinear of the
// activations, MatMulInteger with their run-time zero point and the weights' constant one, an
// int32 result; against ONNX's formulas in float and exact integer arithmetic.
TEST_CASE("onnx: DynamicQuantizeLinear and MatMulInteger, against integer arithmetic") {
  const int M = 3, K = 8, N = 4;
  std::vector<float> x(M * K);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 1.3f) * 3 + 0.7f;
  std::vector<std::int32_t> w(K * N);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::int32_t((i * 37) % 256);
  kt::model_builder b({M, K}, 13);
  b.init_ints("w", {K, N}, 2, w);
  b.init_ints("wz", {}, 2, {128});
  b.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  b.node("MatMulInteger", {"xq", "w", "xz", "wz"}, {"y"});
  b.m.mutable_graph()->add_output()->set_name("xs");
  const kfuse::onnx::model m = b.load();
  REQUIRE(m.outputs[0].type == kfuse::dtype::i32);
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  std::vector<std::int32_t> y(M * N, -1);
  std::vector<float> xs(1, std::nanf(""));
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y), kfuse::bind(xs)});
  r.replay();
  float lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  const float scale = (hi - lo) / 255.f;
  const float zero = std::nearbyint(std::clamp(-lo / scale, 0.f, 255.f));
  CHECK(xs[0] == scale);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      std::int64_t acc = 0;
      for (int k = 0; k < K; ++k) {
        const float q =
            std::clamp(std::nearbyint(x[std::size_t(i * K + k)] / scale) + zero, 0.f, 255.f);
        acc += (std::int64_t(q) - std::int64_t(zero)) * (w[std::size_t(k * N + j)] - 128);
      }
      CHECK(y[std::size_t(i * N + j)] == acc);
    }
}

// Opset 18: GroupNormalization (scale and bias per group), ReduceMean's axes as an input, Split
// into num_outputs uneven chunks; against double references, both layouts.
TEST_CASE("onnx: opset 18 GroupNormalization, Reduce axes input, Split num_outputs") {
  const int N = 2, C = 6, H = 3, W = 4, G = 3;
  std::vector<float> x(N * C * H * W);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f) * 2 + float(i % 5);
  const std::vector<float> scale = {0.5f, -1.f, 2.f}, bias = {0.1f, 0.f, -0.3f};
  for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
    kt::model_builder b({N, C, H, W}, 18);
    b.init("scale", {G}, scale);
    b.init("bias", {G}, bias);
    b.init_ints("axes", {1}, 7, {3});
    kt::attr_int(b.node("GroupNormalization", {"x", "scale", "bias"}, {"gn"}), "num_groups", G);
    b.node("ReduceMean", {"gn", "axes"}, {"m"});  // keepdims: [N, C, H, 1]
    auto& split = b.node("Split", {"gn"}, {"y", "s1"});
    kt::attr_int(split, "axis", 1);
    kt::attr_int(split, "num_outputs", 2);
    b.m.mutable_graph()->add_output()->set_name("s1");
    b.m.mutable_graph()->add_output()->set_name("m");
    kfuse::onnx::import_options opt;
    opt.layout = layout;
    const kfuse::onnx::model m = b.load(opt);
    const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
    std::vector<float> y(N * 3 * H * W, 1e9f), s1(N * 3 * H * W, 1e9f), mean(N * C * H, 1e9f);
    auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y), kfuse::bind(s1), kfuse::bind(mean)});
    r.replay();
    // Reference: mean / variance over each group's C / G channels and H * W pixels.
    std::vector<double> gn(x.size());
    const int per = C / G * H * W;
    for (int n = 0; n < N; ++n)
      for (int g = 0; g < G; ++g) {
        const std::size_t base = std::size_t((n * C + g * (C / G)) * H * W);
        double mu = 0, var = 0;
        for (int i = 0; i < per; ++i) mu += x[base + std::size_t(i)];
        mu /= per;
        for (int i = 0; i < per; ++i)
          var += (x[base + std::size_t(i)] - mu) * (x[base + std::size_t(i)] - mu);
        var /= per;
        for (int i = 0; i < per; ++i)
          gn[base + std::size_t(i)] =
              (x[base + std::size_t(i)] - mu) / std::sqrt(var + 1e-5) * scale[std::size_t(g)] +
              bias[std::size_t(g)];
      }
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < H; ++h) {
          double mu = 0;
          for (int w = 0; w < W; ++w) {
            const std::size_t i = std::size_t(((n * C + c) * H + h) * W + w);
            const std::size_t o = std::size_t(((n * 3 + c % 3) * H + h) * W + w);
            CHECK(std::fabs((c < 3 ? y : s1)[o] - gn[i]) <= 1e-4 * (1 + std::fabs(gn[i])));
            mu += gn[i] / W;
          }
          CHECK(std::fabs(mean[std::size_t((n * C + c) * H + h)] - mu) <=
                1e-4 * (1 + std::fabs(mu)));
        }
  }
}

// Per-channel QuantizeLinear of run-time data (round half to even, saturate) and its
// DequantizeLinear, uint8 and int8, both layouts, against ONNX's formulas.
TEST_CASE("onnx: per-channel QuantizeLinear of run-time data, against ONNX's formulas") {
  const int N = 2, C = 3, H = 2, W = 5;
  std::vector<float> x(N * C * H * W);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.77f) * 40 + 2.5f;
  x[4] = 2.5f;  // a tie: rounds to even
  const std::vector<float> scale = {0.5f, 0.25f, 1.f};
  for (int elem : {2, 3})
    for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
      kt::model_builder b({N, C, H, W}, 13);
      b.init("s", {C}, scale);
      b.init_ints("z", {C}, elem,
                  elem == 2 ? std::vector<std::int32_t>{128, 0, 250}
                            : std::vector<std::int32_t>{0, -100, 120});
      kt::attr_int(b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}), "axis", 1);
      kt::attr_int(b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}), "axis", 1);
      b.m.mutable_graph()->add_output()->set_name("q");
      kfuse::onnx::import_options opt;
      opt.layout = layout;
      const kfuse::onnx::model m = b.load(opt);
      const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
      std::vector<float> y(x.size(), std::nanf(""));
      std::vector<std::uint8_t> qu(x.size());
      std::vector<std::int8_t> qi(x.size());
      auto r = p.record({kfuse::bind(x)},
                        {kfuse::bind(y), elem == 2 ? kfuse::bind(qu) : kfuse::bind(qi)});
      r.replay();
      const int z[2][3] = {{128, 0, 250}, {0, -100, 120}};
      for (std::size_t i = 0; i < x.size(); ++i) {
        const int c = int(i / (H * W)) % C;
        const double lo = elem == 2 ? 0 : -128, hi = elem == 2 ? 255 : 127;
        const double q = std::clamp(
            std::nearbyint(double(x[i]) / scale[std::size_t(c)]) + z[elem == 2 ? 0 : 1][c], lo, hi);
        CHECK((elem == 2 ? double(qu[i]) : double(qi[i])) == q);
        CHECK(y[i] == float((q - z[elem == 2 ? 0 : 1][c]) * scale[std::size_t(c)]));
      }
    }
}

// MaxPool with dilations (strided views of a -inf padded input, a max chain): pads, strides and
// ceil mode, 2-D and 1-D, both layouts, against a direct loop (PyTorch's rule: windows start
// inside the input or its left padding; padded taps never win).
TEST_CASE("onnx: dilated MaxPool against a direct loop") {
  const int N = 2, C = 3, H = 9, W = 11;
  std::vector<float> x(N * C * H * W);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.91f) * 4 - 1;
  struct cfg {
    int kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    bool ceil;
  };
  for (const cfg& c :
       {cfg{3, 3, 1, 1, 2, 2, 0, 0, 0, 0, false}, cfg{3, 2, 2, 3, 2, 3, 1, 1, 1, 0, true},
        cfg{2, 3, 2, 2, 3, 2, 1, 0, 0, 1, false}})
    for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
      kt::model_builder b({N, C, H, W}, 13);
      auto& mp = b.node("MaxPool", {"x"}, {"y"});
      kt::attr_ints(mp, "kernel_shape", {c.kh, c.kw});
      kt::attr_ints(mp, "strides", {c.sh, c.sw});
      kt::attr_ints(mp, "dilations", {c.dh, c.dw});
      kt::attr_ints(mp, "pads", {c.pt, c.pl, c.pb, c.pr});
      kt::attr_int(mp, "ceil_mode", c.ceil);
      kfuse::onnx::import_options opt;
      opt.layout = layout;
      const kfuse::onnx::model m = b.load(opt);
      auto out_extent = [&](int in, int k, int s, int d, int lo, int hi) {
        const int span = in + lo + hi - (d * (k - 1) + 1);
        int o = (c.ceil ? (span + s - 1) / s : span / s) + 1;
        if (c.ceil && (o - 1) * s >= in + lo) --o;
        return o;
      };
      const int OH = out_extent(H, c.kh, c.sh, c.dh, c.pt, c.pb);
      const int OW = out_extent(W, c.kw, c.sw, c.dw, c.pl, c.pr);
      REQUIRE(m.outputs[0].shape == std::vector<kfuse::index_t>{N, C, OH, OW});
      const kfuse::plan p = kfuse::compile(m.graph, {.threads = 2, .fork_join_ns = 0});
      std::vector<float> y(std::size_t(N * C * OH * OW), std::nanf(""));
      auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
      r.replay();
      for (int nc = 0; nc < N * C; ++nc)
        for (int oy = 0; oy < OH; ++oy)
          for (int ox = 0; ox < OW; ++ox) {
            float want = -std::numeric_limits<float>::infinity();
            for (int a = 0; a < c.kh; ++a)
              for (int bb = 0; bb < c.kw; ++bb) {
                const int iy = oy * c.sh - c.pt + a * c.dh, ix = ox * c.sw - c.pl + bb * c.dw;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                  want = std::max(want, x[std::size_t((nc * H + iy) * W + ix)]);
              }
            CHECK(y[std::size_t((nc * OH + oy) * OW + ox)] == want);
          }
    }
}

// AveragePool padded wider than half its window (an explicit pad, the pooling, a count
// correction per output position): with and without count_include_pad, ceil mode on and off,
// against a direct loop of ONNX's rule (the divisor counts the input, plus its padding with
// count_include_pad; never what lies past the bottom / right padding).
TEST_CASE("onnx: AveragePool with wide padding, against a direct loop") {
  const int N = 1, C = 2, H = 5, W = 6;
  std::vector<float> x(N * C * H * W);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(float(i) * 0.53f) * 3 + 1;
  for (int inc : {0, 1})
    for (int ceil : {0, 1})
      for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
        const int k = 3, s = 2, pt = 2, pl = 1, pb = 2, pr = 2;
        kt::model_builder b({N, C, H, W}, 13);
        auto& ap = b.node("AveragePool", {"x"}, {"y"});
        kt::attr_ints(ap, "kernel_shape", {k, k});
        kt::attr_ints(ap, "strides", {s, s});
        kt::attr_ints(ap, "pads", {pt, pl, pb, pr});
        kt::attr_int(ap, "count_include_pad", inc);
        kt::attr_int(ap, "ceil_mode", ceil);
        kfuse::onnx::import_options opt;
        opt.layout = layout;
        const kfuse::onnx::model m = b.load(opt);
        auto out_extent = [&](int in, int lo, int hi) {
          const int span = in + lo + hi - k;
          int o = (ceil ? (span + s - 1) / s : span / s) + 1;
          if (ceil && (o - 1) * s >= in + lo) --o;
          return o;
        };
        const int OH = out_extent(H, pt, pb), OW = out_extent(W, pl, pr);
        const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
        std::vector<float> y(std::size_t(N * C * OH * OW), std::nanf(""));
        auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
        r.replay();
        for (int c = 0; c < N * C; ++c)
          for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox) {
              double sum = 0;
              int cnt = 0;
              for (int a = 0; a < k; ++a)
                for (int bb = 0; bb < k; ++bb) {
                  const int iy = oy * s - pt + a, ix = ox * s - pl + bb;
                  const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
                  const bool padded = iy >= -pt && iy < H + pb && ix >= -pl && ix < W + pr;
                  if (in) sum += x[std::size_t((c * H + iy) * W + ix)];
                  if (in || (inc && padded)) ++cnt;
                }
              INFO("inc " << inc << " ceil " << ceil << " at " << oy << ", " << ox);
              CHECK(y[std::size_t((c * OH + oy) * OW + ox)] == Approx(sum / cnt).epsilon(1e-5));
            }
      }
}

// A zero Pad before a Conv (nn.ZeroPad2d) becomes the Conv's padding (no pad step); a reflect Pad
// stays a pad step; a MaxPool padded wider than half its window runs on an explicit -inf pad.
TEST_CASE("onnx: Pad folds into the next Conv, wide pooling pads, against a reference") {
  std::vector<float> x(2 * 5 * 6);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(float(i) * 0.3f);
  std::vector<float> w(3 * 2 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i) * 0.9f);
  for (const char* mode : {"constant", "reflect"}) {
    kt::model_builder b({1, 2, 5, 6}, 13);
    b.init_ints("pads", {8}, 7, {0, 0, 1, 2, 0, 0, 2, 1});
    b.init("w", {3, 2, 3, 3}, w);
    auto& pn = b.node("Pad", {"x", "pads"}, {"p"});
    auto* a = pn.add_attribute();
    a->set_name("mode");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(mode);
    b.node("Conv", {"p", "w"}, {"y"});
    const bool reflect = std::string(mode) == "reflect";
    auto src = [&](int o, int before, int n) {
      const int i = o - before;
      if (i >= 0 && i < n) return i;
      if (!reflect) return -1;
      return i < 0 ? -i : 2 * (n - 1) - i;
    };
    std::vector<double> want(3 * 6 * 7);  // padded 8 x 9, 3x3 window
    for (int k = 0; k < 3; ++k)
      for (int oh = 0; oh < 6; ++oh)
        for (int ow = 0; ow < 7; ++ow) {
          double acc = 0;
          for (int c = 0; c < 2; ++c)
            for (int r = 0; r < 3; ++r)
              for (int s = 0; s < 3; ++s) {
                const int ih = src(oh + r, 1, 5), iw = src(ow + s, 2, 6);
                if (ih < 0 || iw < 0) continue;
                acc += double(x[std::size_t((c * 5 + ih) * 6 + iw)]) *
                       w[std::size_t(((k * 2 + c) * 3 + r) * 3 + s)];
              }
          want[std::size_t((k * 6 + oh) * 7 + ow)] = acc;
        }
    for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
      INFO(mode << " layout " << kfuse::layout_name(layout));
      kfuse::onnx::import_options opt;
      opt.layout = layout;
      const kfuse::onnx::model m = b.load(opt);
      const bool folded =
          std::any_of(m.rewrites.begin(), m.rewrites.end(),
                      [](const std::string& r) { return r.find("pad: the zero Pad") == 0; });
      CHECK(folded == !reflect);
      const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
      bool has_pad = false;
      for (const auto& st : p.steps()) has_pad = has_pad || st.kernel.find("pad") == 0;
      CHECK(has_pad == reflect);
      std::vector<float> y(want.size(), std::nanf(""));
      auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
      r.replay();
      for (std::size_t i = 0; i < y.size(); ++i)
        REQUIRE(std::fabs(y[i] - want[i]) <= 1e-5 * (1 + std::fabs(want[i])));
    }
  }
  kt::model_builder mp({1, 2, 5, 6});
  auto& pool = mp.node("MaxPool", {"x"}, {"y"});
  kt::attr_ints(pool, "kernel_shape", {3, 3});
  kt::attr_ints(pool, "pads", {2, 2, 2, 2});
  const kfuse::onnx::model m = mp.load();
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  std::vector<float> y(2 * 7 * 8, std::nanf(""));
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  r.replay();
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < 7; ++oh)
      for (int ow = 0; ow < 8; ++ow) {
        float best = -std::numeric_limits<float>::infinity();
        for (int i = oh - 2; i < oh + 1; ++i)
          for (int j = ow - 2; j < ow + 1; ++j)
            if (i >= 0 && i < 5 && j >= 0 && j < 6)
              best = std::max(best, x[std::size_t((c * 5 + i) * 6 + j)]);
        REQUIRE(y[std::size_t((c * 7 + oh) * 8 + ow)] == best);
      }
}

// ONNX's empty tensors: an empty input is bound (an empty buffer) and never read, ops on empty
// values run at load time, a Slice of run-time data that selects nothing is an empty constant,
// Concat drops empty operands, and empty results are empty outputs. Data that is empty where a
// kernel would read it is an error naming the node.
TEST_CASE("onnx: empty tensors are bound and returned, never computed on") {
  kt::model_builder b({5, 4});
  auto* e = b.m.mutable_graph()->add_input();  // a second input, empty
  e->set_name("e");
  auto* et = e->mutable_type()->mutable_tensor_type();
  et->set_elem_type(1);
  for (int d : {0, 3, 4}) et->mutable_shape()->add_dim()->set_dim_value(d);
  b.init_ints("shape", {3}, 7, {3, 4, 0});
  kt::attr_int(b.node("Reshape", {"e", "shape"}, {"er"}), "allowzero", 1);
  b.init_ints("starts", {1}, 7, {10});
  b.init_ints("ends", {1}, 7, {20});
  b.init_ints("axes", {1}, 7, {0});
  b.node("Slice", {"x", "starts", "ends", "axes"}, {"none"});  // rows 10..20 of 5: [0, 4]
  kt::attr_int(b.node("Concat", {"none", "x", "none"}, {"y"}), "axis", 0);
  b.m.mutable_graph()->add_output()->set_name("none");
  b.m.mutable_graph()->add_output()->set_name("er");
  const kfuse::onnx::model m = b.load();
  REQUIRE(m.inputs.size() == 2);
  CHECK(m.inputs[1].shape == std::vector<kfuse::index_t>{0, 3, 4});
  REQUIRE(m.outputs.size() == 3);
  CHECK(m.outputs[1].shape == std::vector<kfuse::index_t>{0, 4});
  CHECK(m.outputs[2].shape == std::vector<kfuse::index_t>{3, 4, 0});
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  std::vector<float> x(20), empty, y(20, std::nanf("")), none, er;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) - 7.5f;
  kfuse::replay_buffer r = p.record({kfuse::bind(x), kfuse::bind(empty)},
                                    {kfuse::bind(y), kfuse::bind(none), kfuse::bind(er)});
  r.replay();
  CHECK(y == x);

  // Empty data read by a kernel: refused at load time, naming the node.
  kt::model_builder bad({5, 4});
  bad.init_ints("starts", {1}, 7, {10});
  bad.init_ints("ends", {1}, 7, {20});
  bad.init_ints("axes", {1}, 7, {0});
  bad.node("Slice", {"x", "starts", "ends", "axes"}, {"none"});
  bad.node("Softmax", {"none"}, {"y"}, "sm");  // no load-time evaluation of Softmax
  CHECK_THROWS_WITH(bad.load(), Catch::Contains("'sm'") && Catch::Contains("'none' is empty"));
}

// Tile of every axis of a 4-D tensor needs an 8-D view; it runs in two copies of <= 6-D views.
TEST_CASE("onnx: Tile of every axis of a 4-D tensor, against a direct loop") {
  const std::vector<std::int64_t> s = {2, 3, 4, 5}, reps = {2, 3, 2, 2};
  kt::model_builder b(s);
  b.init_ints("reps", {4}, 7, {2, 3, 2, 2});
  b.node("Tile", {"x", "reps"}, {"y"});
  std::vector<float> x(120);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
    kfuse::onnx::import_options opt;
    opt.layout = layout;
    const kfuse::plan p = kfuse::compile(b.load(opt).graph, {.threads = 2});
    std::vector<float> y(120 * 24, std::nanf(""));
    p.run({kfuse::bind(x)}, {kfuse::bind(y)});
    std::size_t k = 0, wrong = 0;
    for (std::int64_t a = 0; a < 4; ++a)
      for (std::int64_t c = 0; c < 9; ++c)
        for (std::int64_t h = 0; h < 8; ++h)
          for (std::int64_t w = 0; w < 10; ++w)
            wrong += y[k++] != x[std::size_t(((a % 2 * 3 + c % 3) * 4 + h % 4) * 5 + w % 5)];
    CHECK(wrong == 0);
  }
}

// A float16 model input and a bfloat16 output: graph tensors of those types, cast at the edges;
// a Cast to float16 in the middle rounds to float16.
TEST_CASE("onnx: float16 and bfloat16 inputs and outputs are cast at the edges") {
  kt::model_builder b({2, 3}, 17, 10);
  b.node("Relu", {"x"}, {"r"});
  kt::attr_int(b.node("Cast", {"r"}, {"h"}), "to", 10);  // float16 again: exact
  b.node("Mul", {"h", "k"}, {"y"});
  b.init("k", {1}, {1.0f / 3});
  b.m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(16);
  const kfuse::onnx::model m = b.load();
  CHECK(m.inputs.at(0).type == kfuse::dtype::f16);
  CHECK(m.outputs.at(0).type == kfuse::dtype::bf16);
  CHECK(m.outputs.at(0).onnx_type == 16);
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  const std::vector<float> xf = {-1.5f, 0.f, 1.f, 2.5f, 1000.f, 65504.f};
  std::vector<kfuse::f16_t> x;
  for (float v : xf) x.push_back(kfuse::to_f16(v));
  std::vector<kfuse::bf16_t> y(6);
  p.run({kfuse::bind(x)}, {kfuse::bind(y)});
  for (std::size_t i = 0; i < xf.size(); ++i)
    CHECK(kfuse::to_float(y[i]) ==
          kfuse::to_float(kfuse::to_bf16(std::max(xf[i], 0.f) * (1.0f / 3))));
  std::vector<float> wrong(6);
  CHECK_THROWS_WITH(p.run({kfuse::bind(wrong)}, {kfuse::bind(y)}),
                    Catch::Contains("buffer of f32, the plan's tensor holds f16"));
}
