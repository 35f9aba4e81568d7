// Elementwise ONNX ops: activations and arithmetic with NumPy broadcasting. On run-time data
// they become one eltwise node (a stage chain the plan fuses into the producer's epilogue);
// on constants they are evaluated at load time.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

run_value emit(context& cx, const node_proto& n, const run_value& x,
               std::vector<eltwise_stage> stages) {
  run_value r = x;
  r.id = cx.g.eltwise(cx.out_name(n), x.id, std::move(stages));
  r.type = dtype::f32;
  r.boolean = false;
  return r;
}

eltwise_stage stage(stage_kind k, float p0 = 0, float p1 = 0) {
  eltwise_stage s;
  s.kind = k;
  s.p0 = p0;
  s.p1 = p1;
  return s;
}

eltwise_stage operand_stage(stage_kind k, tensor_id t, bool per_channel = false) {
  eltwise_stage s = stage(k);
  s.operand = t;
  s.per_channel = per_channel;
  return s;
}

// ---- load-time evaluation ----------------------------------------------------------------------

double erf_d(double v) { return std::erf(v); }

// The value of unary op `type` (attributes read from n) at v.
std::function<double(double)> unary_fn(const context& cx, const node_proto& n) {
  const std::string& t = n.op_type();
  if (t == "Abs") return [](double v) { return std::fabs(v); };
  if (t == "Neg") return [](double v) { return -v; };
  if (t == "Sqrt") return [](double v) { return std::sqrt(v); };
  if (t == "Reciprocal") return [](double v) { return 1.0 / v; };
  if (t == "Exp") return [](double v) { return std::exp(v); };
  if (t == "Log") return [](double v) { return std::log(v); };
  if (t == "Erf") return erf_d;
  if (t == "Floor") return [](double v) { return std::floor(v); };
  if (t == "Ceil") return [](double v) { return std::ceil(v); };
  if (t == "Round") return [](double v) { return std::nearbyint(v); };
  if (t == "Sign") return [](double v) { return double((v > 0) - (v < 0)); };
  if (t == "Not") return [](double v) { return double(v == 0); };
  if (t == "Relu") return [](double v) { return v > 0 ? v : 0.0; };
  if (t == "Sigmoid") return [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  if (t == "Tanh") return [](double v) { return std::tanh(v); };
  if (t == "Softplus") return [](double v) { return std::log1p(std::exp(v)); };
  if (t == "Softsign") return [](double v) { return v / (1.0 + std::fabs(v)); };
  if (t == "Identity") return [](double v) { return v; };
  if (t == "HardSwish") return [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); };
  if (t == "Mish") return [](double v) { return v * std::tanh(std::log1p(std::exp(v))); };
  if (t == "LeakyRelu") {
    const double a = cx.attr_float(n, "alpha", 0.01f);
    return [a](double v) { return v >= 0 ? v : a * v; };
  }
  if (t == "Elu") {
    const double a = cx.attr_float(n, "alpha", 1.f);
    return [a](double v) { return v >= 0 ? v : a * (std::exp(v) - 1); };
  }
  if (t == "Celu") {
    const double a = cx.attr_float(n, "alpha", 1.f);
    return [a](double v) { return std::max(0.0, v) + std::min(0.0, a * (std::exp(v / a) - 1)); };
  }
  if (t == "Selu") {
    const double a = cx.attr_float(n, "alpha", 1.67326319217681884765625f);
    const double g = cx.attr_float(n, "gamma", 1.05070102214813232421875f);
    return [a, g](double v) { return g * (v > 0 ? v : a * (std::exp(v) - 1)); };
  }
  if (t == "HardSigmoid") {
    const double a = cx.attr_float(n, "alpha", 0.2f), b = cx.attr_float(n, "beta", 0.5f);
    return [a, b](double v) { return std::clamp(a * v + b, 0.0, 1.0); };
  }
  cx.fail(n, "no load-time evaluation");
}

