// Shape and data-movement ops: Reshape Flatten Squeeze Unsqueeze Concat Cast on run-time data
// (graph reshape / concat nodes), and the load-time evaluation of the shape arithmetic that
// exporters emit (Shape Gather Slice Concat Unsqueeze Cast Range ConstantOfShape Expand ...).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "../tensor.hpp"
#include "kfuse/types/convert.hpp"
#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

// The axes of Squeeze / Unsqueeze: an attribute before opset 13, an input from 13 on.
std::vector<std::int64_t> axes_of(const context& cx, const node_proto& n, bool* given) {
  if (cx.opset < 13 || cx.attr(n, "axes")) {
    *given = cx.attr(n, "axes") != nullptr;
    return cx.attr_ints(n, "axes");
  }
  *given = cx.has_input(n, 1);
  return *given ? cx.ints_in(n, 1, "axes") : std::vector<std::int64_t>{};
}

}  // namespace

std::vector<index_t> reshape_target(const context& cx, const node_proto& n,
                                    const std::vector<index_t>& in,
                                    const std::vector<std::int64_t>& target, bool allowzero) {
  std::vector<index_t> out(target.begin(), target.end());
  int unknown = -1;
  index_t known = 1;
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 0 && !allowzero) {
      if (d >= in.size())
        cx.fail(n, "shape has 0 at axis " + std::to_string(d) + " past the input's rank");
      out[d] = in[d];
    }
    if (out[d] == -1) {
      if (unknown >= 0) cx.fail(n, "shape " + shape_str(out) + " has more than one -1");
      unknown = int(d);
    } else if (out[d] < 0) {
      cx.fail(n, "shape has a negative extent " + std::to_string(out[d]));
    } else if (__builtin_mul_overflow(known, out[d], &known)) {
      cx.fail(n, "shape " + shape_str(out) + " overflows");
    }
  }
  const index_t total = numel(in);
  if (unknown >= 0) {
    if (known == 0 || total % known != 0)
      cx.fail(n, "cannot infer -1 in " + shape_str(out) + " for " + std::to_string(total) +
                     " elements");
    out[std::size_t(unknown)] = total / known;
  }
  if (numel(out) != total)
    cx.fail(n, "input " + shape_str(in) + " has " + std::to_string(total) + " elements, shape " +
                   shape_str(out) + " " + std::to_string(numel(out)));
  return out;
}

