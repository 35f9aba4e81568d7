// ONNX conformance: Debian's libonnx-testdata node cases of every operator listed below,
// loaded, compiled and replayed in fp32, NCHW and NHWC, against ONNX's expected outputs with
// ONNX's backend-test tolerances (rtol 1e-3, atol 1e-7; float32 outputs). Each case ends as
// passed, or unsupported with the importer's error (a kfuse::error naming the limitation), or
// failed (wrong values, or any other exception): the test requires 0 failures. A case's
// inputs are run-time inputs where the importer takes run-time data for them; weights,
// shapes, axes and indices become initializers (as an exporter writes them) when it does not.
//
// KFUSE_ONNX_TABLE=FILE writes the per-op table as markdown (scripts/onnx_conformance.sh puts it
// in docs/onnx.md).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/onnx/importer.hpp"
#include "kfuse/types/convert.hpp"

namespace fs = std::filesystem;

namespace {

// The operators the importer supports (added here as they land).
const std::set<std::string> listed = {
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min",
    "Mean", "Sum", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Neg", "Abs", "Floor", "Ceil", "Sign",
    "Where", "Equal", "Less", "Greater", "Not", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
    "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish",
    "Tanh", "Softplus", "Softsign", "Clip", "Gelu", "Mish", "Softmax", "LogSoftmax",
    "BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
    "ReduceLogSumExp", "ArgMax", "ArgMin", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Concat", "Split",
    "Slice", "Gather", "Pad", "Tile", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Shape",
    "Size", "Cast", "Constant", "ConstantOfShape", "Range", "Identity", "Dropout", "QuantizeLinear",
    "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger",
    "DynamicQuantizeLinear",
    // transformer encoders
    "Transpose",
    // shape arithmetic (Swin)
    "Mod", "ScatterND"};

const fs::path data_root = "/usr/share/libonnx-testdata/data/node";

enum class verdict { passed, unsupported, failed };

struct result {
  verdict v = verdict::passed;
  std::string why;
  bool folded = false;  // passed only with every input a constant (evaluated at load time)
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// The reason of an importer error without the node's name (the table groups by reason).
std::string reason_of(const std::string& what) {
  std::string r = what;
  if (const auto p = r.find("): "); p != std::string::npos && r.rfind("onnx: node", 0) == 0)
    r = r.substr(p + 3);
  return r.size() > 110 ? r.substr(0, 107) + "..." : r;
}

// An integer tensor bound to the plan in the graph's element type (u8 for ONNX bool / uint8,
// i8, i32, i64), its values read back as int64.
struct int_buffer {
  kfuse::dtype type = kfuse::dtype::i64;
  std::vector<std::uint8_t> u8;
  std::vector<std::int8_t> i8;
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;

  void assign(kfuse::dtype t, const std::vector<std::int64_t>& v) {
    type = t;
    switch (t) {
      case kfuse::dtype::u8:
        u8.assign(v.begin(), v.end());
        break;
      case kfuse::dtype::i8:
        i8.assign(v.begin(), v.end());
        break;
      case kfuse::dtype::i32:
        i32.assign(v.begin(), v.end());
        break;
      default:
        i64 = v;
    }
  }
  kfuse::binding binding() {
    switch (type) {
      case kfuse::dtype::u8:
        return kfuse::bind(u8);
      case kfuse::dtype::i8:
        return kfuse::bind(i8);
      case kfuse::dtype::i32:
        return kfuse::bind(i32);
      default:
        return kfuse::bind(i64);
    }
  }
  std::vector<std::int64_t> values() const {
    switch (type) {
      case kfuse::dtype::u8:
        return {u8.begin(), u8.end()};
      case kfuse::dtype::i8:
        return {i8.begin(), i8.end()};
      case kfuse::dtype::i32:
        return {i32.begin(), i32.end()};
      default:
        return i64;
    }
  }
};

// A float16 / bfloat16 tensor bound to the plan. ONNX's test data holds such a tensor as its
// float values (float16) or as the raw bits in a uint16 tensor (bfloat16, libonnx-testdata 1.12).
struct narrow_buffer {
  kfuse::dtype type = kfuse::dtype::f16;
  std::vector<kfuse::f16_t> h;
  std::vector<kfuse::bf16_t> b;

