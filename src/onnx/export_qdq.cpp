// export_qdq: the model's protobuf, edited in place. Weights are quantized with the function
// kfuse's int8 plans use (quantize_weights_per_row), so both runtimes hold the same integers.
#include "kfuse/onnx/export_qdq.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "context.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/kernels/gemm/quantize_weights.hpp"
#include "model_file.hpp"
#include "tensor.hpp"

namespace kfuse::onnx {

namespace {

using namespace detail;

[[noreturn]] void bad(const std::string& what) { kfuse::detail::fail("export_qdq", what); }

constexpr std::size_t max_model_bytes = std::size_t(4) << 30;
constexpr std::int64_t min_qdq_opset = 13;  // DequantizeLinear's axis

std::int64_t int_attr(const node_proto& n, const char* name, std::int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}
float float_attr(const node_proto& n, const char* name, float fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.f();
  return fallback;
}

/// Where a quantizable node keeps its weight: input slot, the axis of its output channels, and
/// the bias slot (-1: none).
struct weight_slot {
  int weight = 1;
  int axis = 0;
  int bias = -1;
};

/// The node's weight slot when it is a Conv, Gemm or MatMul whose weight is a float initializer
/// of a shape kfuse's int8 plans quantize.
std::optional<weight_slot> quantizable(
    const node_proto& n, const std::map<std::string, const ::onnx::TensorProto*>& init,
    std::string* why = nullptr) {
  auto no = [&](const std::string& w) -> std::optional<weight_slot> {
    if (why) *why = w;
    return std::nullopt;
  };
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx") return no("not the default domain");
  if (op != "Conv" && op != "Gemm" && op != "MatMul") return no("not Conv, Gemm or MatMul");
  if (n.input_size() < 2) return no("no weight input");
  const auto w = init.find(n.input(1));
  if (w == init.end()) return no("its weight is not an initializer");
  const ::onnx::TensorProto& t = *w->second;
  if (t.data_type() != elem_float) return no("its weight is not float32");
  weight_slot s;
  if (op == "Conv") {
    if (t.dims_size() < 3) return no("its weight has fewer than 3 dimensions");
    s.bias = n.input_size() > 2 && !n.input(2).empty() ? 2 : -1;
  } else if (op == "Gemm") {
    if (t.dims_size() != 2) return no("its weight is not 2-D");
    if (int_attr(n, "transA", 0) != 0 || float_attr(n, "alpha", 1.f) != 1.f ||
        float_attr(n, "beta", 1.f) != 1.f)
      return no("transA, alpha or beta is not the default");
    s.axis = int_attr(n, "transB", 0) != 0 ? 0 : 1;
    s.bias = n.input_size() > 2 && !n.input(2).empty() ? 2 : -1;
  } else {
    if (t.dims_size() != 2) return no("its weight is not 2-D");
    s.axis = 1;
  }
  if (s.bias >= 0) {  // a bias that is not a 1-D initializer of one value per channel stays float
    const auto b = init.find(n.input(s.bias));
    if (b == init.end() || b->second->data_type() != elem_float || b->second->dims_size() != 1 ||
        b->second->dims(0) != t.dims(s.axis))
      s.bias = -1;
  }
  return s;
}

std::map<std::string, const ::onnx::TensorProto*> initializers(const ::onnx::GraphProto& g) {
  std::map<std::string, const ::onnx::TensorProto*> m;
  for (const auto& t : g.initializer()) m[t.name()] = &t;
  return m;
}

/// Per-channel symmetric int8 weights along `axis` (0: rows of the stored order; 1: columns of a
/// 2-D [K, N] weight), in the stored order, and their scales.
int8_weights quantize_along(const const_value& w, int axis) {
  const index_t rows = w.shape[std::size_t(axis)];
  if (axis == 0) return quantize_weights_per_row(w.f, rows);
  const index_t k = w.shape[0];
  std::vector<float> t(w.f.size());  // [N, K]
  for (index_t r = 0; r < k; ++r)
    for (index_t c = 0; c < rows; ++c) t[std::size_t(c * k + r)] = w.f[std::size_t(r * rows + c)];
  int8_weights q = quantize_weights_per_row(t, rows);
  std::vector<std::int8_t> back(q.values.size());
  for (index_t r = 0; r < k; ++r)
    for (index_t c = 0; c < rows; ++c)
      back[std::size_t(r * rows + c)] = q.values[std::size_t(c * k + r)];
  q.values = std::move(back);
  return q;
}

/// Builds the new initializers and nodes, with names that collide with nothing in the model.
class rewriter {
 public:
  explicit rewriter(::onnx::GraphProto& g) : g_(g) {
    for (const auto& t : g.initializer()) taken_.insert(t.name());
    for (const auto& v : g.input()) taken_.insert(v.name());
    for (const auto& n : g.node()) {
      for (const auto& o : n.output()) taken_.insert(o);
      taken_.insert(n.name());
    }
  }