std::vector<index_t> reshaped_shape(const context& cx, const node_proto& n,
                                    const std::vector<index_t>& in) {
  const std::string& t = n.op_type();
  const int rank = int(in.size());
  if (t == "Reshape") {
    cx.only_attrs(n, {"allowzero"});
    return reshape_target(cx, n, in, cx.ints_in(n, 1, "shape"),
                          cx.attr_int(n, "allowzero", 0) != 0);
  }
  if (t == "Flatten") {
    cx.only_attrs(n, {"axis"});
    std::int64_t a = cx.attr_int(n, "axis", 1);
    if (a < -rank || a > rank) cx.fail(n, "axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    index_t rows = 1, cols = 1;
    for (int d = 0; d < rank; ++d) (d < a ? rows : cols) *= in[std::size_t(d)];
    return {rows, cols};
  }
  bool given = false;
  const std::vector<std::int64_t> axes = axes_of(cx, n, &given);
  if (t == "Squeeze") {
    std::vector<bool> drop(in.size(), false);
    if (!given)
      for (int d = 0; d < rank; ++d) drop[std::size_t(d)] = in[std::size_t(d)] == 1;
    for (std::int64_t a : axes) {
      const int d = norm_axis(cx, n, a, rank);
      if (in[std::size_t(d)] != 1)
        cx.fail(n, "axis " + std::to_string(a) + " has extent " +
                       std::to_string(in[std::size_t(d)]) + ", not 1");
      drop[std::size_t(d)] = true;
    }
    std::vector<index_t> out;
    for (int d = 0; d < rank; ++d)
      if (!drop[std::size_t(d)]) out.push_back(in[std::size_t(d)]);
    return out;
  }
  // Unsqueeze
  if (!given) cx.fail(n, "axes are required");
  const int out_rank = rank + int(axes.size());
  std::vector<bool> is_new(std::size_t(out_rank), false);
  for (std::int64_t a : axes) {
    const int d = norm_axis(cx, n, a, out_rank);
    if (is_new[std::size_t(d)]) cx.fail(n, "axis " + std::to_string(a) + " is repeated");
    is_new[std::size_t(d)] = true;
  }
  std::vector<index_t> out;
  std::size_t src = 0;
  for (int d = 0; d < out_rank; ++d) out.push_back(is_new[std::size_t(d)] ? 1 : in[src++]);
  return out;
}

void import_reshape(context& cx, const node_proto& n) {
  const value& v = cx.in(n, 0);
  const std::vector<index_t> shape = reshaped_shape(cx, n, v.r.shape);
  const run_value x = cx.run_in(n, 0);
  if (shape == x.shape) return cx.set_alias(n, 0, cx.in(n, 0));
  cx.set_run(n, 0, cx.reshape(x, shape, n.output(0)));
}

void fold_reshape(context& cx, const node_proto& n) {
  const_value c = cx.in(n, 0).c;
  c.shape = reshaped_shape(cx, n, c.shape);
  cx.set_const(n, 0, std::move(c));
}

void import_concat(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"axis"});
  if (!cx.attr(n, "axis")) cx.fail(n, "attribute 'axis' is required");
  // The first run-time input sets the layout; constants follow it.
  int first = 0;
  while (first < n.input_size() && cx.is_const(n, first)) ++first;
  run_value x0 = cx.float_in(n, first);
  if (x0.shape.size() == 4) x0 = cx.as_image(x0, n.output(0));
  const int rank = int(x0.shape.size());
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", 0), rank);
  std::vector<tensor_id> ids;
  std::vector<index_t> shape = x0.shape;
  shape[std::size_t(axis)] = 0;
  for (int k = 0; k < n.input_size(); ++k) {
    run_value x;
    if (cx.is_const(n, k) && cx.in(n, k).c.numel() == 0) continue;  // empty: adds nothing
    if (cx.is_const(n, k)) {
      const const_value& c = cx.in(n, k).c;
      if (!c.is_float()) cx.fail(n, "input '" + n.input(k) + "' is " + elem_name(c.elem));
      x = cx.graph_constant(c, cx.unique(n.input(k) + "/" + std::string(layout_name(x0.layout))),
                            x0.layout);
    } else {
      x = cx.to_layout(cx.float_in(n, k), x0.layout, n.output(0) + "/" + std::to_string(k));
    }
    if (x.shape.size() != x0.shape.size())
      cx.fail(n, "input '" + n.input(k) + "' " + shape_str(x.shape) + " has another rank than " +
                     shape_str(x0.shape));
    for (int d = 0; d < rank; ++d)
      if (d != axis && x.shape[std::size_t(d)] != x0.shape[std::size_t(d)])
        cx.fail(n, "input '" + n.input(k) + "' " + shape_str(x.shape) + " does not match " +
                       shape_str(x0.shape) + " off axis " + std::to_string(axis));
    shape[std::size_t(axis)] += x.shape[std::size_t(axis)];
    ids.push_back(x.id);
  }
  run_value y = x0;
  if (ids.size() == 1) return cx.set_run(n, 0, y);  // the others were empty
  y.id = cx.g.concat(cx.out_name(n), ids, axis);
  y.shape = shape;
  cx.set_run(n, 0, y);
}

void fold_concat(context& cx, const node_proto& n) {
  const const_value& a = cx.in(n, 0).c;
  const int rank = int(a.shape.size());
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", 0), std::max(rank, 1));
  std::vector<index_t> shape = a.shape;
  if (shape.empty()) cx.fail(n, "scalars cannot be concatenated");
  shape[std::size_t(axis)] = 0;
  for (int k = 0; k < n.input_size(); ++k) {
    const const_value& c = cx.in(n, k).c;
    if (c.shape.size() != a.shape.size() || c.is_float() != a.is_float())
      cx.fail(n, "inputs differ in rank or type");
    for (int d = 0; d < rank; ++d)
      if (d != axis && c.shape[std::size_t(d)] != a.shape[std::size_t(d)])
        cx.fail(n, "input shapes " + shape_str(c.shape) + " and " + shape_str(a.shape) + " differ");
    shape[std::size_t(axis)] += c.shape[std::size_t(axis)];
  }
  const_value y = make_const(a.elem, shape);
  index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[std::size_t(d)];
  for (int d = axis + 1; d < rank; ++d) inner *= shape[std::size_t(d)];
  index_t off = 0;
  for (int k = 0; k < n.input_size(); ++k) {
    const const_value& c = cx.in(n, k).c;
    const index_t ext = c.shape[std::size_t(axis)];
    for (index_t o = 0; o < outer; ++o)
      for (index_t j = 0; j < ext * inner; ++j)
        store(y, o * shape[std::size_t(axis)] * inner + off * inner + j, c.at(o * ext * inner + j));
    off += ext;
  }
  cx.set_const(n, 0, std::move(y));
}