  static bool holds(kfuse::dtype t) { return t == kfuse::dtype::f16 || t == kfuse::dtype::bf16; }
  void assign(kfuse::dtype t, const kfuse::onnx::tensor_data& d) {
    type = t;
    const std::size_t n = d.is_float ? d.f.size() : d.i.size();
    h.assign(t == kfuse::dtype::f16 ? n : 0, kfuse::f16_t{});
    b.assign(t == kfuse::dtype::bf16 ? n : 0, kfuse::bf16_t{});
    for (std::size_t i = 0; i < n; ++i) {
      const auto bits = std::uint16_t(d.is_float ? 0 : d.i[i]);
      if (t == kfuse::dtype::f16)
        h[i] = d.is_float ? kfuse::to_f16(d.f[i]) : kfuse::f16_t{bits};
      else
        b[i] = d.is_float ? kfuse::to_bf16(d.f[i]) : kfuse::bf16_t{bits};
    }
  }
  kfuse::binding binding() { return type == kfuse::dtype::f16 ? kfuse::bind(h) : kfuse::bind(b); }
  std::vector<float> values() const {
    std::vector<float> v;
    for (const auto x : h) v.push_back(kfuse::to_float(x));
    for (const auto x : b) v.push_back(kfuse::to_float(x));
    return v;
  }
};

// Runs one case with the inputs in `as_init` moved into initializers.
result run_case(const ::onnx::ModelProto& model, const std::vector<std::string>& input_pb,
                const std::vector<std::string>& output_pb, const std::vector<bool>& as_init,
                kfuse::tensor_layout layout) {
  ::onnx::ModelProto m = model;
  auto* g = m.mutable_graph();
  std::vector<::onnx::ValueInfoProto> keep;
  std::vector<kfuse::onnx::tensor_data> runtime_inputs;
  for (int k = 0; k < g->input_size(); ++k) {
    const std::string name = g->input(k).name();
    if (std::size_t(k) >= input_pb.size()) return {verdict::unsupported, "case without input data"};
    if (as_init[std::size_t(k)]) {
      ::onnx::TensorProto t;
      if (!t.ParseFromString(input_pb[std::size_t(k)])) return {verdict::failed, "bad test data"};
      t.set_name(name);
      // libonnx-testdata 1.12 stores bfloat16 / float16 inputs as uint16 bits: the model's type.
      const std::int32_t declared = g->input(k).type().tensor_type().elem_type();
      if (t.data_type() == 4 && (declared == 10 || declared == 16)) t.set_data_type(declared);
      *g->add_initializer() = t;
    } else {
      keep.push_back(g->input(k));
      runtime_inputs.push_back(kfuse::onnx::read_tensor(as_bytes(input_pb[std::size_t(k)])));
    }
  }
  g->clear_input();
  for (auto& vi : keep) *g->add_input() = vi;
  kfuse::onnx::import_options opt;
  opt.layout = layout;
  for (std::size_t k = 0; k < keep.size(); ++k)
    opt.shapes[keep[k].name()] = runtime_inputs[k].shape;
  kfuse::onnx::model km;
  try {
    km = kfuse::onnx::load_bytes(as_bytes(m.SerializeAsString()), opt);
  } catch (const kfuse::error& e) {
    return {verdict::unsupported, reason_of(e.what())};
  }
  try {
    kfuse::plan p = kfuse::compile(km.graph, {.threads = 1, .fork_join_ns = 0});
    std::vector<std::vector<float>> outs(km.outputs.size());
    std::vector<int_buffer> int_ins(runtime_inputs.size()), int_outs(km.outputs.size());
    std::vector<kfuse::binding> in_b, out_b;
    std::vector<narrow_buffer> narrow_ins(runtime_inputs.size()), narrow_outs(km.outputs.size());
    for (std::size_t k = 0; k < runtime_inputs.size(); ++k) {
      auto& t = runtime_inputs[k];
      if (narrow_buffer::holds(km.inputs[k].type)) {
        narrow_ins[k].assign(km.inputs[k].type, t);
        in_b.push_back(narrow_ins[k].binding());
        continue;
      }
      if (t.is_float) {
        in_b.push_back(kfuse::bind(t.f));
        continue;
      }
      int_ins[k].assign(km.inputs[k].type, t.i);
      in_b.push_back(int_ins[k].binding());
    }
    std::vector<kfuse::onnx::tensor_data> expected;
    for (std::size_t k = 0; k < km.outputs.size(); ++k) {
      expected.push_back(kfuse::onnx::read_tensor(as_bytes(output_pb.at(k))));
      if (narrow_buffer::holds(km.outputs[k].type)) {  // float16 / bfloat16: compared as float
        narrow_buffer want;
        want.assign(km.outputs[k].type, expected.back());
        expected.back().f = want.values();
        expected.back().is_float = true;
        narrow_outs[k].assign(km.outputs[k].type, expected.back());
        out_b.push_back(narrow_outs[k].binding());
        continue;
      }
      if (!expected.back().is_float) {  // integer and bool outputs: compared exactly
        if (km.outputs[k].onnx_type != expected.back().onnx_type)
          return {verdict::unsupported,  // bfloat16 / float16 data stored as uint16 bits
                  "output of ONNX type " + std::to_string(expected.back().onnx_type) +
                      ": kfuse's is " + std::to_string(km.outputs[k].onnx_type)};
        int_outs[k].assign(km.outputs[k].type,
                           std::vector<std::int64_t>(expected.back().i.size(), 123));
        out_b.push_back(int_outs[k].binding());
        continue;
      }
      outs[k].assign(expected.back().f.size(), std::nanf(""));
      out_b.push_back(kfuse::bind(outs[k]));
    }
    kfuse::replay_buffer r = p.record(in_b, out_b);
    r.replay();
    for (std::size_t k = 0; k < outs.size(); ++k)
      if (narrow_buffer::holds(km.outputs[k].type)) outs[k] = narrow_outs[k].values();
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (!expected[k].is_float) {
        if (int_outs[k].values() != expected[k].i)
          return {verdict::failed, "output " + std::to_string(k) + ": integer values differ"};
        continue;
      }
      const auto& want = expected[k].f;
      // bfloat16 results: one bf16 step (<= 2^-7 relative). libonnx-testdata 1.12 truncates float32
      // to bfloat16; kfuse rounds to nearest even, as the ONNX spec (and its reference since
      // 1.14) says, so the two differ by a step where the dropped bits are >= half of one.
      const double rtol = km.outputs[k].type == kfuse::dtype::bf16 ? 1.0 / 128 : 1e-3;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double a = outs[k][i], b = want[i];
        const bool same_nan = std::isnan(a) && std::isnan(b);
        const bool same_inf = std::isinf(a) && a == b;
        if (!same_nan && !same_inf && !(std::fabs(a - b) <= 1e-7 + rtol * std::fabs(b)))
          return {verdict::failed, "output " + std::to_string(k) + "[" + std::to_string(i) +
                                       "] = " + std::to_string(a) + ", expected " +
                                       std::to_string(b)};
      }
    }
  } catch (const kfuse::error& e) {
    return {verdict::unsupported, reason_of(e.what())};
  } catch (const std::exception& e) {
    return {verdict::failed, std::string("exception: ") + e.what()};
  }
  return {};
}

