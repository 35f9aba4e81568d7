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

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/tools/npy.hpp"

namespace {

const std::string models = KFUSE_ONNX_TEST_MODELS;

std::vector<float> load_f32(const std::string& file) {
  return kfuse::npy_to_f32(kfuse::read_npy(file));
}

// Runs model `name` on its saved input and returns the largest error relative to tolerance
// (<= 1 passes).
double run_model(const std::string& name, kfuse::tensor_layout layout, int threads,
                 kfuse::onnx::model* out = nullptr) {
  kfuse::onnx::import_options opt;
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
  for (const char* name : {"small_cnn_b1", "mlp_b3", "conv1d_b2", "decomposed_b2", "upsampling_b2",
                           "layernorm_op12_b2", "encoder_b2"})
    for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc})
      for (int threads : {1, 2}) {
        INFO(name << " layout " << kfuse::layout_name(layout) << " threads " << threads);
        CHECK(run_model(name, layout, threads) <= 1.0);
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

TEST_CASE("onnx: supported_ops lists the default-domain ops, sorted") {
  const auto ops = kfuse::onnx::supported_ops();
  CHECK(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"Conv", "Gemm", "MatMul", "Relu", "MaxPool", "Reshape", "Softmax"})
    CHECK(std::find(ops.begin(), ops.end(), op) != ops.end());
  for (const std::string& op : ops) CHECK(op.find('.') == std::string::npos);
}