void import_cast(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"to", "saturate"});
  const std::int64_t to = cx.attr_int(n, "to", 0);
  const run_value x = cx.run_in(n, 0);
  if (to == elem_float && x.type == dtype::f32) {  // a bool's 0 / 1 are its float values
    run_value y = x;
    y.boolean = false;
    return cx.set_run(n, 0, y);
  }
  if (to == elem_bool && x.type == dtype::f32) {  // x != 0, as !!x
    run_value y = x;
    if (!x.boolean) {
      eltwise_stage no;
      no.kind = stage_kind::logical_not;
      y.id = cx.g.eltwise(cx.out_name(n), x.id, {no, no});
      y.boolean = true;
    }
    return cx.set_run(n, 0, y);
  }
  const bool same_int =
      (to == elem_int64 && x.type == dtype::i64) || (to == elem_int32 && x.type == dtype::i32);
  if (same_int) return cx.set_alias(n, 0, cx.in(n, 0));
  if (to == elem_float && (x.type == dtype::i64 || x.type == dtype::i32)) {
    // Integer data as float (an attention mask, ids used as values).
    run_value y = cx.as_plain(x, n.output(0) + "/plain");
    y.id = cx.g.cast(cx.out_name(n), y.id, dtype::f32);
    y.type = dtype::f32;
    return cx.set_run(n, 0, y);
  }
  if (to == elem_float && (x.type == dtype::u8 || x.type == dtype::i8)) {
    return cx.set_run(n, 0, integers_as_f32(cx, n, 0, x, cx.out_name(n)));  // quantized data
  }
  if ((to == elem_uint8 || to == elem_int8) && x.type == dtype::f32) {
    // Toward zero (|x| floored, the sign put back), then saturated into the integer type by a
    // quantize with the grid {1, 0}, which is exact on integers.
    run_value t = cx.as_plain(x, n.output(0) + "/plain");
    eltwise_stage sign, abs, floor, mul;
    sign.kind = stage_kind::sign;
    abs.kind = stage_kind::abs;
    floor.kind = stage_kind::floor;
    const tensor_id sg = cx.g.eltwise(cx.unique(n.output(0) + "/sign"), t.id, {sign});
    mul.kind = stage_kind::mul;
    mul.operand = sg;
    const tensor_id tr = cx.g.eltwise(cx.unique(n.output(0) + "/trunc"), t.id, {abs, floor, mul});
    const dtype d = to == elem_uint8 ? dtype::u8 : dtype::i8;
    t.id = cx.g.quantize(cx.out_name(n), tr, d, {1.f, 0});
    t.type = d;
    t.boolean = false;
    return cx.set_run(n, 0, t);
  }
  if ((to == elem_int32 || to == elem_int64) && x.type == dtype::f32) {
    // Toward zero, saturated (MatMulInteger's int32 result, a float index).
    run_value y = cx.as_plain(x, n.output(0) + "/plain");
    const dtype t = to == elem_int32 ? dtype::i32 : dtype::i64;
    y.id = cx.g.cast(cx.out_name(n), y.id, t);
    y.type = t;
    return cx.set_run(n, 0, y);
  }
  if ((to == elem_float16 || to == elem_bfloat16) && x.type == dtype::f32) {
    // The narrower type's rounding, the values kept in float32 (exactly): a cast there and back.
    const dtype d = to == elem_float16 ? dtype::f16 : dtype::bf16;
    run_value y = x;
    const tensor_id t =
        cx.g.cast(cx.unique(n.output(0) + "/" + elem_name(std::int32_t(to))), x.id, d);
    y.id = cx.g.cast(cx.out_name(n), t, dtype::f32);
    y.boolean = false;
    return cx.set_run(n, 0, y);
  }
  cx.fail(n, "cast of run-time " + std::string(dtype_name(x.type)) + " data to " +
                 elem_name(std::int32_t(to)) +
                 " is not supported (float32 -> float32, float16, bfloat16, bool, int32, int64, "
                 "uint8 or int8; "
                 "int32 / int64 / uint8 / int8 -> float32; int32 / int64 -> itself)");
}