std::function<double(double, double)> binary_fn(const context& cx, const node_proto& n, bool ints) {
  const std::string& t = n.op_type();
  if (t == "Add" || t == "Sum" || t == "Mean") return std::plus<double>();
  if (t == "Sub") return std::minus<double>();
  if (t == "Mul") return std::multiplies<double>();
  if (t == "Div") {
    if (ints) return [](double a, double b) { return b == 0 ? 0.0 : std::trunc(a / b); };
    return std::divides<double>();
  }
  if (t == "Pow") return [](double a, double b) { return std::pow(a, b); };
  if (t == "Mod") {  // fmod 1: C's fmod (sign of a); 0: integers, Python's (sign of b)
    if (cx.attr_int(n, "fmod", 0) != 0) return [](double a, double b) { return std::fmod(a, b); };
    if (!ints) cx.fail(n, "fmod = 0 on floating-point inputs (ONNX requires fmod = 1 there)");
    return [](double a, double b) { return b == 0 ? 0.0 : a - std::floor(a / b) * b; };
  }
  if (t == "Max") return [](double a, double b) { return std::max(a, b); };
  if (t == "Min") return [](double a, double b) { return std::min(a, b); };
  if (t == "Equal") return [](double a, double b) { return double(a == b); };
  if (t == "Less") return [](double a, double b) { return double(a < b); };
  if (t == "Greater") return [](double a, double b) { return double(a > b); };
  if (t == "LessOrEqual") return [](double a, double b) { return double(a <= b); };
  if (t == "GreaterOrEqual") return [](double a, double b) { return double(a >= b); };
  if (t == "And") return [](double a, double b) { return double(a != 0 && b != 0); };
  if (t == "Or") return [](double a, double b) { return double(a != 0 || b != 0); };
  if (t == "Xor") return [](double a, double b) { return double((a != 0) != (b != 0)); };
  cx.fail(n, "no load-time evaluation");
}

bool is_compare(const std::string& t) {
  return t == "Equal" || t == "Less" || t == "Greater" || t == "LessOrEqual" ||
         t == "GreaterOrEqual" || t == "And" || t == "Or" || t == "Xor" || t == "Not";
}

}  // namespace

void store(const_value& c, index_t k, double v) {
  if (c.is_float())
    c.f[std::size_t(k)] = float(v);
  else
    c.i[std::size_t(k)] = c.elem == elem_bool ? std::int64_t(v != 0) : saturate_i64(v);
}

std::int64_t saturate_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<std::int64_t>::min();
  return std::int64_t(v);
}

const_value make_const(std::int32_t elem, std::vector<index_t> shape) {
  const_value c;
  c.elem = elem;
  c.shape = std::move(shape);
  const std::size_t n = std::size_t(numel(c.shape));
  if (c.is_float())
    c.f.assign(n, 0.f);
  else
    c.i.assign(n, 0);
  return c;
}

void fold_unary(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const auto f = unary_fn(cx, n);
  const_value y = make_const(n.op_type() == "Not" ? std::int32_t(elem_bool) : x.elem, x.shape);
  for (index_t k = 0; k < x.numel(); ++k) store(y, k, f(x.at(k)));
  cx.set_const(n, 0, std::move(y));
}

void fold_binary(context& cx, const node_proto& n) {
  const_value acc = cx.in(n, 0).c;
  const int count = n.input_size();
  for (int in = 1; in < count; ++in) {
    const const_value& b = cx.in(n, in).c;
    if (acc.is_float() != b.is_float() && !is_compare(n.op_type()) && n.op_type() != "Pow")
      cx.fail(n, "inputs are " + elem_name(acc.elem) + " and " + elem_name(b.elem));
    std::vector<index_t> shape;
    if (!broadcast_shape(acc.shape, b.shape, shape))
      cx.fail(
          n, "shapes " + shape_str(acc.shape) + " and " + shape_str(b.shape) + " do not broadcast");
    const auto f = binary_fn(cx, n, !acc.is_float());
    const_value y = make_const(is_compare(n.op_type()) ? std::int32_t(elem_bool) : acc.elem, shape);
    for (index_t k = 0; k < y.numel(); ++k)
      store(y, k,
            f(acc.at(broadcast_index(k, shape, acc.shape)),
              b.at(broadcast_index(k, shape, b.shape))));
    acc = std::move(y);
  }
  if (n.op_type() == "Mean")
    for (index_t k = 0; k < acc.numel(); ++k) store(acc, k, acc.at(k) / count);
  cx.set_const(n, 0, std::move(acc));
}

