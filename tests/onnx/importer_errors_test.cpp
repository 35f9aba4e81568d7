// Bad models get a kfuse::error that names the node, its op type and the problem, never a crash
// or an unbounded allocation: unsupported ops, attributes and dtypes, unbound dimensions, wrong
// options, corrupt bytes, tensors whose sizes lie, hostile external data paths.
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kfuse/onnx/importer.hpp"
#include "onnx/model_builder.hpp"

namespace {

using Catch::Matchers::Contains;
using kt::attr_int;
using kt::model_builder;

}  // namespace

TEST_CASE("onnx errors: unsupported ops, domains and attributes name the node") {
  {
    model_builder b({1, 4});
    b.node("Trilu", {"x"}, {"y"}, "tri");
    CHECK_THROWS_WITH(b.load(), Contains("node 'tri' (Trilu)") && Contains("not supported"));
  }
  {
    model_builder b({1, 4});
    b.node("FusedGemm", {"x"}, {"y"}, "fg").set_domain("com.microsoft");
    CHECK_THROWS_WITH(b.load(), Contains("node 'fg' (FusedGemm)") && Contains("com.microsoft"));
  }
  {
    model_builder b({1, 4});
    attr_int(b.node("Relu", {"x"}, {"y"}, "r"), "alpha_typo", 1);
    // Relu has no attribute parser of its own: a stray attribute on LeakyRelu is an error.
    model_builder l({1, 4});
    attr_int(l.node("LeakyRelu", {"x"}, {"y"}, "lr"), "beta", 1);
    CHECK_THROWS_WITH(l.load(), Contains("node 'lr' (LeakyRelu)") && Contains("'beta'"));
  }
  {
    model_builder b({1, 4});  // Range of run-time bounds: a shape known only at run time
    b.init("d", {}, {1});
    b.node("ReduceMax", {"x"}, {"m"});
    b.node("Range", {"d", "m", "d"}, {"y"}, "e");
    CHECK_THROWS_WITH(b.load(), Contains("node 'e' (Range)") && Contains("constants only"));
  }
  {
    model_builder b({1, 4});
    auto& n = b.node("Celu", {"x"}, {"y"}, "c");
    auto* a = n.add_attribute();
    a->set_name("alpha");
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(0.f);
    CHECK_THROWS_WITH(b.load(), Contains("node 'c' (Celu)") && Contains("alpha must not be 0"));
  }
  {
    model_builder b({1, 4});
    b.init("base", {1}, {-2.f});
    b.node("Pow", {"base", "x"}, {"y"}, "p");
    CHECK_THROWS_WITH(b.load(), Contains("node 'p' (Pow)") && Contains("constant base"));
  }
  {
    model_builder b({1, 2, 3, 3});
    b.init("w", {2, 2, 1, 1}, {1, 0, 0, 1});
    auto& n = b.node("Conv", {"x", "w"}, {"y"}, "c");
    auto* a = n.add_attribute();
    a->set_name("auto_pad");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s("SAME_SIDEWAYS");
    CHECK_THROWS_WITH(b.load(), Contains("node 'c' (Conv)") && Contains("SAME_SIDEWAYS"));
  }
  {
    model_builder b({1, 2, 3, 3});
    b.node("Conv", {"x", "x"}, {"y"}, "c");  // run-time weights
    CHECK_THROWS_WITH(b.load(), Contains("node 'c' (Conv)") && Contains("must be a constant"));
  }
  {
    model_builder b({1, 4});
    b.node("Relu", {"nowhere"}, {"y"}, "r");
    CHECK_THROWS_WITH(b.load(), Contains("node 'r' (Relu)") && Contains("'nowhere'"));
  }
}