// A case: first with every float input at run time, then (if the importer needs constants)
// with every input but the first as an initializer, then all of them, then (integer data a
// kernel takes, such as uint8 max pooling) every input at run time.
result run_case_dir(const fs::path& dir, kfuse::tensor_layout layout) {
  ::onnx::ModelProto m;
  if (!m.ParseFromString(read_file(dir / "model.onnx"))) return {verdict::failed, "bad model"};
  std::vector<std::string> in, out;
  for (int k = 0;; ++k) {
    const fs::path p = dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    in.push_back(read_file(p));
  }
  for (int k = 0;; ++k) {
    const fs::path p = dir / "test_data_set_0" / ("output_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(read_file(p));
  }
  const std::size_t n = std::size_t(m.graph().input_size());
  std::vector<bool> ints(n, false);
  for (std::size_t k = 0; k < n; ++k)
    ints[k] = m.graph().input(int(k)).type().tensor_type().elem_type() != 1;
  std::vector<std::vector<bool>> tries = {ints};
  // A sequence or optional input: nothing to try with other initializers; the importer's own
  // error on the model is the case's reason.
  for (const auto& vi : m.graph().input())
    if (!vi.type().has_tensor_type()) {
      try {
        (void)kfuse::onnx::load_bytes(as_bytes(m.SerializeAsString()));
      } catch (const kfuse::error& e) {
        return {verdict::unsupported, reason_of(e.what())};
      }
      return {verdict::failed, "a non-tensor input loaded"};
    }
  std::vector<bool> rest = ints;
  for (std::size_t k = 1; k < n; ++k) rest[k] = true;
  tries.push_back(rest);
  tries.push_back(std::vector<bool>(n, true));
  tries.push_back(std::vector<bool>(n, false));  // integer data at run time (uint8 MaxPool)
  result all_constant;  // an unsupported case's reason: the one with every input a constant
  for (std::size_t k = 0; k < tries.size(); ++k) {
    result r;
    try {
      r = run_case(m, in, out, tries[k], layout);
    } catch (const kfuse::error& e) {  // input data kfuse does not read (strings)
      r = {verdict::unsupported, reason_of(e.what())};
    }
    // Passed only with every input a constant: evaluated at load time, no run-time kernel.
    const bool constants = tries[k] == std::vector<bool>(n, true);
    if (r.v == verdict::passed && constants && n > 0 && tries[0] != tries[k]) r.folded = true;
    if (r.v != verdict::unsupported) return r;
    if (constants) all_constant = r;
  }
  return all_constant;
}

struct op_row {
  int cases = 0, passed = 0, folded = 0, failed = 0;
  std::map<std::string, int> unsupported;  // reason -> cases
  std::vector<std::string> failures;
};

}  // namespace

