#pragma once
// cast: element type conversion as a graph op: between float types, quantize (f32 -> u8 / i8
// with the node's params) and dequantize (u8 / i8 -> f32 with the input's), integer ids and masks
// to f32, and f32 to i32 / i64 (C's conversion: toward zero, saturated; NaN -> 0). convert_input()
// is the same conversion inserted by other ops' lowering (bf16 or u8 activations for a kernel).
#include <cmath>
#include <limits>

#include "kfuse/graph/ops/copy.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/graph/ops/rows.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct convert_params {
  rows_shape shape;
  quant_params q;  // quantize / dequantize (per tensor)
};

/// Element type conversion In -> Out through epilogue Ep (cast, quantize, dequantize, none).
template <class A, class B, class In, class Out, class Ep>
void convert_cmd(const command& c) {
  const auto& p = *static_cast<const convert_params*>(c.params);
  Ep ep{};
  if constexpr (std::is_same_v<Ep, epilogue<quantize<elem_of<Out>>>>)
    ep = Ep{quantize<elem_of<Out>>{p.q}};
  else if constexpr (std::is_same_v<Ep, epilogue<dequantize>>)
    ep = Ep{dequantize{p.q}};
  run_rows_cmd<simd::vec_for<A, B>, In, Out>(c, p.shape, ep);
}

/// Integer data (an attention mask, ids) as f32: small tensors, a scalar loop.
template <class I>
void int_to_f32_cmd(const command& c) {
  const auto& p = *static_cast<const convert_params*>(c.params);
  const I* in = static_cast<const I*>(c.in[0]);
  float* out = static_cast<float*>(c.out);
  for (index_t i = 0; i < p.shape.numel; ++i) out[i] = float(in[i]);
}

/// f32 -> I toward zero (ONNX Cast, C's conversion), saturated at I's range, NaN -> 0: a
/// scalar loop (integer results are small tensors: MatMulInteger's, a shape's).
template <class I>
void f32_to_int_cmd(const command& c) {
  const auto& p = *static_cast<const convert_params*>(c.params);
  const float* in = static_cast<const float*>(c.in[0]);
  I* out = static_cast<I*>(c.out);
  constexpr double lo = double(std::numeric_limits<I>::min());
  constexpr double hi = double(std::numeric_limits<I>::max());
  for (index_t i = 0; i < p.shape.numel; ++i) {
    const double v = std::trunc(double(in[i]));
    out[i] = v != v    ? I(0)
             : v <= lo ? std::numeric_limits<I>::min()
             : v >= hi ? std::numeric_limits<I>::max()
                       : I(v);
  }
}