// Gather of run-time data or with run-time indices: the graph's gather (an embedding lookup of
// token ids; x[:, 0] of a sequence). Scalar indices drop the axis, as ONNX says.
void import_gather(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"axis"});
  const value& data = cx.in(n, 0);
  const value& ind = cx.in(n, 1);
  const std::vector<index_t> dshape = data.is_const ? data.c.shape : data.r.shape;
  const int rank = int(dshape.size());
  if (rank == 0) cx.fail(n, "data is a scalar");
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", 0), rank);
  run_value table = data.is_const ? cx.run_in(n, 0) : cx.as_plain(data.r, n.output(0) + "/table");
  tensor_id idx;
  std::vector<index_t> ishape;
  if (ind.is_const) {
    if (ind.c.is_float()) cx.fail(n, "indices are " + elem_name(ind.c.elem));
    ishape = ind.c.shape;
    const std::vector<index_t> gshape = ishape.empty() ? std::vector<index_t>{1} : ishape;
    idx = cx.g.constant(cx.unique(n.output(0) + "/indices"), gshape, dtype::i64, ind.c.i.data());
  } else {
    if (ind.r.type != dtype::i64 && ind.r.type != dtype::i32)
      cx.fail(n, "indices '" + n.input(1) + "' are " + std::string(dtype_name(ind.r.type)) +
                     "; Gather takes int32 or int64 indices");
    ishape = ind.r.shape;
    idx = cx.as_plain(ind.r, n.output(0) + "/indices").id;
  }
  std::vector<index_t> shape(dshape.begin(), dshape.begin() + axis);
  shape.insert(shape.end(), ishape.begin(), ishape.end());
  shape.insert(shape.end(), dshape.begin() + axis + 1, dshape.end());
  run_value y;
  y.type = table.type;
  y.boolean = table.boolean;  // rows of a bool table are bools
  if (ishape.empty()) {       // the graph gathers one index as [1], then the axis goes
    std::vector<index_t> kept(dshape);
    kept[std::size_t(axis)] = 1;
    y.shape = kept;
    y.id = cx.g.gather(cx.unique(n.output(0) + "/gather"), table.id, idx, axis);
    y = cx.reshape(y, shape, n.output(0));
  } else {
    y.shape = shape;
    y.id = cx.g.gather(cx.out_name(n), table.id, idx, axis);
  }
  cx.set_run(n, 0, y);
}

void fold_cast(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const std::int32_t to = std::int32_t(cx.attr_int(n, "to", 0));
  if (to == elem_string || to <= 0 || to > elem_bfloat16 || to == 14 || to == 15)
    cx.fail(n, "cast to " + elem_name(to) + " is not supported");
  const_value y = make_const(to, x.shape);
  for (index_t k = 0; k < x.numel(); ++k) {
    double v = x.at(k);
    if (!y.is_float() && to != elem_bool) v = std::trunc(v);
    if (to == elem_float16) v = double(to_float(to_f16(float(v))));  // the narrower rounding
    if (to == elem_bfloat16) v = double(to_float(to_bf16(float(v))));
    store(y, k, v);
  }
  cx.set_const(n, 0, std::move(y));
}

// Shape (opset 15: start / end) and Size of a value whose shape is known.
namespace {
void shape_of(context& cx, const node_proto& n, const std::vector<index_t>& s) {
  if (n.op_type() == "Size") {
    const_value c = make_const(elem_int64, {});
    c.i[0] = numel(s);
    return cx.set_const(n, 0, std::move(c));
  }
  cx.only_attrs(n, {"start", "end"});
  const std::int64_t r = std::int64_t(s.size());
  auto clampi = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + r : v, 0, r); };
  const std::int64_t b = clampi(cx.attr_int(n, "start", 0)), e = clampi(cx.attr_int(n, "end", r));
  const_value c = make_const(elem_int64, {std::max<std::int64_t>(0, e - b)});
  for (std::int64_t k = b; k < e; ++k) c.i[std::size_t(k - b)] = s[std::size_t(k)];
  cx.set_const(n, 0, std::move(c));
}
}  // namespace

void import_shape(context& cx, const node_proto& n) { shape_of(cx, n, cx.in(n, 0).r.shape); }
void fold_shape(context& cx, const node_proto& n) { shape_of(cx, n, cx.in(n, 0).c.shape); }

