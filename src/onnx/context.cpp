#include "context.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kfuse/detail/checks.hpp"

namespace kfuse::onnx::detail {

std::string elem_name(std::int32_t t) {
  switch (t) {
    case elem_float:
      return "float32";
    case elem_uint8:
      return "uint8";
    case elem_int8:
      return "int8";
    case elem_uint16:
      return "uint16";
    case elem_int16:
      return "int16";
    case elem_int32:
      return "int32";
    case elem_int64:
      return "int64";
    case elem_string:
      return "string";
    case elem_bool:
      return "bool";
    case elem_float16:
      return "float16";
    case elem_double:
      return "float64";
    case elem_uint32:
      return "uint32";
    case elem_uint64:
      return "uint64";
    case elem_bfloat16:
      return "bfloat16";
    default:
      return "element type " + std::to_string(t);
  }
}

std::string context::describe(const node_proto& n) {
  std::string name =
      n.name().empty() ? (n.output_size() ? n.output(0) : std::string("?")) : n.name();
  return "node '" + name + "' (" + n.op_type() + ")";
}

void context::fail(const node_proto& n, const std::string& what) const {
  kfuse::detail::fail("onnx", describe(n) + ": " + what);
}

const value& context::in(const node_proto& n, int k) const {
  if (!has_input(n, k)) fail(n, "input " + std::to_string(k) + " is missing");
  const auto it = values.find(n.input(k));
  if (it == values.end()) fail(n, "input '" + n.input(k) + "' is not defined before this node");
  return it->second;
}

const const_value& context::const_in(const node_proto& n, int k, const char* what) const {
  const value& v = in(n, k);
  if (!v.is_const)
    fail(n, std::string(what) + " (input " + std::to_string(k) + ", '" + n.input(k) +
                "') must be a constant (an initializer or computable at load time)");
  return v.c;
}

std::vector<std::int64_t> context::ints_in(const node_proto& n, int k, const char* what) const {
  const const_value& c = const_in(n, k, what);
  if (c.is_float())
    fail(n, std::string(what) + " ('" + n.input(k) + "') must be an integer tensor, not " +
                elem_name(c.elem));
  return c.i;
}

run_value context::run_in(const node_proto& n, int k) {
  const value& v = in(n, k);
  if (!v.is_const) return v.r;
  if (!v.c.is_float() && v.c.elem != elem_int64 && v.c.elem != elem_int32 && v.c.elem != elem_bool)
    fail(n, "constant input '" + n.input(k) + "' is " + elem_name(v.c.elem) +
                ": kfuse computes in float32");
  // A constant used as run-time data: its graph tensor is made once and kept beside the value,
  // which stays a constant for the nodes that need one (weights, shapes).
  if (v.r.id.index >= 0) return v.r;
  // An empty tensor is a constant (it has no values); as data it reaches only the ops that
  // drop it (Concat), view it (Slice, Split, Tile) or run at load time.
  if (v.c.numel() == 0)
    fail(n, "input '" + n.input(k) + "' is empty " + shape_str(v.c.shape) +
                ": kfuse computes on empty tensors only at load time (every input a constant)");
  run_value r = graph_constant(v.c, unique(n.input(k)));
  r.boolean = v.c.elem == elem_bool;
  values[n.input(k)].r = r;
  return r;
}

run_value context::float_in(const node_proto& n, int k) {
  const value& v = in(n, k);
  if (!v.is_const && v.r.type != dtype::f32)
    fail(n, "input '" + n.input(k) + "' is " + std::string(dtype_name(v.r.type)) +
                ", this op takes float32");
  if (v.is_const && !v.c.is_float())
    fail(n, "input '" + n.input(k) + "' is " + elem_name(v.c.elem) + ", this op takes float32");
  return run_in(n, k);
}

std::int32_t elem_of(const run_value& r) {
  if (r.boolean) return elem_bool;
  switch (r.type) {
    case dtype::i64:
      return elem_int64;
    case dtype::i32:
      return elem_int32;
    case dtype::u8:
      return elem_uint8;
    case dtype::i8:
      return elem_int8;
    default:
      return elem_float;
  }
}

void context::set_const(const node_proto& n, int k, const_value c) {
  value v;
  v.is_const = true;
  v.c = std::move(c);
  values[n.output(k)] = std::move(v);
}

void context::set_run(const node_proto& n, int k, run_value r) {
  value v;
  v.r = std::move(r);
  values[n.output(k)] = std::move(v);
}

void context::set_alias(const node_proto& n, int k, const value& v) { values[n.output(k)] = v; }

bool context::output_used(const node_proto& n, int k) const {
  if (k >= n.output_size() || n.output(k).empty()) return false;
  return consumers.count(n.output(k)) || model_outputs.count(n.output(k));
}

const ::onnx::AttributeProto* context::attr(const node_proto& n, const char* name) const {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t context::attr_int(const node_proto& n, const char* name, std::int64_t dflt) const {
  const auto* a = attr(n, name);
  if (!a) return dflt;
  if (a->type() != ::onnx::AttributeProto::INT)
    fail(n, std::string("attribute '") + name + "' must be an int");
  return a->i();
}

float context::attr_float(const node_proto& n, const char* name, float dflt) const {
  const auto* a = attr(n, name);
  if (!a) return dflt;
  if (a->type() != ::onnx::AttributeProto::FLOAT)
    fail(n, std::string("attribute '") + name + "' must be a float");
  return a->f();
}

std::string context::attr_string(const node_proto& n, const char* name,
                                 const std::string& dflt) const {
  const auto* a = attr(n, name);
  if (!a) return dflt;
  if (a->type() != ::onnx::AttributeProto::STRING)
    fail(n, std::string("attribute '") + name + "' must be a string");
  return a->s();
}

std::vector<std::int64_t> context::attr_ints(const node_proto& n, const char* name) const {
  const auto* a = attr(n, name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::INTS)
    fail(n, std::string("attribute '") + name + "' must be a list of ints");
  return {a->ints().begin(), a->ints().end()};
}

void context::only_attrs(const node_proto& n, std::initializer_list<const char*> known) const {
  for (const auto& a : n.attribute()) {
    bool ok = false;
    for (const char* k : known) ok = ok || a.name() == k;
    if (!ok) fail(n, "attribute '" + a.name() + "' is not supported");
  }
}

std::string context::unique(const std::string& base) {
  std::string name = base.empty() ? std::string("t") : base;
  if (names_.insert(name).second) return name;
  for (int k = 1;; ++k) {
    std::string c = name + "." + std::to_string(k);
    if (names_.insert(c).second) return c;
  }
}

run_value context::graph_constant(const const_value& c, const std::string& name,
                                  tensor_layout layout, const std::vector<index_t>* as_shape) {
  // as_shape: the same elements under another shape (a 1-D conv's weights as 2-D), no copy.
  std::vector<index_t> shape = as_shape ? *as_shape : c.shape;
  if (shape.empty()) shape = {1};  // the graph has no rank-0 tensors: a scalar is [1]
  if (shape.size() != 4) layout = tensor_layout::plain;
  run_value r;
  r.shape = as_shape ? *as_shape : c.shape;
  r.layout = layout;
  if (c.is_float() && layout != tensor_layout::nhwc) {  // weights: straight from the decoded data
    r.id = g.constant(name, shape, dtype::f32, c.f.data(), layout);
    return r;
  }
  std::vector<float> data(std::size_t(c.numel()));
  for (index_t k = 0; k < c.numel(); ++k) data[std::size_t(k)] = float(c.at(k));
  if (layout == tensor_layout::nhwc) {
    const index_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
    std::vector<float> t(data.size());
    for (index_t n = 0; n < N; ++n)
      for (index_t ch = 0; ch < C; ++ch)
        for (index_t h = 0; h < H; ++h)
          for (index_t w = 0; w < W; ++w)
            t[std::size_t(((n * H + h) * W + w) * C + ch)] =
                data[std::size_t(((n * C + ch) * H + h) * W + w)];
    data.swap(t);
  }
  r.id = g.constant(name, shape, dtype::f32, data.data(), layout);
  return r;
}

run_value context::to_layout(const run_value& v, tensor_layout l, const std::string& name) {
  if (v.shape.size() != 4 || v.layout == l) return v;
  if (l == tensor_layout::plain) return as_plain(v, name);
  run_value r = v;
  r.id = g.convert_layout(unique(name), v.id, l);
  r.layout = l;
  return r;
}

run_value context::as_image(const run_value& v, const std::string& name) {
  if (v.shape.size() != 4 || v.layout != tensor_layout::plain) return v;
  if (image_layout() == tensor_layout::nchw) return reshape(v, v.shape, name + "/as_image");
  return to_layout(v, image_layout(), name + "/to_" + std::string(layout_name(image_layout())));
}

run_value context::as_plain(const run_value& v, const std::string& name) {
  if (v.layout == tensor_layout::plain) return v;
  run_value r = v;  // a view of nchw data; nhwc data is reordered by the graph's reshape
  r.id = g.reshape(unique(name + "/plain"), v.id, v.shape);
  r.layout = tensor_layout::plain;
  return r;
}

run_value context::reshape(const run_value& v, std::vector<index_t> shape,
                           const std::string& name) {
  if (const run_value* image = image_viewed_by(v.id); image && image->shape == shape) return *image;
  run_value r = v;
  std::vector<index_t> gshape = shape.empty() ? std::vector<index_t>{1} : shape;
  // A 4-D result is an nchw view (the same memory order as plain), ready for conv and pooling.
  r.layout = gshape.size() == 4 ? tensor_layout::nchw : tensor_layout::plain;
  r.id = g.reshape(unique(name), v.id, gshape, r.layout);
  r.shape = std::move(shape);
  if (v.shape.size() == 4 && v.layout != tensor_layout::plain && r.shape.size() != 4)
    image_views_[r.id.index] = v;
  return r;
}

const run_value* context::image_viewed_by(tensor_id id) const {
  const auto it = image_views_.find(id.index);
  return it == image_views_.end() ? nullptr : &it->second;
}

run_value context::channel_shuffle(const run_value& v, int groups, index_t first, index_t count,
                                   const std::string& name) {
  run_value r = v;
  const auto it = shuffles_.find(v.id.index);
  if (groups == 1 && it != shuffles_.end()) {  // a run of a whole shuffle: one node
    r.id = g.channel_shuffle(unique(name), it->second.source.id, it->second.groups, first, count);
  } else {
    r.id = g.channel_shuffle(unique(name), v.id, groups, first, count);
    if (first == 0 && count == v.shape[1]) shuffles_[r.id.index] = {v, groups};
  }
  r.shape[1] = count;
  return r;
}

run_value context::broadcast(const run_value& v, std::vector<index_t> shape, tensor_layout l,
                             const std::string& name) {
  if (shape.size() != 4) l = tensor_layout::plain;
  if (shape.size() == 4 && l == tensor_layout::plain) l = image_layout();
  run_value r = v;
  r.id = g.broadcast(unique(name), v.id, shape.empty() ? std::vector<index_t>{1} : shape, l);
  r.shape = std::move(shape);
  r.layout = l;
  return r;
}

// ---- shapes ------------------------------------------------------------------------------------

bool broadcast_shape(const std::vector<index_t>& a, const std::vector<index_t>& b,
                     std::vector<index_t>& out) {
  const std::size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (std::size_t k = 0; k < r; ++k) {
    const index_t x = k < r - a.size() ? 1 : a[k - (r - a.size())];
    const index_t y = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    out[k] = x == 1 ? y : x;
  }
  return true;
}

int norm_axis(const context& cx, const node_proto& n, std::int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    cx.fail(n,
            "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return int(axis < 0 ? axis + rank : axis);
}

std::string shape_str(const std::vector<index_t>& s) {
  std::string out = "[";
  for (std::size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

index_t numel(const std::vector<index_t>& s) {
  index_t n = 1;
  for (index_t d : s) n = kfuse::detail::checked_mul("onnx", "tensor size", n, d);
  return n;
}

index_t broadcast_index(index_t k, const std::vector<index_t>& shape,
                        const std::vector<index_t>& from) {
  index_t idx = 0, stride = 1;
  const std::size_t off = shape.size() - from.size();
  for (std::size_t d = shape.size(); d-- > 0;) {
    const index_t coord = k % shape[d];
    k /= shape[d];
    if (d >= off) {
      const index_t ext = from[d - off];
      if (ext != 1) idx += coord * stride;
      stride *= ext;
    }
  }
  return idx;
}

}  // namespace kfuse::onnx::detail
