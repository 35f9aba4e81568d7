// kfuse::onnx::export_qdq: models built in code are calibrated by kfuse, written in QDQ form and
// read back. The QDQ file holds kfuse's own int8 weights (the integers of
// quantize_weights_per_row), a Q -> DQ pair after each calibrated activation, int32 biases at the
// input's scale x the weight's, and imports into a plan that matches the f32 plan within int8
// accuracy. Bad requests throw kfuse::error naming the tensor.
//
// Tolerance: 8-bit activations and weights on K <= 36 terms of size ~1; each quantization step
// is at most 1/255 of the tensor's range, and three layers compound it: 4% of the output's
// range, against errors of order 1 for a wrong weight order, axis or scale.
#include "kfuse/onnx/export_qdq.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/kernels/gemm/quantize_weights.hpp"
#include "kfuse/onnx/importer.hpp"
#include "kfuse/tools/calibrate_graph.hpp"
#include "onnx/model_builder.hpp"
#include "support/test_support.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  kt::fill_random(v.data(), kfuse::index_t(n), rng, -1.f, 1.f);
  return v;
}

/// Conv 4 -> 8 (3x3, bias) -> Relu -> GlobalAveragePool -> Flatten -> Gemm (transB) -> MatMul.
kt::model_builder cnn(std::int64_t opset = 17) {
  kt::model_builder b({1, 4, 6, 6}, opset);
  b.init("w", {8, 4, 3, 3}, random_values(8 * 4 * 9, 1));
  b.init("b", {8}, random_values(8, 2));
  b.init("fc", {6, 8}, random_values(6 * 8, 3));
  b.init("fc_b", {6}, random_values(6, 4));
  b.init("head", {6, 5}, random_values(6 * 5, 5));
  kt::attr_ints(b.node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.node("GlobalAveragePool", {"r"}, {"p"});
  b.node("Flatten", {"p"}, {"f"});
  kt::attr_int(b.node("Gemm", {"f", "fc", "fc_b"}, {"g"}), "transB", 1);
  b.node("MatMul", {"g", "head"}, {"y"});
  return b;
}

fs::path write(const kt::model_builder& b, const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("kfuse_export_qdq_" + name + ".onnx");
  std::ofstream(p, std::ios::binary) << b.bytes();
  return p;
}

::onnx::ModelProto read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromIstream(&f));
  return m;
}

const ::onnx::TensorProto& initializer(const ::onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t;
  FAIL("no initializer " << name);
  throw;
}

std::vector<float> run(const kfuse::onnx::model& m, const std::vector<float>& x) {
  const kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  std::vector<float> y(std::size_t(p.output(0).bytes / sizeof(float)), -999.f);  // poison
  kfuse::replay_buffer r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  r.replay();
  return y;
}

/// The tensors `names` of the model at `p` calibrated by kfuse on input `x`.
std::vector<kfuse::onnx::qdq_activation> calibrate(const fs::path& p,
                                                   const std::vector<std::string>& names,
                                                   const std::vector<float>& x) {
  const kfuse::onnx::model m = kfuse::onnx::load(p);
  std::vector<kfuse::tensor_id> ids;
  for (const std::string& n : names) ids.push_back(m.values.at(n));  // by ONNX name
  const std::vector<std::vector<kfuse::binding>> samples{{kfuse::bind(x)}};
  const kfuse::graph_calibration cal = kfuse::calibrate_graph_with(
      [](const kfuse::graph& g, const kfuse::compile_options& o) { return kfuse::compile(g, o); },
      m.graph, ids, std::span<const std::vector<kfuse::binding>>(samples));
  std::vector<kfuse::onnx::qdq_activation> act;
  for (std::size_t i = 0; i < names.size(); ++i)
    act.push_back({names[i], cal.quant[i].scale, cal.quant[i].zero_point});
  return act;
}

}  // namespace

TEST_CASE("export_qdq: the activations are each linear node's input and post-Relu output") {
  const fs::path p = write(cnn(), "names");
  CHECK(kfuse::onnx::qdq_activation_names(p) == std::vector<std::string>{"x", "r", "f", "g", "y"});
}