void fold_constant(context& cx, const node_proto& n) {
  if (n.attribute_size() != 1) cx.fail(n, "needs exactly one value attribute");
  const auto& a = n.attribute(0);
  const_value c;
  if (a.name() == "value") {
    tensor_source src;
    src.max_bytes = cx.opt.max_bytes;
    c = decode_tensor(a.t(), src, context::describe(n));
  } else if (a.name() == "value_float") {
    c = make_const(elem_float, {});
    c.f[0] = a.f();
  } else if (a.name() == "value_floats") {
    c = make_const(elem_float, {index_t(a.floats_size())});
    std::copy(a.floats().begin(), a.floats().end(), c.f.begin());
  } else if (a.name() == "value_int") {
    c = make_const(elem_int64, {});
    c.i[0] = a.i();
  } else if (a.name() == "value_ints") {
    c = make_const(elem_int64, {index_t(a.ints_size())});
    std::copy(a.ints().begin(), a.ints().end(), c.i.begin());
  } else {
    cx.fail(n, "attribute '" + a.name() + "' is not supported");
  }
  cx.set_const(n, 0, std::move(c));
}

void fold_constant_of_shape(context& cx, const node_proto& n) {
  const std::vector<std::int64_t> dims = cx.ints_in(n, 0, "shape");
  std::vector<index_t> shape(dims.begin(), dims.end());
  for (index_t d : shape)
    if (d < 0) cx.fail(n, "negative extent in " + shape_str(shape));
  if (numel(shape) > index_t(cx.opt.max_bytes / 4))
    cx.fail(n, "shape " + shape_str(shape) + " is too large");
  const_value fill = make_const(elem_float, {1});
  if (const auto* a = cx.attr(n, "value")) {
    tensor_source src;
    src.max_bytes = cx.opt.max_bytes;
    fill = decode_tensor(a->t(), src, context::describe(n));
    if (fill.numel() != 1) cx.fail(n, "value must hold one element");
  }
  const_value y = make_const(fill.elem, shape);
  for (index_t k = 0; k < y.numel(); ++k) store(y, k, fill.at(0));
  cx.set_const(n, 0, std::move(y));
}

void fold_gather(context& cx, const node_proto& n) {
  const const_value& data = cx.in(n, 0).c;
  const std::vector<std::int64_t> idx = cx.ints_in(n, 1, "indices");
  const std::vector<index_t>& ishape = cx.in(n, 1).c.shape;
  const int rank = int(data.shape.size());
  if (rank == 0) cx.fail(n, "data is a scalar");
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", 0), rank);
  const index_t ext = data.shape[std::size_t(axis)];
  std::vector<index_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), ishape.begin(), ishape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= data.shape[std::size_t(d)];
  for (int d = axis + 1; d < rank; ++d) inner *= data.shape[std::size_t(d)];
  const_value y = make_const(data.elem, shape);
  const index_t ni = index_t(idx.size());
  for (index_t o = 0; o < outer; ++o)
    for (index_t j = 0; j < ni; ++j) {
      index_t i = idx[std::size_t(j)];
      if (i < -ext || i >= ext)
        cx.fail(
            n, "index " + std::to_string(i) + " is out of range for extent " + std::to_string(ext));
      if (i < 0) i += ext;
      for (index_t k = 0; k < inner; ++k)
        store(y, (o * ni + j) * inner + k, data.at((o * ext + i) * inner + k));
    }
  cx.set_const(n, 0, std::move(y));
}

