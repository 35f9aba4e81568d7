// The expansions of composite.hpp. Exactness: in float32 the integer products and their sums are
// exact while |sum| < 2^24 (K * 255 * 255 for uint8, i.e. K <= 258 for full-range data); the
// requantization of QLinear* rounds the float result half to even as ONNX's reference does.
#include "composite.hpp"

#include <algorithm>
#include <string>

namespace kfuse::onnx::detail {

namespace {

struct expansion {
  const node_proto& n;
  std::vector<node_proto>& out;

  std::string tmp(const std::string& tag) const { return n.output(0) + "/kfuse_" + tag; }
  node_proto& add(const char* op, std::vector<std::string> in, std::string y) {
    node_proto& m = out.emplace_back();
    m.set_op_type(op);
    m.set_name((n.name().empty() ? n.output(0) : n.name()) + "/" + op);
    for (auto& i : in) m.add_input(i);
    m.add_output(y);
    return m;
  }
  /// Input k of n, or "" when absent.
  std::string in(int k) const { return k < n.input_size() ? n.input(k) : std::string(); }
  /// A float scalar constant named after n.
  std::string scalar(const std::string& tag, float v) {
    node_proto& c = add("Constant", {}, tmp(tag));
    auto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(1);
    a->mutable_t()->add_float_data(v);
    return tmp(tag);
  }
  /// DequantizeLinear(x, scale, zero) (per axis `axis` when >= -9, i.e. given).
  std::string dequantize(const std::string& x, const std::string& scale, const std::string& zero,
                         const std::string& tag, int axis = -10) {
    std::vector<std::string> ins = {x, scale};
    if (!zero.empty()) ins.push_back(zero);
    node_proto& d = add("DequantizeLinear", ins, tmp(tag));
    if (axis >= -9) {
      auto* a = d.add_attribute();
      a->set_name("axis");
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    return tmp(tag);
  }
  /// The float op (Conv / MatMul) with n's attributes.
  node_proto& compute(const char* op, std::vector<std::string> in, std::string y) {
    node_proto& c = add(op, std::move(in), std::move(y));
    for (const auto& a : n.attribute()) *c.add_attribute() = a;
    return c;
  }
};

// QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B): B is int32 with scale xs * ws, zero point 0.
void qlinear_conv(expansion& e) {
  const std::string xd = e.dequantize(e.in(0), e.in(1), e.in(2), "x");
  const std::string wd = e.dequantize(e.in(3), e.in(4), e.in(5), "w", 0);
  std::vector<std::string> conv_in = {xd, wd};
  if (!e.in(8).empty()) {
    e.add("Mul", {e.in(1), e.in(4)}, e.tmp("bias_scale"));
    conv_in.push_back(e.dequantize(e.in(8), e.tmp("bias_scale"), "", "bias", 0));
  }
  e.compute("Conv", conv_in, e.tmp("y"));
  e.add("QuantizeLinear", {e.tmp("y"), e.in(6), e.in(7)}, e.n.output(0));
}

// QLinearMatMul(a, as, az, b, bs, bz, ys, yz): b's scale per column (its last axis) when 1-D.
void qlinear_matmul(expansion& e) {
  const std::string ad = e.dequantize(e.in(0), e.in(1), e.in(2), "a");
  const std::string bd = e.dequantize(e.in(3), e.in(4), e.in(5), "b", -1);
  e.add("MatMul", {ad, bd}, e.tmp("y"));
  e.add("QuantizeLinear", {e.tmp("y"), e.in(6), e.in(7)}, e.n.output(0));
}

// MatMulInteger(a, b, az, bz) / ConvInteger(x, w, xz, wz): int32 = sum((a - az) * (b - bz)).
// a's zero point may be run-time data (DynamicQuantizeLinear's): a as its integer values minus
// the zero point cast to float; b's (the weights', per column / output channel) is a constant.
void integer_op(expansion& e, bool conv) {
  const std::string one = e.scalar("one", 1.f);
  std::string ad = e.dequantize(e.in(0), one, "", "a");
  if (!e.in(2).empty()) {
    node_proto& cast = e.add("Cast", {e.in(2)}, e.tmp("a_zero"));
    auto* a = cast.add_attribute();
    a->set_name("to");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(1);  // float
    e.add("Sub", {ad, e.tmp("a_zero")}, e.tmp("a_centered"));
    ad = e.tmp("a_centered");
  }
  const std::string bd = e.dequantize(e.in(1), one, e.in(3), "b", conv ? 0 : -1);
  if (conv)
    e.compute("Conv", {ad, bd}, e.tmp("y"));
  else
    e.add("MatMul", {ad, bd}, e.tmp("y"));
  node_proto& cast = e.add("Cast", {e.tmp("y")}, e.n.output(0));
  auto* a = cast.add_attribute();
  a->set_name("to");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(6);  // int32
}

}  // namespace

void expand_composites(std::vector<node_proto>& nodes) {
  std::vector<node_proto> out;
  out.reserve(nodes.size());
  for (const node_proto& n : nodes) {
    const std::string& t = n.op_type();
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const auto& ops = composite_ops();
    const bool composite =
        onnx_domain && n.output_size() == 1 && std::find(ops.begin(), ops.end(), t) != ops.end();
    if (!composite) {
      out.push_back(n);
      continue;
    }
    expansion e{n, out};
    if (t == "QLinearConv")
      qlinear_conv(e);
    else if (t == "QLinearMatMul")
      qlinear_matmul(e);
    else
      integer_op(e, t == "ConvInteger");
  }
  nodes = std::move(out);
}

}  // namespace kfuse::onnx::detail
