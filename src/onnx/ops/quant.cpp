// QuantizeLinear / DequantizeLinear (opsets 10-17; per tensor, or per axis on constants and on
// the channel axis of run-time data). A QDQ model keeps ONNX's fp32 semantics exactly: Q is the
// graph's quantize (round half to even, saturate), DQ its dequantize, the weights' DQ is
// evaluated at load time, and the scales of the activations are recorded on the tensors
// (graph::set_quant), so an int8 plan of the model uses the model's own quantization instead of
// a calibration.
#include <cmath>
#include <limits>

#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

struct qparams {
  const_value scale, zero;  // zero: 0 of the quantized type when absent
  std::int32_t qelem = elem_uint8;
  int axis = -1;      // the per-axis axis (normalized), -1: per tensor
  index_t count = 1;  // values of scale / zero
};

qparams qparams_of(context& cx, const node_proto& n, const std::vector<index_t>& x_shape,
                   std::int32_t qelem_default) {
  cx.only_attrs(n, {"axis"});
  qparams q;
  q.scale = cx.const_in(n, 1, "scale");
  if (!q.scale.is_float()) cx.fail(n, "scale is " + elem_name(q.scale.elem) + ", not float");
  q.qelem = qelem_default;
  if (cx.has_input(n, 2)) {
    q.zero = cx.const_in(n, 2, "zero point");
    q.qelem = q.zero.elem;
  } else {
    q.zero = make_const(qelem_default, q.scale.shape);
  }
  if (q.qelem != elem_uint8 && q.qelem != elem_int8 && q.qelem != elem_int32)
    cx.fail(n, "zero point is " + elem_name(q.qelem) + " (uint8, int8 or int32)");
  q.count = q.scale.numel();
  if (q.zero.numel() != q.count)
    cx.fail(n, "scale has " + std::to_string(q.count) + " values, zero point " +
                   std::to_string(q.zero.numel()));
  for (index_t k = 0; k < q.count; ++k)
    if (!(q.scale.at(k) > 0) || !std::isfinite(q.scale.at(k)))
      cx.fail(n, "scale " + std::to_string(q.scale.at(k)) + " must be positive and finite");
  if (q.scale.shape.size() > 1) cx.fail(n, "scale must be a scalar or 1-D");
  if (q.count > 1 || (cx.opset >= 13 && q.scale.shape.size() == 1 && cx.attr(n, "axis"))) {
    q.axis = norm_axis(cx, n, cx.attr_int(n, "axis", 1), int(x_shape.size()));
    if (x_shape[std::size_t(q.axis)] != q.count)
      cx.fail(n, "scale has " + std::to_string(q.count) + " values, axis " +
                     std::to_string(q.axis) + " has " +
                     std::to_string(x_shape[std::size_t(q.axis)]));
    if (q.count == 1) q.axis = -1;
  }
  return q;
}