void fold_where(context& cx, const node_proto& n) {
  const const_value& c = cx.in(n, 0).c;
  const const_value& a = cx.in(n, 1).c;
  const const_value& b = cx.in(n, 2).c;
  std::vector<index_t> s1, shape;
  if (!broadcast_shape(c.shape, a.shape, s1) || !broadcast_shape(s1, b.shape, shape))
    cx.fail(n, "shapes do not broadcast");
  const_value y = make_const(a.elem, shape);
  for (index_t k = 0; k < y.numel(); ++k)
    store(y, k,
          c.at(broadcast_index(k, shape, c.shape)) != 0 ? a.at(broadcast_index(k, shape, a.shape))
                                                        : b.at(broadcast_index(k, shape, b.shape)));
  cx.set_const(n, 0, std::move(y));
}

void fold_clip(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const auto [lo, hi] = clip_bounds(cx, n);
  const_value y = x;
  for (index_t k = 0; k < x.numel(); ++k) store(y, k, std::clamp(x.at(k), double(lo), double(hi)));
  cx.set_const(n, 0, std::move(y));
}

void fold_prelu(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const const_value& s = cx.in(n, 1).c;
  std::vector<index_t> shape;
  if (!broadcast_shape(x.shape, s.shape, shape) || shape != x.shape)
    cx.fail(n, "slope " + shape_str(s.shape) + " does not broadcast to " + shape_str(x.shape));
  const_value y = x;
  for (index_t k = 0; k < x.numel(); ++k) {
    const double v = x.at(k);
    store(y, k, v >= 0 ? v : v * s.at(broadcast_index(k, shape, s.shape)));
  }
  cx.set_const(n, 0, std::move(y));
}

std::pair<float, float> clip_bounds(const context& cx, const node_proto& n) {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (cx.opset < 11) {
    lo = cx.attr_float(n, "min", lo);
    hi = cx.attr_float(n, "max", hi);
    return {lo, hi};
  }
  auto scalar = [&](int k, float dflt) {
    if (!cx.has_input(n, k)) return dflt;
    const const_value& c = cx.const_in(n, k, k == 1 ? "min" : "max");
    if (c.numel() != 1) cx.fail(n, "min / max must be scalars");
    return float(c.at(0));
  };
  return {scalar(1, lo), scalar(2, hi)};
}

// ---- run-time data -----------------------------------------------------------------------------

namespace {
// The stage of a parameterless unary math op (none: not one).
std::optional<stage_kind> math_unary_kind(const std::string& t) {
  static const std::pair<const char*, stage_kind> table[] = {
      {"Abs", stage_kind::abs},           {"Ceil", stage_kind::ceil},
      {"Erf", stage_kind::erf},           {"Exp", stage_kind::exp},
      {"Floor", stage_kind::floor},       {"Log", stage_kind::log},
      {"Mish", stage_kind::mish},         {"Reciprocal", stage_kind::reciprocal},
      {"Round", stage_kind::round},       {"Sign", stage_kind::sign},
      {"Softplus", stage_kind::softplus}, {"Softsign", stage_kind::softsign},
      {"Sqrt", stage_kind::sqrt}};
  for (const auto& [name, k] : table)
    if (t == name) return k;
  return std::nullopt;
}

void import_prelu(context& cx, const node_proto& n, const run_value& x);
}  // namespace