TEST_CASE("export_qdq: kfuse's weights and calibration, read back within int8 accuracy") {
  const fs::path p = write(cnn(), "cnn"), q = p.parent_path() / "kfuse_export_qdq_cnn.qdq.onnx";
  const std::vector<float> x = random_values(4 * 6 * 6, 7);
  const auto act = calibrate(p, kfuse::onnx::qdq_activation_names(p), x);
  const kfuse::onnx::qdq_export_report rep = kfuse::onnx::export_qdq(p, q, act);
  CHECK(rep.quantized.size() == 3);
  CHECK(rep.kept_float.empty());
  CHECK(rep.activations == 5);

  const ::onnx::ModelProto m = read(q);
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) ++ops[n.op_type()];
  CHECK(ops["QuantizeLinear"] == 5);
  CHECK(ops["DequantizeLinear"] == 5 + 3 + 2);  // activations, weights, biases
  for (const auto& t : m.graph().initializer())
    CHECK((t.name() != "w" && t.name() != "fc" && t.name() != "head" && t.name() != "b"));

  // The conv's integers are quantize_weights_per_row's, row by output channel; the MatMul's
  // [K, N] weight is quantized per column.
  const std::vector<float> w = random_values(8 * 4 * 9, 1);
  const kfuse::int8_weights wq = kfuse::quantize_weights_per_row(w, 8);
  const std::string& raw = initializer(m, "w_quantized").raw_data();
  REQUIRE(raw.size() == wq.values.size());
  CHECK(std::equal(wq.values.begin(), wq.values.end(),
                   reinterpret_cast<const std::int8_t*>(raw.data())));
  const auto& head_scale = initializer(m, "head_scale");
  CHECK(head_scale.dims(0) == 5);
  const std::vector<float> head = random_values(6 * 5, 5);
  float col0 = 0.f;
  for (int k = 0; k < 6; ++k) col0 = std::max(col0, std::fabs(head[std::size_t(k * 5)]));
  CHECK(reinterpret_cast<const float*>(head_scale.raw_data().data())[0] == col0 / 127.f);
  // The bias: int32 at the input's scale x the weight's, zero point 0.
  const auto& bias = initializer(m, "c_bias_quantized");
  CHECK(bias.data_type() == 6);
  const float b0 = random_values(8, 2)[0];
  const float bias_scale = act[0].scale * wq.scales[0];
  CHECK(reinterpret_cast<const std::int32_t*>(bias.raw_data().data())[0] ==
        std::int32_t(std::nearbyint(b0 / bias_scale)));

  // Read back by kfuse's importer: the QDQ model's plan follows the f32 one.
  const std::vector<float> ref = run(kfuse::onnx::load(p), x);
  const std::vector<float> got = run(kfuse::onnx::load(q), x);
  REQUIRE(got.size() == ref.size());
  float range = 0.f, err = 0.f;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    range = std::max(range, std::fabs(ref[i]));
    err = std::max(err, std::fabs(got[i] - ref[i]));
  }
  CHECK(err <= 0.04f * range);
  CHECK(err > 0.f);  // it did run quantized
}

TEST_CASE("export_qdq: a node whose input has no parameters stays float") {
  const fs::path p = write(cnn(), "partial"),
                 q = p.parent_path() / "kfuse_export_qdq_partial.q.onnx";
  const kfuse::onnx::qdq_export_report rep =
      kfuse::onnx::export_qdq(p, q, std::vector<kfuse::onnx::qdq_activation>{{"x", 0.01f, 128}});
  CHECK(rep.quantized == std::vector<std::string>{"c (Conv)"});
  REQUIRE(rep.kept_float.size() == 2);
  CHECK(rep.kept_float[0] == "g (Gemm): its input 'f' has no quantization parameters");
  const ::onnx::ModelProto m = read(q);
  CHECK(initializer(m, "fc").dims(0) == 6);  // still read by the float Gemm
}

TEST_CASE("export_qdq: bad requests name the problem") {
  const fs::path p = write(cnn(), "errors"), q = p.parent_path() / "kfuse_export_qdq_errors.q.onnx";
  using act = kfuse::onnx::qdq_activation;
  auto fails = [&](std::vector<act> a, const std::string& what) {
    CHECK_THROWS_WITH(kfuse::onnx::export_qdq(p, q, a), Catch::Contains(what));
  };
  fails({{"nope", 0.1f, 0}}, "'nope' is not an activation of the model");
  fails({{"w", 0.1f, 0}}, "'w' is not an activation");
  fails({{"x", 0.f, 0}}, "'x': the scale 0.000000 is not positive and finite");
  fails({{"x", NAN, 0}}, "is not positive and finite");
  fails({{"x", 0.1f, 256}}, "'x': the zero point 256 is outside [0, 255]");
  const fs::path old = write(cnn(12), "opset12");
  CHECK_THROWS_WITH(kfuse::onnx::export_qdq(old, q, std::vector<act>{}),
                    Catch::Contains("opset is 12; per-channel DequantizeLinear needs 13"));
  CHECK_THROWS_WITH(
      kfuse::onnx::export_qdq(p.parent_path() / "kfuse_missing.onnx", q, std::vector<act>{}),
      Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(kfuse::onnx::export_qdq(p, "/nonexistent/dir/q.onnx", std::vector<act>{}),
                    Catch::Contains("cannot write"));
}