  std::string fresh(const std::string& base) {
    std::string s = base;
    for (int k = 1; !taken_.insert(s).second; ++k) s = base + "_" + std::to_string(k);
    return s;
  }

  template <class T>
  std::string initializer(const std::string& base, std::int32_t elem,
                          const std::vector<std::int64_t>& dims, const std::vector<T>& v) {
    ::onnx::TensorProto* t = g_.add_initializer();
    t->set_name(fresh(base));
    t->set_data_type(elem);
    for (std::int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
    return t->name();
  }

  static ::onnx::NodeProto make_node(const std::string& op, const std::string& name,
                                     std::vector<std::string> in, const std::string& out) {
    ::onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(name);
    for (auto& i : in) n.add_input(i);
    n.add_output(out);
    return n;
  }

  static void set_axis(::onnx::NodeProto& n, std::int64_t axis) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(axis);
  }

 private:
  ::onnx::GraphProto& g_;
  std::set<std::string> taken_;
};

}  // namespace

std::vector<std::string> qdq_activation_names(const std::filesystem::path& model) {
  const std::vector<std::byte> bytes = read_model_file(model, max_model_bytes);
  const ::onnx::ModelProto mp = parse_model(bytes, max_model_bytes);
  const ::onnx::GraphProto& g = mp.graph();
  const auto init = initializers(g);
  std::map<std::string, std::vector<const node_proto*>> readers;
  for (const auto& n : g.node())
    for (const auto& i : n.input()) readers[i].push_back(&n);
  std::set<std::string> outputs;
  for (const auto& o : g.output()) outputs.insert(o.name());

  std::vector<std::string> names;
  std::set<std::string> seen;
  auto add = [&](const std::string& s) {
    if (!s.empty() && seen.insert(s).second) names.push_back(s);
  };
  for (const auto& n : g.node()) {
    if (!quantizable(n, init) || n.output_size() < 1) continue;
    add(n.input(0));
    // The output after a Relu or Clip only this node feeds: its range is what the next op reads,
    // and runtimes fold the activation into the Q that follows it.
    std::string out = n.output(0);
    while (!outputs.count(out) && readers[out].size() == 1 &&
           (readers[out][0]->op_type() == "Relu" || readers[out][0]->op_type() == "Clip") &&
           readers[out][0]->output_size() == 1)
      out = readers[out][0]->output(0);
    add(out);
  }
  return names;
}

qdq_export_report export_qdq(const std::filesystem::path& model, const std::filesystem::path& out,
                             std::span<const qdq_activation> activations) {
  const std::vector<std::byte> bytes = read_model_file(model, max_model_bytes);
  ::onnx::ModelProto mp = parse_model(bytes, max_model_bytes);
  const std::int64_t opset = default_opset(mp);
  if (opset < min_qdq_opset)
    bad("the model's opset is " + std::to_string(opset) + "; per-channel DequantizeLinear needs " +
        std::to_string(min_qdq_opset) + " or later (re-export the model with a newer opset)");
  ::onnx::GraphProto& g = *mp.mutable_graph();
  const tensor_source src{
      model.parent_path().empty() ? std::filesystem::path(".") : model.parent_path(),
      max_model_bytes};

  // The activations: known values of the model, each with valid parameters.
  std::set<std::string> produced;
  for (const auto& v : g.input()) produced.insert(v.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) produced.insert(o);
  const auto init = initializers(g);
  std::map<std::string, qdq_activation> act;
  for (const qdq_activation& a : activations) {
    if (!produced.count(a.name) || init.count(a.name))
      bad("'" + a.name + "' is not an activation of the model (no node writes it)");
    if (!(a.scale > 0.f) || !std::isfinite(a.scale))
      bad("'" + a.name + "': the scale " + std::to_string(a.scale) + " is not positive and finite");
    if (a.zero_point < 0 || a.zero_point > 255)
      bad("'" + a.name + "': the zero point " + std::to_string(a.zero_point) +
          " is outside [0, 255] (u8 activations)");
    act[a.name] = a;
  }

  rewriter rw(g);
  qdq_export_report report;
  std::vector<::onnx::NodeProto> front;  // weight DQs and the graph inputs' Q -> DQ
  std::map<std::string, std::vector<::onnx::NodeProto>> after;  // Q -> DQ after a tensor's writer
  std::map<std::string, std::string> dequantized;               // activation -> its DQ output
  for (const auto& [name, a] : act) {
    const std::string scale = rw.initializer(name + "_scale", elem_float, {}, std::vector{a.scale});
    const std::string zero = rw.initializer(name + "_zero_point", elem_uint8, {},
                                            std::vector{std::uint8_t(a.zero_point)});
    const std::string q = rw.fresh(name + "_quantized"), dq = rw.fresh(name + "_dequantized");
    std::vector<::onnx::NodeProto>& to = after[name];
    to.push_back(rewriter::make_node("QuantizeLinear", rw.fresh(name + "_QuantizeLinear"),
                                     {name, scale, zero}, q));
    to.push_back(rewriter::make_node("DequantizeLinear", rw.fresh(name + "_DequantizeLinear"),
                                     {q, scale, zero}, dq));
    dequantized[name] = dq;
    ++report.activations;
  }
  for (const auto& v : g.input())
    if (after.count(v.name())) {
      for (auto& n : after[v.name()]) front.push_back(std::move(n));
      after.erase(v.name());
    }

  // Weights (once per initializer) and biases (per node: their scale has the input's in it),
  // each as integers and a per-channel DequantizeLinear at the front.
  std::set<std::string> replaced;  // float initializers now read through a DQ
  auto dequantize_front = [&](const std::string& base, const std::string& values,
                              const std::string& scale, const std::string& zero, int axis) {
    const std::string dq = rw.fresh(base + "_dequantized");
    front.push_back(rewriter::make_node("DequantizeLinear", rw.fresh(base + "_DequantizeLinear"),
                                        {values, scale, zero}, dq));
    rewriter::set_axis(front.back(), axis);
    return dq;
  };
  std::map<std::string, std::pair<std::string, std::vector<float>>> weights;  // DQ out, scales
  std::vector<::onnx::NodeProto> nodes(g.node().begin(), g.node().end());
  for (::onnx::NodeProto& n : nodes) {
    std::string why;
    const std::optional<weight_slot> s = quantizable(n, init, &why);
    if (!s) {
      if (why.rfind("not Conv", 0) != 0 && why != "not the default domain")
        report.kept_float.push_back(n.name() + " (" + n.op_type() + "): " + why);
      continue;
    }
    const std::string label = n.name() + " (" + n.op_type() + ")";
    const auto x = act.find(n.input(0));
    if (x == act.end()) {
      report.kept_float.push_back(label + ": its input '" + n.input(0) +
                                  "' has no quantization parameters");
      continue;
    }
    const std::string wname = n.input(1);  // a copy: set_input below replaces it
    if (!weights.count(wname)) {
      const const_value w =
          decode_tensor(*init.at(wname), src, "initializer '" + wname + "' of " + label);
      const int8_weights q = quantize_along(w, s->axis);
      const std::vector<std::int64_t> dims(w.shape.begin(), w.shape.end());
      const std::int64_t rows = w.shape[std::size_t(s->axis)];
      const std::string qv = rw.initializer(wname + "_quantized", elem_int8, dims, q.values);
      const std::string sc = rw.initializer(wname + "_scale", elem_float, {rows}, q.scales);
      const std::string zp = rw.initializer(wname + "_zero_point", elem_int8, {rows},
                                            std::vector<std::int8_t>(std::size_t(rows), 0));
      weights[wname] = {dequantize_front(wname, qv, sc, zp, s->axis), q.scales};
      replaced.insert(wname);
    }
    const auto& [wdq, wscale] = weights.at(wname);
    if (s->bias >= 0) {
      const std::string bname = n.input(s->bias);  // a copy: set_input below replaces it
      const const_value b =
          decode_tensor(*init.at(bname), src, "initializer '" + bname + "' of " + label);
      std::vector<float> scale(wscale.size());
      std::vector<std::int32_t> q(wscale.size());
      for (std::size_t r = 0; r < q.size(); ++r) {
        scale[r] = x->second.scale * wscale[r];
        const double v = std::nearbyint(double(b.f[r]) / double(scale[r]));
        q[r] = std::int32_t(std::clamp(v, -2147483647.0, 2147483647.0));
      }
      const std::int64_t rows = std::int64_t(q.size());
      const std::string base = n.name().empty() ? bname : n.name() + "_bias";
      const std::string qv = rw.initializer(base + "_quantized", elem_int32, {rows}, q);
      const std::string sc = rw.initializer(base + "_scale", elem_float, {rows}, scale);
      const std::string zp = rw.initializer(base + "_zero_point", elem_int32, {rows},
                                            std::vector<std::int32_t>(q.size(), 0));
      n.set_input(s->bias, dequantize_front(base, qv, sc, zp, 0));
      replaced.insert(bname);
    }
    n.set_input(1, wdq);
    report.quantized.push_back(label);
  }

  // Every reader of an activation reads its DQ; the pairs follow their tensor's writer.
  g.clear_node();
  for (auto& n : front) *g.add_node() = std::move(n);
  for (::onnx::NodeProto& n : nodes) {
    for (int i = 0; i < n.input_size(); ++i)
      if (const auto d = dequantized.find(n.input(i)); d != dequantized.end())
        n.set_input(i, d->second);
    std::vector<std::string> outs(n.output().begin(), n.output().end());
    *g.add_node() = std::move(n);
    for (const std::string& o : outs)
      if (const auto p = after.find(o); p != after.end())
        for (auto& q : p->second) *g.add_node() = std::move(q);
  }

  // Float weights and biases nothing reads any more go (a graph input of that name keeps its own).
  std::set<std::string> read;
  for (const auto& n : g.node())
    for (const auto& i : n.input()) read.insert(i);
  for (const auto& o : g.output()) read.insert(o.name());
  for (const auto& v : g.input()) read.insert(v.name());
  auto* inits = g.mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(),
                              [&](const ::onnx::TensorProto& t) {
                                return replaced.count(t.name()) && !read.count(t.name());
                              }),
               inits->end());

  std::string bytes_out;
  if (!mp.SerializeToString(&bytes_out)) bad("the QDQ model does not serialize (above 2 GiB?)");
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) bad("cannot write '" + out.string() + "'");
  f.write(bytes_out.data(), std::streamsize(bytes_out.size()));
  if (!f) bad("writing '" + out.string() + "' failed");
  return report;
}

}  // namespace kfuse::onnx