void import_activation(context& cx, const node_proto& n) {
  const std::string& t = n.op_type();
  if (t == "Identity" || t == "Dropout") return fold_identity(cx, n);
  const run_value x = cx.float_in(n, 0);
  if (t == "Relu") return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::relu)}));
  if (t == "Sigmoid") return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::sigmoid)}));
  if (t == "Tanh") return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::tanh)}));
  if (t == "HardSwish") return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::hardswish)}));
  if (t == "kfuse.Silu") return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::silu)}));
  if (t == "Neg") return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::scale, -1.f)}));
  if (t == "PRelu") return import_prelu(cx, n, x);
  if (const auto k = math_unary_kind(t)) {
    cx.only_attrs(n, {});
    return cx.set_run(n, 0, emit(cx, n, x, {stage(*k)}));
  }
  if (t == "Elu" || t == "Celu") {
    cx.only_attrs(n, {"alpha"});
    const float a = cx.attr_float(n, "alpha", 1.f);
    if (t == "Celu" && a == 0.f) cx.fail(n, "alpha must not be 0");
    return cx.set_run(n, 0,
                      emit(cx, n, x, {stage(t == "Elu" ? stage_kind::elu : stage_kind::celu, a)}));
  }
  if (t == "Selu") {
    cx.only_attrs(n, {"alpha", "gamma"});
    const float a = cx.attr_float(n, "alpha", 1.67326319217681884765625f);
    const float g = cx.attr_float(n, "gamma", 1.05070102214813232421875f);
    return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::selu, a, g)}));
  }
  if (t == "LeakyRelu") {
    cx.only_attrs(n, {"alpha"});
    const float a = cx.attr_float(n, "alpha", 0.01f);
    return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::leaky_relu, a)}));
  }
  if (t == "Clip") {
    const auto [lo, hi] = clip_bounds(cx, n);
    if (!(lo <= hi)) cx.fail(n, "min exceeds max");
    const float big = std::numeric_limits<float>::max();
    return cx.set_run(
        n, 0, emit(cx, n, x, {stage(stage_kind::clamp, std::max(lo, -big), std::min(hi, big))}));
  }
  if (t == "Gelu") {  // opset 20, or the importer's fused pattern
    const std::string approx = cx.attr_string(n, "approximate", "none");
    if (approx != "none" && approx != "tanh") cx.fail(n, "approximate='" + approx + "'");
    return cx.set_run(
        n, 0,
        emit(cx, n, x, {stage(approx == "tanh" ? stage_kind::gelu_tanh : stage_kind::gelu_erf)}));
  }
  if (t == "HardSigmoid") {
    cx.only_attrs(n, {"alpha", "beta"});
    const float a = cx.attr_float(n, "alpha", 0.2f), b = cx.attr_float(n, "beta", 0.5f);
    if (std::fabs(a - 1.f / 6) < 1e-7f && b == 0.5f)
      return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::hardsigmoid)}));
    // clamp(a * x + b, 0, 1) with the beta as a per-channel bias.
    const_value beta = scalar_vector(channels(x), b);
    const run_value bt = cx.graph_constant(beta, cx.unique(n.output(0) + "/beta"));
    return cx.set_run(n, 0,
                      emit(cx, n, x,
                           {stage(stage_kind::scale, a), operand_stage(stage_kind::bias, bt.id),
                            stage(stage_kind::clamp, 0.f, 1.f)}));
  }
  cx.fail(n, "has no kfuse kernel for run-time data yet (supported on constants only)");
}

index_t channels(const run_value& x) {
  if (x.shape.empty()) return 1;
  if (x.layout != tensor_layout::plain && x.shape.size() == 4) return x.shape[1];
  return x.shape.back();
}

const_value scalar_vector(index_t count, float v) {
  const_value c = make_const(elem_float, {count});
  std::fill(c.f.begin(), c.f.end(), v);
  return c;
}