TEST_CASE("onnx errors: dimensions, options, opsets and input types") {
  {
    model_builder b({-1, 4});
    b.node("Relu", {"x"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("'batch'") && Contains("symbolic"));
    kfuse::onnx::import_options opt;
    opt.dims["batch"] = 3;
    const auto m = b.load(opt);
    CHECK(m.inputs[0].shape == std::vector<kfuse::index_t>{3, 4});
    opt.dims["batc"] = 3;
    CHECK_THROWS_WITH(b.load(opt), Contains("'batc'"));
  }
  {
    model_builder b({2, 4});
    b.node("Relu", {"x"}, {"y"});
    kfuse::onnx::import_options opt;
    opt.shapes["x"] = {3, 4};
    CHECK_THROWS_WITH(b.load(opt), Contains("input 'x'") && Contains("dimension 0"));
    opt.shapes.clear();
    opt.shapes["z"] = {2, 4};
    CHECK_THROWS_WITH(b.load(opt), Contains("'z'") && Contains("not an input"));
    opt.shapes.clear();
    opt.shapes["x"] = {2, 4, 1};
    CHECK_THROWS_WITH(b.load(opt), Contains("3 dimensions"));
  }
  {
    model_builder b({2, 4}, 19);
    b.node("Relu", {"x"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("opset 19"));
  }
  {
    model_builder b({2, 4});
    b.m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(7);
    b.node("Relu", {"x"}, {"y"});  // int64 inputs are ids and masks: a float op names the type
    CHECK_THROWS_WITH(b.load(),
                      Contains("node 'y' (Relu): input 'x' is i64, this op takes float32"));
  }
  {
    model_builder b({2, 4});  // uint16 inputs: no graph type
    b.m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(4);
    b.node("Relu", {"x"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("input 'x' is uint16"));
  }
  {
    model_builder b({2, -3});  // a negative extent given for the input
    b.node("Relu", {"x"}, {"y"});
    kfuse::onnx::import_options o;
    o.shapes["x"] = {2, -3};
    CHECK_THROWS_WITH(b.load(o), Contains("input 'x': extent -3 in [2, -3] is negative"));
  }
  {
    model_builder b({2, 0});  // an empty input: Relu of it is evaluated at load time
    b.node("Relu", {"x"}, {"y"});
    const kfuse::onnx::model m = b.load();
    CHECK(m.outputs.at(0).shape == std::vector<kfuse::index_t>{2, 0});
  }
  {
    model_builder b({1 << 30, 1 << 30});
    b.node("Relu", {"x"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("too large"));
  }
}

TEST_CASE("onnx errors: bool, integer and opset-18 ops name the node and the problem") {
  {
    model_builder b({2, 3});
    b.init("a", {4}, {1, 2, 3, 4});
    b.node("Less", {"x", "x"}, {"c"});
    b.node("Where", {"c", "x", "a"}, {"y"}, "w");
    CHECK_THROWS_WITH(b.load(), Contains("node 'w' (Where)") && Contains("do not broadcast"));
  }
  {
    model_builder b({2, 6, 2, 2}, 18);
    b.init("s", {6}, {1, 1, 1, 1, 1, 1});
    b.init("b", {6}, {0, 0, 0, 0, 0, 0});
    attr_int(b.node("GroupNormalization", {"x", "s", "b"}, {"y"}, "gn"), "num_groups", 4);
    CHECK_THROWS_WITH(b.load(), Contains("node 'gn' (GroupNormalization)") &&
                                    Contains("num_groups 4 must divide the 6 channels"));
  }
  {
    model_builder b({2, 6}, 18);
    auto& n = b.node("Split", {"x"}, {"y", "z"}, "sp");
    attr_int(n, "axis", 1);
    attr_int(n, "num_outputs", 3);
    b.m.mutable_graph()->add_output()->set_name("z");
    CHECK_THROWS_WITH(b.load(), Contains("node 'sp' (Split)") && Contains("num_outputs 3"));
  }
  {
    model_builder b({1, 1, 4, 4}, 18);
    b.init("roi", {0}, {});
    b.init("scales", {4}, {1, 1, 0.5f, 0.5f});
    attr_int(b.node("Resize", {"x", "roi", "scales"}, {"y"}, "rs"), "antialias", 1);
    CHECK_THROWS_WITH(b.load(), Contains("node 'rs' (Resize)") && Contains("antialias"));
  }
  {
    // A uint8 tensor quantized with its own scale: a Cast of its integers is refused.
    model_builder b({4});
    b.init("s", {}, {0.5f});
    b.init_ints("z", {}, 2, {3});
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
    attr_int(b.node("Cast", {"q"}, {"y"}, "c"), "to", 1);
    CHECK_THROWS_WITH(b.load(), Contains("node 'c' (Cast)") && Contains("quantized with scale"));
  }
}

TEST_CASE("onnx errors: tensors whose sizes lie, hostile dims") {
  {
    model_builder b({1, 2});
    b.init("w", {3, 2}, {1, 2, 3, 4});  // 4 values for 6
    b.node("MatMul", {"x", "w"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("initializer 'w'") && Contains("holds 4 values"));
  }
  {
    model_builder b({1, 2});
    auto& t = b.init("w", {2, 3}, {});
    t.set_raw_data(std::string(10, '\0'));  // 10 bytes for 24
    b.node("MatMul", {"x", "w"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("initializer 'w'") && Contains("raw data has 10 bytes"));
  }
  {
    model_builder b({1, 2});
    b.init("w", {2, -3}, {});
    b.node("MatMul", {"x", "w"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("negative dimension"));
  }
  {
    model_builder b({1, 2});
    b.init("w", {1ll << 40, 1ll << 40}, {});  // would be 2^82 floats: refused before allocating
    b.node("MatMul", {"x", "w"}, {"y"});
    CHECK_THROWS_WITH(b.load(), Contains("initializer 'w'") && Contains("too many elements"));
  }
  {
    model_builder b({1, 2});
    auto& t = b.init("w", {2, 2}, {});
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* e = t.add_external_data();
    e->set_key("location");
    e->set_value("../../etc/passwd");
    b.node("MatMul", {"x", "w"}, {"y"});
    // From bytes: no folder, no external data at all.
    CHECK_THROWS_WITH(b.load(), Contains("external data"));
    // From a file: a location outside the model's folder is refused.
    const auto dir = std::filesystem::temp_directory_path() / "kfuse_onnx_ext";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "m.onnx", std::ios::binary) << b.bytes();
    CHECK_THROWS_WITH(kfuse::onnx::load(dir / "m.onnx"), Contains("escapes the model's folder"));
    e->set_value("/etc/passwd");
    std::ofstream(dir / "m.onnx", std::ios::binary) << b.bytes();
    CHECK_THROWS_WITH(kfuse::onnx::load(dir / "m.onnx"), Contains("absolute"));
    // A good location inside the folder: read, with its size checked against the dims.
    e->set_value("w.bin");
    const float w[4] = {1, 2, 3, 4};
    std::ofstream(dir / "w.bin", std::ios::binary).write(reinterpret_cast<const char*>(w), 12);
    std::ofstream(dir / "m.onnx", std::ios::binary) << b.bytes();
    CHECK_THROWS_WITH(kfuse::onnx::load(dir / "m.onnx"), Contains("12 bytes"));
    std::ofstream(dir / "w.bin", std::ios::binary).write(reinterpret_cast<const char*>(w), 16);
    CHECK_NOTHROW(kfuse::onnx::load(dir / "m.onnx"));
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("onnx errors: files that are not models") {
  const std::string junk = "this is not a protobuf \xff\xff\xff";
  CHECK_THROWS_WITH(kfuse::onnx::load_bytes(std::span<const std::byte>(
                        reinterpret_cast<const std::byte*>(junk.data()), junk.size())),
                    Contains("not a valid ONNX model"));
  CHECK_THROWS_WITH(kfuse::onnx::load("/nonexistent/model.onnx"), Contains("cannot open"));
  model_builder b({1, 4});
  b.node("Relu", {"x"}, {"y"});
  const std::string good = b.bytes();
  kfuse::onnx::import_options small;
  small.max_bytes = 8;
  CHECK_THROWS_WITH(
      kfuse::onnx::load_bytes(
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(good.data()), good.size()),
          small),
      Contains("above the limit"));
}