struct cast_rule : op_rule {
  static constexpr op_kind kind = op_kind::cast;
  using attributes = cast_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const cast_params& attr = n.attr<cast_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    const dtype to = attr.to;
    const bool q_in = x.type == dtype::i8 || x.type == dtype::u8;
    const bool q_out = to == dtype::i8 || to == dtype::u8;
    const bool int_in = x.type == dtype::i32 || x.type == dtype::i64;
    const bool int_out = to == dtype::i32 || to == dtype::i64;
    if ((int_out && x.type != dtype::f32) || (int_in && to != dtype::f32))
      cx.fail_node(n, "from " + std::string(dtype_name(x.type)) + " to " +
                          std::string(dtype_name(to)) +
                          ": integer tensors (ids, masks) cast to f32 only, and only f32 to them");
    if (q_in && q_out)
      cx.fail_node(n, "from " + std::string(dtype_name(x.type)) + " to " +
                          std::string(dtype_name(to)) + ": dequantize, then quantize");
    if (q_in && !x.has_quant)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                          " without quant params (graph::set_quant)");
    if (q_in && to != dtype::f32) cx.fail_node(n, "dequantize produces f32");
    if (q_out && !(attr.quant.scale > 0.f && std::isfinite(attr.quant.scale)))
      cx.fail_node(n, "quantize scale must be positive and finite");
    if (q_out && (attr.quant.zero_point < (to == dtype::u8 ? 0 : -128) ||
                  attr.quant.zero_point > (to == dtype::u8 ? 255 : 127)))
      cx.fail_node(n, "quantize zero point " + std::to_string(attr.quant.zero_point) +
                          " is outside the range of " + std::string(dtype_name(to)));
    cx.set_out(n, x.shape, to, x.layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const cast_params& attr = n.attr<cast_params>();
    const plan_tensor& x = cx.T(s.x);
    const dtype to = attr.to, from = x.type;
    auto p = std::make_shared<convert_params>();
    p->shape = make_rows(shape_numel(x.shape), 0, false, 0);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    c.begin = 0;
    c.end = p->shape.rows;
    if (to == dtype::i32 || to == dtype::i64) {
      info.kernel = "cast f32->" + std::string(dtype_name(to));
      c.fn = to == dtype::i64 ? &f32_to_int_cmd<std::int64_t> : &f32_to_int_cmd<std::int32_t>;
    } else if (from == dtype::i32 || from == dtype::i64) {
      info.kernel = "cast " + std::string(dtype_name(from)) + "->f32";
      c.fn = from == dtype::i64 ? &int_to_f32_cmd<std::int64_t> : &int_to_f32_cmd<std::int32_t>;
    } else if (to == dtype::i8 || to == dtype::u8) {
      p->q = {attr.quant.scale, attr.quant.zero_point};
      info.kernel = "quantize";
      if (from != dtype::f32) cx.fail_node(n, "quantize takes f32 input");
      c.fn = to == dtype::i8 ? &convert_cmd<A, B, float, std::int8_t, epilogue<quantize<i8>>>
                             : &convert_cmd<A, B, float, std::uint8_t, epilogue<quantize<u8>>>;
    } else if (from == dtype::i8 || from == dtype::u8) {
      p->q = {x.quant.scale, x.quant.zero_point};
      info.kernel = "dequantize";
      c.fn = from == dtype::i8 ? &convert_cmd<A, B, std::int8_t, float, epilogue<dequantize>>
                               : &convert_cmd<A, B, std::uint8_t, float, epilogue<dequantize>>;
    } else {
      info.kernel = "cast " + std::string(dtype_name(from)) + "->" + std::string(dtype_name(to));
      if (from == to && from != dtype::f32) {
        c.fn = &slice_copy_cmd;
        c.params = cx.own(std::make_shared<slice_params>(whole_copy(x.bytes)));
        cmds.push_back(c);
        return;
      }
      c.fn = float_cast_fn<A, B>(from, to);
    }
    info.bytes = double(x.bytes) + double(cx.T(s.out).bytes);
    c.threads = cx.threads_for(info.bytes, 0);
    c.params = cx.own(p);
    cmds.push_back(c);
  }

  /// The command converting between two float types.
  template <class A, class B>
  static command_fn float_cast_fn(dtype from, dtype to) {
    if (from == to) return &convert_cmd<A, B, float, float, epilogue<>>;
    if (from == dtype::f32 && to == dtype::bf16)
      return &convert_cmd<A, B, float, bf16_t, epilogue<cast<bf16>>>;
    if (from == dtype::f32 && to == dtype::f16)
      return &convert_cmd<A, B, float, f16_t, epilogue<cast<f16>>>;
    if (from == dtype::bf16 && to == dtype::f32)
      return &convert_cmd<A, B, bf16_t, float, epilogue<>>;
    if (from == dtype::f16 && to == dtype::f32) return &convert_cmd<A, B, f16_t, float, epilogue<>>;
    if (from == dtype::bf16 && to == dtype::f16)
      return &convert_cmd<A, B, bf16_t, f16_t, epilogue<cast<f16>>>;
    return &convert_cmd<A, B, f16_t, bf16_t, epilogue<cast<bf16>>>;
  }
};

/// A conversion of step s's f32 input into a new arena tensor of type `to` (bf16, or u8 with
/// params q) for a kernel that reads that type; returns the new tensor.
template <class A, class B>
std::int32_t convert_input(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                           dtype to, tensor_quant q, std::vector<detail::plan_command>& cmds) {
  const plan_tensor& x = cx.T(s.x);
  if (x.type != dtype::f32)
    cx.fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                        "; this precision needs f32 or " + std::string(dtype_name(to)));
  const std::size_t x_bytes = x.bytes;
  const std::int32_t t = cx.new_tensor(n.name + ".in_" + std::string(dtype_name(to)), x.shape, to);
  auto p = std::make_shared<convert_params>();
  p->shape = make_rows(shape_numel(cx.T(t).shape), 0, false, 0);
  p->q = {q.scale, q.zero_point};
  detail::plan_command c;
  c.in[0] = s.x;
  c.out = t;
  c.begin = 0;
  c.end = p->shape.rows;
  c.threads = cx.threads_for(double(x_bytes) * 1.5, 0);
  if (to == dtype::bf16)
    c.fn = &convert_cmd<A, B, float, bf16_t, epilogue<cast<bf16>>>;
  else
    c.fn = &convert_cmd<A, B, float, std::uint8_t, epilogue<quantize<u8>>>;
  c.params = cx.own(p);
  cmds.push_back(c);
  return t;
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