namespace {

// How a constant operand c broadcasts onto run-time x (whose shape the result keeps).
enum class fit { scalar, channel, full };

fit fit_of(context& cx, const node_proto& n, run_value& x, const const_value& c) {
  std::vector<index_t> out;
  if (!broadcast_shape(x.shape, c.shape, out))
    cx.fail(n, "shapes " + shape_str(x.shape) + " and " + shape_str(c.shape) + " do not broadcast");
  if (out != x.shape)  // the constant is the larger: x is expanded first
    x = cx.broadcast(x, out, x.layout, n.output(0) + "/expand");
  if (c.numel() == 1) return fit::scalar;
  // Right-aligned to x's rank: one non-1 extent on the channel axis?
  std::vector<index_t> cs(x.shape.size() - c.shape.size(), 1);
  cs.insert(cs.end(), c.shape.begin(), c.shape.end());
  auto only_axis = [&](std::size_t axis) {
    for (std::size_t d = 0; d < cs.size(); ++d)
      if (d != axis && cs[d] != 1) return false;
    return cs[axis] == x.shape[axis];
  };
  if (x.shape.size() == 4 && only_axis(1)) {
    x = cx.as_image(x, n.output(0));
    return fit::channel;
  }
  if (x.layout == tensor_layout::plain && only_axis(cs.size() - 1)) return fit::channel;
  return fit::full;
}

// c as per-channel values (count = channels of x) or expanded to x's full shape.
const_value shaped(const const_value& c, const run_value& x, fit f, double scale, bool invert) {
  const_value out;
  if (f == fit::full) {
    out = make_const(elem_float, x.shape);
    for (index_t k = 0; k < out.numel(); ++k)
      out.f[std::size_t(k)] = float(c.at(broadcast_index(k, x.shape, c.shape)));
  } else {
    out = make_const(elem_float, {channels(x)});
    for (index_t k = 0; k < out.numel(); ++k)
      out.f[std::size_t(k)] = float(c.at(f == fit::scalar ? 0 : k));
  }
  for (float& v : out.f) v = float(invert ? scale / double(v) : scale * double(v));
  return out;
}

// The stage of binary op t applied as x (op) operand (flipped: operand (op) x).
stage_kind operand_kind(const std::string& t, bool flipped = false) {
  if (t == "Equal") return stage_kind::equal;
  if (t == "Less") return flipped ? stage_kind::greater : stage_kind::less;
  if (t == "LessOrEqual") return flipped ? stage_kind::greater_equal : stage_kind::less_equal;
  if (t == "Greater") return flipped ? stage_kind::less : stage_kind::greater;
  if (t == "GreaterOrEqual") return flipped ? stage_kind::less_equal : stage_kind::greater_equal;
  if (t == "And") return stage_kind::logical_and;
  if (t == "Or") return stage_kind::logical_or;
  if (t == "Xor") return stage_kind::logical_xor;
  if (t == "Mul") return stage_kind::mul;
  if (t == "Div") return stage_kind::div;
  if (t == "Max") return stage_kind::max;
  if (t == "Min") return stage_kind::min;
  if (t == "Pow") return stage_kind::pow;
  return stage_kind::add;  // Add, Sub (of a negated operand), Sum, Mean
}

bool commutes(const std::string& t) {
  return t == "Add" || t == "Mul" || t == "Max" || t == "Min" || t == "Equal" || t == "And" ||
         t == "Or" || t == "Xor";
}

// x (op) c for a constant c, as one or two stages (c_first: c (op) x).
void binary_with_constant(context& cx, const node_proto& n, run_value x, const const_value& c,
                          bool c_first) {
  const std::string& t = n.op_type();
  const fit f = fit_of(cx, n, x, c);
  const std::string cname = cx.unique(n.output(0) + "/operand");
  auto constant = [&](double scale, bool invert) {
    return cx.graph_constant(shaped(c, x, f, scale, invert), cname, x.layout).id;
  };
  std::vector<eltwise_stage> stages;
  if (t == "Add" || t == "Sub") {
    if (t == "Sub" && c_first) stages.push_back(stage(stage_kind::scale, -1.f));
    const double sign = t == "Sub" && !c_first ? -1 : 1;
    stages.push_back(
        operand_stage(f == fit::full ? stage_kind::add : stage_kind::bias, constant(sign, false)));
  } else if (t == "Mul" || (t == "Div" && !c_first)) {  // x / c = x * (1 / c)
    const bool inv = t == "Div";
    if (f == fit::scalar)
      stages.push_back(stage(stage_kind::scale, float(inv ? 1.0 / c.at(0) : c.at(0))));
    else
      stages.push_back(operand_stage(stage_kind::mul, constant(1, inv), f == fit::channel));
  } else if (t == "Div") {  // c / x = (1 / x) * c
    stages.push_back(stage(stage_kind::reciprocal));
    if (f == fit::scalar)
      stages.push_back(stage(stage_kind::scale, float(c.at(0))));
    else
      stages.push_back(operand_stage(stage_kind::mul, constant(1, false), f == fit::channel));
  } else if (t == "Pow" && !c_first && f == fit::scalar) {  // x^p: exact for p = 2, 3, 0.5...
    stages.push_back(stage(stage_kind::power, float(c.at(0))));
  } else if (t == "Pow" && c_first) {  // c^x = e^(x ln c) for one constant c > 0
    if (f != fit::scalar || !(c.at(0) > 0))
      cx.fail(n, "a run-time exponent needs a constant base that is one value > 0");
    stages.push_back(stage(stage_kind::scale, float(std::log(c.at(0)))));
    stages.push_back(stage(stage_kind::exp));
  } else {  // Pow with an exponent per channel or element; Max, Min, comparisons, logic
    stages.push_back(operand_stage(operand_kind(t, c_first), constant(1, false), f != fit::full));
  }
  cx.set_run(n, 0, emit(cx, n, x, std::move(stages)));
}

}  // namespace