// ScatterND on constants (shape arithmetic such as Swin's attention masks): data with the
// slices named by indices [..., k] (over data's first k axes, negative from the end) replaced by
// updates, or combined with them (reduction add / mul / max / min, opset 16+), in index order.
void fold_scatter_nd(context& cx, const node_proto& n) {
  const const_value& data = cx.in(n, 0).c;
  const std::vector<std::int64_t> idx = cx.ints_in(n, 1, "indices");
  const std::vector<index_t>& ishape = cx.in(n, 1).c.shape;
  const const_value& upd = cx.in(n, 2).c;
  const std::string red = cx.attr_string(n, "reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    cx.fail(n, "reduction '" + red + "' is not one of none, add, mul, max, min");
  if (ishape.empty()) cx.fail(n, "indices is a scalar (it needs a last axis of index tuples)");
  const index_t k = ishape.back();
  const index_t rank = index_t(data.shape.size());
  if (k < 1 || k > rank)
    cx.fail(n, "index tuples of " + std::to_string(k) + " values for data of rank " +
                   std::to_string(rank));
  if (upd.is_float() != data.is_float()) cx.fail(n, "data and updates differ in type");
  index_t slice = 1;
  for (index_t d = k; d < rank; ++d) slice *= data.shape[std::size_t(d)];
  const index_t tuples = index_t(idx.size()) / k;
  if (upd.numel() != tuples * slice)
    cx.fail(n, "updates has " + std::to_string(upd.numel()) + " values, the indices select " +
                   std::to_string(tuples) + " slices of " + std::to_string(slice));
  const_value y = data;
  for (index_t t = 0; t < tuples; ++t) {
    index_t at = 0;
    for (index_t d = 0; d < k; ++d) {
      const index_t ext = data.shape[std::size_t(d)];
      index_t i = idx[std::size_t(t * k + d)];
      if (i < -ext || i >= ext)
        cx.fail(n, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(d) +
                       " of extent " + std::to_string(ext));
      at = at * ext + (i < 0 ? i + ext : i);
    }
    for (index_t j = 0; j < slice; ++j) {
      const double u = upd.at(t * slice + j), v = y.at(at * slice + j);
      const double r = red == "add"   ? v + u
                       : red == "mul" ? v * u
                       : red == "max" ? std::max(v, u)
                       : red == "min" ? std::min(v, u)
                                      : u;
      store(y, at * slice + j, r);
    }
  }
  cx.set_const(n, 0, std::move(y));
}

void fold_range(context& cx, const node_proto& n) {
  const const_value& s = cx.in(n, 0).c;
  const const_value& l = cx.in(n, 1).c;
  const const_value& d = cx.in(n, 2).c;
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) cx.fail(n, "inputs must be scalars");
  const double start = s.at(0), limit = l.at(0), delta = d.at(0);
  if (delta == 0) cx.fail(n, "delta is 0");
  const double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (count > double(cx.opt.max_bytes / 4)) cx.fail(n, "too many elements");
  const_value y = make_const(s.elem, {index_t(count)});
  for (index_t k = 0; k < y.numel(); ++k) store(y, k, start + double(k) * delta);
  cx.set_const(n, 0, std::move(y));
}

void fold_expand(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const std::vector<std::int64_t> target = cx.ints_in(n, 1, "shape");
  std::vector<index_t> shape;
  if (!broadcast_shape(x.shape, {target.begin(), target.end()}, shape))
    cx.fail(n, "shape does not broadcast");
  if (numel(shape) > index_t(cx.opt.max_bytes / 4)) cx.fail(n, "too many elements");
  const_value y = make_const(x.elem, shape);
  for (index_t k = 0; k < y.numel(); ++k) store(y, k, x.at(broadcast_index(k, shape, x.shape)));
  cx.set_const(n, 0, std::move(y));
}

void import_expand(context& cx, const node_proto& n) {
  cx.only_attrs(n, {});
  const run_value x = cx.float_in(n, 0);
  const std::vector<std::int64_t> target = cx.ints_in(n, 1, "shape");
  std::vector<index_t> shape;
  if (!broadcast_shape(x.shape, {target.begin(), target.end()}, shape))
    cx.fail(n, "input " + shape_str(x.shape) + " does not broadcast to " +
                   shape_str({target.begin(), target.end()}));
  if (shape == x.shape) return cx.set_alias(n, 0, cx.in(n, 0));
  cx.set_run(n, 0, cx.broadcast(x, shape, x.layout, n.output(0)));
}

// Identity, and Dropout at inference: the input itself (Dropout's mask, if used, all true).
void fold_identity(context& cx, const node_proto& n) {
  if (n.op_type() == "Dropout") {
    cx.only_attrs(n, {"ratio", "seed", "is_test"});
    if (cx.has_input(n, 2)) {
      const const_value& tm = cx.const_in(n, 2, "training_mode");
      if (tm.numel() != 1) cx.fail(n, "training_mode must hold one value");
      // Training with ratio 0 drops nothing and scales by 1: the input itself, as at inference.
      const double ratio =
          cx.has_input(n, 1) ? cx.const_in(n, 1, "ratio").at(0) : cx.attr_float(n, "ratio", 0.5f);
      if (tm.at(0) != 0 && ratio != 0)
        cx.fail(n, "training_mode=true with ratio " + std::to_string(ratio) +
                       " drops at random (training only; inference, or ratio 0, is supported)");
    }
    if (cx.output_used(n, 1)) {
      const value& x = cx.in(n, 0);
      const_value mask = make_const(elem_bool, x.is_const ? x.c.shape : x.r.shape);
      std::fill(mask.i.begin(), mask.i.end(), 1);
      cx.set_const(n, 1, std::move(mask));
    }
  }
  cx.set_alias(n, 0, cx.in(n, 0));
}

}  // namespace kfuse::onnx::detail