TEST_CASE("onnx conformance: node tests of the listed operators (fp32, NCHW and NHWC)") {
  if (!fs::exists(data_root)) {
    WARN("libonnx-testdata is not installed (scripts/setup.sh installs it): skipped");
    return;
  }
  std::map<std::string, op_row> rows;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(data_root)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    ::onnx::ModelProto m;
    if (!fs::exists(dir / "model.onnx") || !m.ParseFromString(read_file(dir / "model.onnx")))
      continue;
    if (m.graph().node_size() == 0) continue;
    // The op a case tests: its single node's; an expanded function case (the op written as
    // its ONNX function body) counts in one row of its own when it tests a listed op.
    std::string op = m.graph().node(0).op_type();
    if (m.graph().node_size() != 1) {
      const std::string name = dir.filename().string();
      if (name.size() < 9 || name.compare(name.size() - 9, 9, "_expanded") != 0) continue;
      const bool of_listed = std::any_of(listed.begin(), listed.end(), [&](const std::string& o) {
        std::string lower = "test_";
        for (char ch : o) lower += char(std::tolower(static_cast<unsigned char>(ch)));
        return name.rfind(lower, 0) == 0;
      });
      if (!of_listed) continue;
      op = "(expanded function bodies)";
    } else if (!listed.count(op)) {
      continue;
    }
    op_row& row = rows[op];
    ++row.cases;
    result worst;
    for (auto layout : {kfuse::tensor_layout::nchw, kfuse::tensor_layout::nhwc}) {
      const result r = run_case_dir(dir, layout);
      if (r.v == verdict::failed || (r.v == verdict::unsupported && worst.v == verdict::passed) ||
          (r.v == verdict::passed && r.folded && worst.v == verdict::passed))
        worst = r;
      if (r.v == verdict::failed) {
        worst.why = dir.filename().string() + " (" + std::string(kfuse::layout_name(layout)) +
                    "): " + r.why;
        break;
      }
    }
    if (worst.v == verdict::passed) {
      ++row.passed;
      row.folded += worst.folded;
    } else if (worst.v == verdict::failed) {
      ++row.failed;
      row.failures.push_back(worst.why);
    } else {
      ++row.unsupported[worst.why];
    }
  }
  int cases = 0, passed = 0, folded = 0, failed = 0;
  std::string table =
      "| op | cases | passed | of which only as constants | failed | unsupported (cases: reason) "
      "|\n|---|---|---|---|---|---|\n";
  std::vector<std::string> order(listed.begin(), listed.end());
  order.push_back("(expanded function bodies)");
  for (const std::string& op : order) {
    const auto it = rows.find(op);
    if (it == rows.end()) {
      table += "| " + op + " | 0 | | | | no node test in libonnx-testdata 1.12 |\n";
      continue;
    }
    const op_row& r = it->second;
    cases += r.cases;
    passed += r.passed;
    failed += r.failed;
    folded += r.folded;
    std::string why;
    for (const auto& [reason, count] : r.unsupported)
      why += (why.empty() ? "" : "; ") + std::to_string(count) + ": " + reason;
    for (char& c : why)
      if (c == '|') c = '/';
    table += "| " + op + " | " + std::to_string(r.cases) + " | " + std::to_string(r.passed) +
             " | " + (r.folded ? std::to_string(r.folded) : std::string()) + " | " +
             std::to_string(r.failed) + " | " + why + " |\n";
    for (const std::string& f : r.failures) FAIL_CHECK(op << ": " << f);
  }
  const std::string summary =
      "cases " + std::to_string(cases) + ", passed " + std::to_string(passed) + " (" +
      std::to_string(passed - folded) + " with run-time data, " + std::to_string(folded) +
      " only with constant inputs, evaluated at load time), failed " + std::to_string(failed) +
      ", unsupported " + std::to_string(cases - passed - failed);
  if (const char* path = std::getenv("KFUSE_ONNX_TABLE"))
    std::ofstream(path) << summary << "\n\n" << table;
  WARN(summary);
  CHECK(failed == 0);
  CHECK(passed > 0);
}