namespace {
// a (op) b for a run-time operand b that the stage can read as it is (a's shape and layout, or
// one value per channel): one stage; Sub as a + (-1 * b).
void operand_of(context& cx, const node_proto& n, const run_value& a, run_value b,
                bool per_channel) {
  const std::string& t = n.op_type();
  if (t == "Sub") b.id = cx.g.scale(cx.unique(n.output(0) + "/neg"), b.id, -1.f);
  cx.set_run(n, 0, emit(cx, n, a, {operand_stage(operand_kind(t), b.id, per_channel)}));
}

// ONNX PRelu (x < 0 ? x * slope : x): one slope is a leaky relu; a slope per channel or of any
// shape that broadcasts to x's is the prelu stage's operand.
void import_prelu(context& cx, const node_proto& n, const run_value& x_in) {
  cx.only_attrs(n, {});
  run_value x = x_in;
  if (!cx.is_const(n, 1)) {
    run_value s = cx.float_in(n, 1);
    if (s.shape != x.shape)
      cx.fail(n, "a run-time slope must have x's shape " + shape_str(x.shape) + ", not " +
                     shape_str(s.shape));
    s = cx.to_layout(s, x.layout, n.output(0) + "/slope");
    return cx.set_run(n, 0, emit(cx, n, x, {operand_stage(stage_kind::prelu, s.id)}));
  }
  const const_value& slope = cx.const_in(n, 1, "slope");
  if (slope.numel() < 1) cx.fail(n, "slope is empty");
  if (!slope.is_float()) cx.fail(n, "slope is " + elem_name(slope.elem) + ", not float");
  std::vector<index_t> out;
  if (!broadcast_shape(x.shape, slope.shape, out) || out != x.shape)
    cx.fail(n, "slope " + shape_str(slope.shape) + " does not broadcast to " + shape_str(x.shape));
  bool uniform = true;
  for (index_t k = 1; k < slope.numel(); ++k) uniform = uniform && slope.at(k) == slope.at(0);
  if (uniform)
    return cx.set_run(n, 0, emit(cx, n, x, {stage(stage_kind::leaky_relu, float(slope.at(0)))}));
  const fit f = fit_of(cx, n, x, slope);
  const run_value s =
      cx.graph_constant(shaped(slope, x, f, 1, false), cx.unique(n.output(0) + "/slope"), x.layout);
  cx.set_run(n, 0, emit(cx, n, x, {operand_stage(stage_kind::prelu, s.id, f != fit::full)}));
}
}  // namespace