// The scale / zero point index of flat element k of x.
index_t param_index(const qparams& q, const std::vector<index_t>& shape, index_t k) {
  if (q.axis < 0) return 0;
  index_t inner = 1;
  for (std::size_t d = std::size_t(q.axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  return (k / inner) % shape[std::size_t(q.axis)];
}

double qmin(std::int32_t e) { return e == elem_uint8 ? 0 : e == elem_int8 ? -128 : -2147483648.0; }
double qmax(std::int32_t e) { return e == elem_uint8 ? 255 : e == elem_int8 ? 127 : 2147483647.0; }

// Per-axis QuantizeLinear of run-time data over its channel axis: round(x / scale) + zero,
// saturated, as one eltwise chain (per-channel div, round, bias, clamp), written as the integers
// (grid {1, 0}: a per-axis DequantizeLinear reads them back).
void quantize_per_channel(context& cx, const node_proto& n, run_value x, const qparams& q) {
  if (x.shape.size() == 4) x = cx.as_image(x, n.output(0));
  const bool channel_axis = (x.shape.size() == 4 && q.axis == 1) ||
                            (x.layout == tensor_layout::plain && q.axis == int(x.shape.size()) - 1);
  if (!channel_axis)
    cx.fail(n, "per-axis quantization of run-time data over axis " + std::to_string(q.axis) +
                   " (supported: the channel axis of an image, the last axis)");
  const_value scale = make_const(elem_float, {q.count}), zero = make_const(elem_float, {q.count});
  for (index_t k = 0; k < q.count; ++k) {
    scale.f[std::size_t(k)] = float(q.scale.at(k));
    zero.f[std::size_t(k)] = float(q.zero.at(k));
  }
  const run_value s = cx.graph_constant(scale, cx.unique(n.output(0) + "/scale"));
  const run_value z = cx.graph_constant(zero, cx.unique(n.output(0) + "/zero"));
  const tensor_id yf =
      cx.g.eltwise(cx.unique(n.output(0) + "/levels"), x.id,
                   {{stage_kind::div, 0, 0, s.id, true},
                    {stage_kind::round},
                    {stage_kind::bias, 0, 0, z.id},
                    {stage_kind::clamp, float(qmin(q.qelem)), float(qmax(q.qelem))}});
  const dtype to = q.qelem == elem_uint8 ? dtype::u8 : dtype::i8;
  run_value y = x;
  y.id = cx.g.quantize(cx.out_name(n), yf, to, {1.f, 0});
  y.type = to;
  cx.set_run(n, 0, y);
}

// QuantizeLinear with a run-time scale or zero point (one value each: DynamicQuantizeLinear's
// expanded form): x / scale, round, + zero point, clamp, as eltwise stages on operands
// broadcast to x's shape, written as the integers (grid {1, 0}).
void quantize_runtime(context& cx, const node_proto& n, run_value x) {
  cx.only_attrs(n, {"axis"});
  x = cx.as_plain(x, n.output(0) + "/plain");
  auto one_value = [&](int k, const char* what) {
    const value& v = cx.in(n, k);
    const index_t count = v.is_const ? v.c.numel() : numel(v.r.shape);
    if (count != 1)
      cx.fail(n, std::string(what) + " has " + std::to_string(count) +
                     " values: a run-time scale or zero point must be one value");
  };
  one_value(1, "scale");
  std::int32_t qelem = elem_uint8;
  if (cx.has_input(n, 2)) {
    one_value(2, "zero point");
    const value& z = cx.in(n, 2);
    qelem = z.is_const              ? z.c.elem
            : z.r.type == dtype::i8 ? std::int32_t(elem_int8)
            : z.r.type == dtype::u8 ? std::int32_t(elem_uint8)
                                    : std::int32_t(elem_float);
    if (qelem != elem_uint8 && qelem != elem_int8)
      cx.fail(n, "zero point is " +
                     (z.is_const ? elem_name(qelem) : std::string(dtype_name(z.r.type))) +
                     " (uint8 or int8)");
  }
  // A run-time value as f32 [1] (a uint8 / int8 zero point as its integer value).
  auto as_float = [&](int k) {
    const value& v = cx.in(n, k);
    if (v.is_const || v.r.type == dtype::f32) return cx.run_in(n, k);
    return integers_as_f32(cx, n, k, v.r, cx.unique(n.output(0) + "/zero_f"));
  };
  auto spread = [&](run_value v, const char* tag) {  // [1] -> x's shape
    v.shape = {1};
    return cx.broadcast(v, x.shape, tensor_layout::plain, n.output(0) + "/" + tag).id;
  };
  std::vector<eltwise_stage> st = {{stage_kind::div, 0, 0, spread(cx.float_in(n, 1), "scale")},
                                   {stage_kind::round}};
  if (cx.has_input(n, 2)) st.push_back({stage_kind::add, 0, 0, spread(as_float(2), "zero")});
  st.push_back({stage_kind::clamp, float(qmin(qelem)), float(qmax(qelem))});
  const tensor_id levels = cx.g.eltwise(cx.unique(n.output(0) + "/levels"), x.id, st);
  const dtype to = qelem == elem_uint8 ? dtype::u8 : dtype::i8;
  run_value y = x;
  y.id = cx.g.quantize(cx.out_name(n), levels, to, {1.f, 0});
  y.type = to;
  cx.set_run(n, 0, y);
}

}  // namespace

run_value integers_as_f32(context& cx, const node_proto& n, int k, const run_value& x,
                          const std::string& name) {
  const tensor_desc& td = cx.g.tensor(x.id);
  if (td.has_quant && (td.quant.scale != 1.f || td.quant.zero_point != 0))
    cx.fail(n, "input '" + n.input(k) + "' is quantized with scale " +
                   std::to_string(td.quant.scale) + ": its integers are not available");
  if (!td.has_quant) cx.g.set_quant(x.id, {1.f, 0});
  run_value y = x;
  y.id = cx.g.dequantize(name, x.id);
  y.type = dtype::f32;
  return y;
}

void fold_quantize_linear(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  if (!x.is_float()) cx.fail(n, "input is " + elem_name(x.elem) + ", not float");
  const qparams q = qparams_of(cx, n, x.shape, elem_uint8);
  if (q.qelem == elem_int32) cx.fail(n, "an int32 output is not supported (uint8, int8)");
  const_value y = make_const(q.qelem, x.shape);
  for (index_t k = 0; k < x.numel(); ++k) {
    const index_t p = param_index(q, x.shape, k);
    const double v = std::nearbyint(x.at(k) / q.scale.at(p)) + q.zero.at(p);
    y.i[std::size_t(k)] = std::int64_t(std::clamp(v, qmin(q.qelem), qmax(q.qelem)));
  }
  cx.set_const(n, 0, std::move(y));
}

void fold_dequantize_linear(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  if (x.elem != elem_uint8 && x.elem != elem_int8 && x.elem != elem_int32)
    cx.fail(n, "input is " + elem_name(x.elem) + " (uint8, int8 or int32)");
  const qparams q = qparams_of(cx, n, x.shape, x.elem);
  const_value y = make_const(elem_float, x.shape);
  for (index_t k = 0; k < x.numel(); ++k) {
    const index_t p = param_index(q, x.shape, k);
    y.f[std::size_t(k)] = float((x.at(k) - q.zero.at(p)) * q.scale.at(p));
  }
  cx.set_const(n, 0, std::move(y));
}

void import_quantize_linear(context& cx, const node_proto& n) {
  const run_value x = cx.float_in(n, 0);
  const bool runtime_params = !cx.is_const(n, 1) || (cx.has_input(n, 2) && !cx.is_const(n, 2));
  if (runtime_params) return quantize_runtime(cx, n, x);
  const qparams q = qparams_of(cx, n, x.shape, elem_uint8);
  if (q.qelem == elem_int32) cx.fail(n, "an int32 output is not supported (uint8, int8)");
  if (q.axis >= 0) return quantize_per_channel(cx, n, x, q);
  const tensor_quant tq{float(q.scale.at(0)), std::int32_t(q.zero.at(0))};
  const dtype to = q.qelem == elem_uint8 ? dtype::u8 : dtype::i8;
  cx.g.set_quant(x.id, tq);  // an int8 plan quantizes the producer's output the same way
  run_value y = x;
  y.id = cx.g.quantize(cx.out_name(n), x.id, to, tq);
  y.type = to;
  cx.set_run(n, 0, y);
}

void import_dequantize_linear(context& cx, const node_proto& n) {
  const run_value x = cx.run_in(n, 0);
  if (x.type != dtype::u8 && x.type != dtype::i8)
    cx.fail(n, "input '" + n.input(0) + "' is " + std::string(dtype_name(x.type)) +
                   " (uint8 or int8 at run time)");
  const qparams q = qparams_of(cx, n, x.shape, x.type == dtype::u8 ? elem_uint8 : elem_int8);
  const tensor_desc& td = cx.g.tensor(x.id);
  run_value y = x;
  y.type = dtype::f32;
  if (q.axis < 0) {
    const tensor_quant tq{float(q.scale.at(0)), std::int32_t(q.zero.at(0))};
    if (td.has_quant && (td.quant.scale != tq.scale || td.quant.zero_point != tq.zero_point))
      cx.fail(n, "input '" + n.input(0) + "' was quantized with scale " +
                     std::to_string(td.quant.scale) + ", zero point " +
                     std::to_string(td.quant.zero_point) + ": requantizing is not supported");
    if (!td.has_quant) cx.g.set_quant(x.id, tq);  // a quantized model input
    y.id = cx.g.dequantize(cx.out_name(n), x.id);
    cx.g.set_quant(y.id, tq);  // its int8 consumers requantize it exactly
    return cx.set_run(n, 0, y);
  }
  // Per axis: the integers as floats, then (x - zero) * scale per channel of that axis.
  const bool channel_axis = (x.shape.size() == 4 && q.axis == 1) ||
                            (x.layout == tensor_layout::plain && q.axis == int(x.shape.size()) - 1);
  if (!channel_axis)
    cx.fail(n, "per-axis dequantization of run-time data over axis " + std::to_string(q.axis) +
                   " (supported: the channel axis of an image, the last axis)");
  if (td.has_quant && (td.quant.scale != 1.f || td.quant.zero_point != 0))
    cx.fail(n, "input '" + n.input(0) + "' has per-tensor quantization parameters already");
  cx.g.set_quant(x.id, {1.f, 0});
  run_value ints = x;
  ints.id = cx.g.dequantize(cx.unique(n.output(0) + "/ints"), x.id);
  ints.type = dtype::f32;
  if (x.shape.size() == 4) ints = cx.as_image(ints, n.output(0));
  const_value neg_zero = make_const(elem_float, {q.count}),
              scale = make_const(elem_float, {q.count});
  for (index_t k = 0; k < q.count; ++k) {
    neg_zero.f[std::size_t(k)] = -float(q.zero.at(k));
    scale.f[std::size_t(k)] = float(q.scale.at(k));
  }
  const run_value z = cx.graph_constant(neg_zero, cx.unique(n.output(0) + "/neg_zero"));
  const run_value s = cx.graph_constant(scale, cx.unique(n.output(0) + "/scale"));
  y = ints;
  y.id = cx.g.eltwise(cx.out_name(n), ints.id,
                      {{stage_kind::bias, 0, 0, z.id}, {stage_kind::mul, 0, 0, s.id, true}});
  cx.set_run(n, 0, y);
}

// DynamicQuantizeLinear (uint8): scale = (max(x, 0) - min(x, 0)) / 255, zero point =
// round(clip(-min(x, 0) / scale, 0, 255)), y = clip(round(x / scale) + zero point, 0, 255): the
// steps of ONNX's function body, each one IEEE operation (so the results are ONNX's bit for bit),
// on two reductions and eltwise chains. y and the zero point are uint8 with the grid {1, 0}
// (their integer values), as MatMulInteger / ConvInteger read them.
void import_dynamic_quantize_linear(context& cx, const node_proto& n) {
  cx.only_attrs(n, {});
  const run_value x = cx.as_plain(cx.float_in(n, 0), n.output(0) + "/plain");
  const std::string base = n.output(0);
  const float big = std::numeric_limits<float>::max();
  auto chain = [&](const std::string& name, tensor_id in, std::vector<eltwise_stage> st) {
    return cx.g.eltwise(cx.unique(name), in, std::move(st));
  };
  auto scalar_out = [&](tensor_id id, dtype t) {
    run_value r;
    r.id = id;
    r.type = t;
    return r;  // shape {}: a scalar
  };
  const tensor_id xmax = cx.g.reduce(cx.unique(base + "/max"), x.id, reduce_kind::max, {}, false);
  const tensor_id xmin = cx.g.reduce(cx.unique(base + "/min"), x.id, reduce_kind::min, {}, false);
  const tensor_id c255 = cx.graph_constant(scalar_vector(1, 255.f), cx.unique(base + "/255")).id;
  // -min(x, 0) >= 0 (a negation is exact: max - min = max + (-min)).
  const tensor_id neg_lo =
      chain(base + "/neg_lo", xmin, {{stage_kind::clamp, -big, 0.f}, {stage_kind::scale, -1.f}});
  const tensor_id scale = chain(base + "/scale", xmax,
                                {{stage_kind::clamp, 0.f, big},
                                 {stage_kind::add, 0, 0, neg_lo},
                                 {stage_kind::div, 0, 0, c255}});
  const tensor_id zero =
      chain(base + "/zero_f", neg_lo,
            {{stage_kind::div, 0, 0, scale}, {stage_kind::clamp, 0.f, 255.f}, {stage_kind::round}});
  const run_value scale_b =
      cx.broadcast(scalar_out(scale, dtype::f32), x.shape, tensor_layout::plain, base + "/scale_b");
  const run_value zero_b =
      cx.broadcast(scalar_out(zero, dtype::f32), x.shape, tensor_layout::plain, base + "/zero_b");
  const tensor_id yf = chain(base + "/y_f", x.id,
                             {{stage_kind::div, 0, 0, scale_b.id},
                              {stage_kind::round},
                              {stage_kind::add, 0, 0, zero_b.id},
                              {stage_kind::clamp, 0.f, 255.f}});
  run_value y = x;  // integers in [0, 255]: their quantization with {1, 0} is exact
  y.id = cx.g.quantize(cx.out_name(n, 0), yf, dtype::u8, {1.f, 0});
  y.type = dtype::u8;
  cx.set_run(n, 0, y);
  if (n.output_size() > 1 && !n.output(1).empty()) {
    // An output of its own (the chain's tensor also feeds y's broadcast).
    cx.set_run(n, 1, scalar_out(cx.g.scale(cx.out_name(n, 1), scale, 1.f), dtype::f32));
  }
  if (n.output_size() > 2 && !n.output(2).empty())
    cx.set_run(n, 2,
               scalar_out(cx.g.quantize(cx.out_name(n, 2), zero, dtype::u8, {1.f, 0}), dtype::u8));
}

}  // namespace kfuse::onnx::detail