namespace {
void binary_body(context& cx, const node_proto& n) {
  const std::string& t = n.op_type();
  const bool nary = t == "Sum" || t == "Mean" || t == "Max" || t == "Min";
  if (nary && n.input_size() == 1) return cx.set_alias(n, 0, cx.in(n, 0));
  if (nary && (n.input_size() > 2 || t == "Mean")) {
    // Three or more same-shape tensors (and Mean): a chain of add / max / min stages.
    run_value a = cx.float_in(n, 0);
    std::vector<eltwise_stage> stages;
    for (int k = 1; k < n.input_size(); ++k) {
      run_value b = cx.float_in(n, k);
      if (b.shape != a.shape)
        cx.fail(n, "inputs " + shape_str(a.shape) + " and " + shape_str(b.shape) +
                       " differ: broadcasting over more than two inputs is not supported");
      b = cx.to_layout(b, a.layout, n.output(0) + "/" + std::to_string(k));
      stages.push_back(operand_stage(operand_kind(t), b.id));
    }
    if (t == "Mean") stages.push_back(stage(stage_kind::scale, 1.f / float(n.input_size())));
    return cx.set_run(n, 0, emit(cx, n, a, std::move(stages)));
  }
  if (n.input_size() != 2) cx.fail(n, "takes two inputs, not " + std::to_string(n.input_size()));
  const bool c0 = cx.is_const(n, 0), c1 = cx.is_const(n, 1);
  const bool any_type = is_compare(t);  // integer / bool constants compare as float values
  if (c1 && !c0) {
    if (!any_type && !cx.in(n, 1).c.is_float())
      cx.fail(n, "operand '" + n.input(1) + "' is not float");
    return binary_with_constant(cx, n, cx.float_in(n, 0), cx.in(n, 1).c, false);
  }
  if (c0 && !c1) {
    if (!any_type && !cx.in(n, 0).c.is_float())
      cx.fail(n, "operand '" + n.input(0) + "' is not float");
    return binary_with_constant(cx, n, cx.float_in(n, 1), cx.in(n, 0).c, true);
  }
  run_value a = cx.float_in(n, 0), b = cx.float_in(n, 1);
  // Add and Mul commute: the data input should be the operand used only here (a conv's output
  // in a residual block), so that the plan can fuse the stage into its producer; the operand
  // others also read (the skip connection) becomes the stage's operand.
  auto uses = [&](int k) {
    const auto it = cx.consumers.find(n.input(k));
    return it == cx.consumers.end() ? 0 : it->second;
  };
  if (commutes(t) && a.shape == b.shape && uses(0) > 1 && uses(1) == 1) std::swap(a, b);
  if (a.shape == b.shape) {
    return operand_of(cx, n, a, cx.to_layout(b, a.layout, n.output(0) + "/rhs"), false);
  }
  std::vector<index_t> out;
  if (!broadcast_shape(a.shape, b.shape, out))
    cx.fail(n, "shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) + " do not broadcast");
  // One operand one value per channel of the other (a squeeze-excite gate at batch 1): a
  // per-channel stage, no copy.
  if (commutes(t) && numel(b.shape) > numel(a.shape)) std::swap(a, b);
  if (a.shape.size() == 4) a = cx.as_image(a, n.output(0));
  if (a.shape == out && numel(b.shape) == channels(a)) {
    const run_value& x = a;
    std::vector<index_t> bs(x.shape.size() - std::min(x.shape.size(), b.shape.size()), 1);
    bs.insert(bs.end(), b.shape.begin(), b.shape.end());
    const std::size_t axis = x.shape.size() == 4 ? 1 : x.shape.size() - 1;
    if (bs.size() == x.shape.size() && bs[axis] == channels(x)) {
      return operand_of(cx, n, x, b, true);
    }
  }
  // General: each operand expanded to the output's shape (in the first one's layout), then
  // one same-shape stage.
  if (a.shape != out) a = cx.broadcast(a, out, a.layout, n.output(0) + "/expand_a");
  if (b.shape != out) b = cx.broadcast(b, out, a.layout, n.output(0) + "/expand_b");
  operand_of(cx, n, a, cx.to_layout(b, a.layout, n.output(0) + "/rhs"), false);
}
}  // namespace

void import_binary(context& cx, const node_proto& n) {
  binary_body(cx, n);
  // Comparisons and logic give a bool tensor: f32 0 / 1 in the graph (stage_list.hpp).
  if (is_compare(n.op_type())) cx.values[n.output(0)].r.boolean = true;
}

void import_not(context& cx, const node_proto& n) {
  cx.only_attrs(n, {});
  run_value y = emit(cx, n, cx.float_in(n, 0), {stage(stage_kind::logical_not)});
  y.boolean = true;
  cx.set_run(n, 0, y);
}

// Where(c, a, b) = keep_if(a, c) + keep_unless(b, c): exact for every value (x + 0 = x), in
// two passes (b's masked copy, then a's masked and added); every input expanded to the
// output's shape, in the image layout when 4-D.
void import_where(context& cx, const node_proto& n) {
  cx.only_attrs(n, {});
  if (n.input_size() != 3) cx.fail(n, "takes three inputs, not " + std::to_string(n.input_size()));
  std::vector<index_t> shapes[3], s1, out;
  for (int k = 0; k < 3; ++k) {
    const value& v = cx.in(n, k);
    shapes[k] = v.is_const ? v.c.shape : v.r.shape;
  }
  if (!broadcast_shape(shapes[0], shapes[1], s1) || !broadcast_shape(s1, shapes[2], out))
    cx.fail(n, "shapes " + shape_str(shapes[0]) + ", " + shape_str(shapes[1]) + " and " +
                   shape_str(shapes[2]) + " do not broadcast");
  // 4-D: the model's image layout; else plain.
  const tensor_layout layout = out.size() == 4 ? cx.image_layout() : tensor_layout::plain;
  run_value v[3];
  for (int k = 0; k < 3; ++k) {
    if (k > 0 && cx.is_const(n, k) && !cx.in(n, k).c.is_float())
      cx.fail(n, "input '" + n.input(k) + "' is " + elem_name(cx.in(n, k).c.elem) +
                     ": kfuse selects float32 values");
    v[k] = k == 0 && cx.is_const(n, 0) ? cx.run_in(n, 0) : cx.float_in(n, k);
    const std::string name = n.output(0) + "/" + std::to_string(k);
    if (v[k].shape != out)
      v[k] = cx.broadcast(v[k], out, layout, name);
    else if (out.size() == 4)
      v[k] = cx.to_layout(cx.as_image(v[k], name), layout, name + "/image");
    else
      v[k] = cx.as_plain(v[k], name);
  }
  const tensor_id rest = cx.g.eltwise(cx.unique(n.output(0) + "/else"), v[2].id,
                                      {operand_stage(stage_kind::keep_unless, v[0].id)});
  run_value y =
      emit(cx, n, v[1],
           {operand_stage(stage_kind::keep_if, v[0].id), operand_stage(stage_kind::add, rest)});
  y.boolean = v[1].boolean && v[2].boolean;  // a choice between bools is a bool
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail
