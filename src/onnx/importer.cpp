// load / load_bytes: parse (bounded), read the initializers, declare the inputs with their
// bound shapes, fuse patterns, import every node in order (evaluating constant subgraphs at load
// time), then mark the outputs.
#include "kfuse/onnx/importer.hpp"

#include <algorithm>
#include <climits>
#include <fstream>

#include "composite.hpp"
#include "context.hpp"
#include "kfuse/detail/checks.hpp"
#include "model_file.hpp"
#include "ops/ops.hpp"
#include "patterns.hpp"
#include "tensor.hpp"

namespace kfuse::onnx {

namespace {

using namespace detail;

[[noreturn]] void bad(const std::string& what) { kfuse::detail::fail("onnx", what); }

// The shape of graph input `vi` from the file and the options.
std::vector<index_t> input_shape(const ::onnx::ValueInfoProto& vi, const import_options& opt,
                                 std::set<std::string>& used_dims) {
  const std::string& name = vi.name();
  const auto& tt = vi.type().tensor_type();
  const bool has_shape = tt.has_shape();
  const auto given = opt.shapes.find(name);
  std::vector<index_t> shape;
  if (given != opt.shapes.end()) {
    shape = given->second;
    if (has_shape && tt.shape().dim_size() != int(shape.size()))
      bad("input '" + name + "': the shape given has " + std::to_string(shape.size()) +
          " dimensions, the model's has " + std::to_string(tt.shape().dim_size()));
    for (int d = 0; has_shape && d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      if (dim.has_dim_value() && dim.dim_value() != shape[std::size_t(d)])
        bad("input '" + name + "': dimension " + std::to_string(d) + " is " +
            std::to_string(dim.dim_value()) + " in the model, the shape given says " +
            std::to_string(shape[std::size_t(d)]));
    }
  } else {
    if (!has_shape)
      bad("input '" + name +
          "' has no shape in the model: give one (import_options::shapes, "
          "kfuse-run --shape)");
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      if (dim.has_dim_value()) {
        shape.push_back(dim.dim_value());
        continue;
      }
      const std::string& p = dim.dim_param();
      const auto it = p.empty() ? opt.dims.end() : opt.dims.find(p);
      if (it == opt.dims.end())
        bad("input '" + name + "': dimension " + std::to_string(d) +
            (p.empty() ? " is unknown" : " ('" + p + "') is symbolic") +
            ": bind it (import_options::dims / shapes, kfuse-run --dim " +
            (p.empty() ? std::string("NAME") : p) + "=N or --shape " + name + "=...)");
      used_dims.insert(p);
      shape.push_back(it->second);
    }
  }
  index_t total = 1;
  for (index_t d : shape) {
    if (d < 0)  // 0 is an empty input: bound, never read
      bad("input '" + name + "': extent " + std::to_string(d) + " in " + shape_str(shape) +
          " is negative");
    if (__builtin_mul_overflow(total, d, &total) || std::size_t(total) > opt.max_bytes / 4)
      bad("input '" + name + "': shape " + shape_str(shape) + " is too large");
  }
  return shape;
}

void declare_inputs(context& cx, const ::onnx::GraphProto& gp, model& out) {
  std::set<std::string> used_dims;
  for (const auto& vi : gp.input()) {
    if (cx.values.count(vi.name())) continue;  // an initializer listed as input (IR < 4)
    if (!vi.type().has_tensor_type())
      bad("input '" + vi.name() + "' is " +
          (vi.type().has_sequence_type()   ? "a sequence"
           : vi.type().has_optional_type() ? "an optional"
                                           : "not a tensor") +
          ": kfuse graphs take tensors");
    const std::int32_t et = vi.type().tensor_type().elem_type();
    const bool narrow = et == elem_float16 || et == elem_bfloat16;
    if (et != elem_float && et != elem_int64 && et != elem_int32 && et != elem_uint8 &&
        et != elem_int8 && et != elem_bool && !narrow)
      bad("input '" + vi.name() + "' is " + elem_name(et) +
          ": kfuse graphs take float32 / float16 / bfloat16 inputs, int64 / int32 ones (token "
          "ids, masks), uint8 / int8 ones (quantized data, for DequantizeLinear) and bool ones "
          "(bound as uint8 0 / 1)");
    run_value r;
    r.type = et == elem_float      ? dtype::f32
             : et == elem_float16  ? dtype::f16
             : et == elem_bfloat16 ? dtype::bf16
             : et == elem_int64    ? dtype::i64
             : et == elem_int32    ? dtype::i32
             : et == elem_int8     ? dtype::i8
                                   : dtype::u8;
    r.shape = input_shape(vi, cx.opt, used_dims);
    r.layout =
        r.shape.size() == 4 && r.type == dtype::f32 ? tensor_layout::nchw : tensor_layout::plain;
    std::vector<index_t> gshape = r.shape.empty() ? std::vector<index_t>{1} : r.shape;
    r.id = cx.g.input(cx.unique(vi.name()), gshape, r.type, r.layout);
    out.inputs.push_back({vi.name(), r.shape, r.type, r.id, et});
    if (numel(r.shape) == 0) {  // empty: bound, never read; its (lack of) values is known now
      value v;
      v.is_const = true;
      v.c = make_const(et, r.shape);
      cx.values[vi.name()] = std::move(v);
      continue;
    }
    if (et == elem_bool) {  // bytes 0 / 1 -> the graph's f32 truth values
      cx.g.set_quant(r.id, {1.f, 0});
      r.id = cx.g.dequantize(cx.unique(vi.name() + "/bool"), r.id);
      r.type = dtype::f32;
      r.boolean = true;
    }
    if (narrow) {  // float16 / bfloat16 data: computed in float32 (exact), cast at the edge
      r.id = cx.g.cast(cx.unique(vi.name() + "/f32"), r.id, dtype::f32);
      r.type = dtype::f32;
    }
    if (r.shape.size() == 4 && r.type == dtype::f32 && cx.opt.layout == tensor_layout::nhwc)
      r = cx.to_layout(r, tensor_layout::nhwc, vi.name() + "/nhwc");
    value v;
    v.r = r;
    cx.values[vi.name()] = v;
  }
  for (const auto& [name, shape] : cx.opt.shapes)
    if (std::none_of(out.inputs.begin(), out.inputs.end(),
                     [&](const value_info& i) { return i.name == name; }))
      bad("a shape is given for '" + name + "', which is not an input of the model");
  for (const auto& [name, v] : cx.opt.dims)
    if (!used_dims.count(name)) {
      bool anywhere = false;  // a dim also bound by a shape override is fine
      for (const auto& vi : gp.input())
        for (const auto& d : vi.type().tensor_type().shape().dim())
          anywhere = anywhere || d.dim_param() == name;
      if (!anywhere) bad("dimension '" + name + "' is not a symbolic dimension of any input");
    }
}

const op_entry* find_op(const std::string& type) {
  const auto& t = op_table();
  const auto it = std::lower_bound(
      t.begin(), t.end(), type,
      [](const op_entry& e, const std::string& s) { return std::string_view(e.type) < s; });
  return it != t.end() && it->type == type ? &*it : nullptr;
}

void import_node(context& cx, const node_proto& n) {
  const bool ours = n.domain() == "kfuse";  // the pattern pass's nodes
  if (!ours && !n.domain().empty() && n.domain() != "ai.onnx")
    cx.fail(n, "ops of domain '" + n.domain() + "' are not supported");
  if (n.output_size() < 1) cx.fail(n, "has no outputs");
  for (const auto& a : n.attribute())
    if (a.type() == ::onnx::AttributeProto::GRAPH || a.type() == ::onnx::AttributeProto::GRAPHS)
      cx.fail(n, "control flow (subgraph attribute '" + a.name() + "') is not supported");
  const op_entry* op = find_op(n.op_type());
  if (!op) cx.fail(n, "op type '" + n.op_type() + "' is not supported by kfuse's importer");
  bool all_const = true;
  for (int k = 0; k < n.input_size(); ++k)
    if (cx.has_input(n, k)) all_const = all_const && cx.in(n, k).is_const;
  if (all_const && op->fold) return op->fold(cx, n);
  if (!op->run)
    cx.fail(
        n, "is supported on constants only (load-time evaluation); here input '" + [&] {
          for (int k = 0; k < n.input_size(); ++k)
            if (cx.has_input(n, k) && !cx.in(n, k).is_const) return n.input(k);
          return std::string();
        }() + "' is run-time data");
  op->run(cx, n);
}

// The graph type of a model output of ONNX element type `elem`.
dtype output_dtype(std::int32_t elem, const std::string& name) {
  switch (elem) {
    case elem_float:
    case elem_float16:
    case elem_double:
    case elem_bfloat16:
      return dtype::f32;
    case elem_int64:
      return dtype::i64;
    case elem_int32:
      return dtype::i32;
    case elem_int8:
      return dtype::i8;
    case elem_uint8:
    case elem_bool:
      return dtype::u8;
    default:
      bad("output '" + name + "' is " + elem_name(elem) +
          ": kfuse outputs are float32, int64, int32, uint8, int8 or bool");
  }
}

// A constant integer or bool output as a graph constant of its own type (u8 0 / 1 for bool).
run_value integer_constant(context& cx, const const_value& c, const std::string& name) {
  run_value r;
  r.shape = c.shape;
  const std::vector<index_t> shape = c.shape.empty() ? std::vector<index_t>{1} : c.shape;
  switch (c.elem) {
    case elem_int64:
      r.type = dtype::i64;
      r.id = cx.g.constant(name, shape, c.i.data());
      return r;
    case elem_int32: {
      const std::vector<std::int32_t> v(c.i.begin(), c.i.end());
      r.type = dtype::i32;
      r.id = cx.g.constant(name, shape, v.data());
      return r;
    }
    case elem_int8: {
      const std::vector<std::int8_t> v(c.i.begin(), c.i.end());
      r.type = dtype::i8;
      r.id = cx.g.constant(name, shape, v.data());
      return r;
    }
    case elem_uint8:
    case elem_bool: {
      const std::vector<std::uint8_t> v(c.i.begin(), c.i.end());
      r.type = dtype::u8;
      r.id = cx.g.constant(name, shape, v.data());
      return r;
    }
    default:
      bad("output '" + name + "' is a constant " + elem_name(c.elem) +
          ": kfuse outputs are float32, int64, int32, uint8, int8 or bool");
  }
}

void mark_outputs(context& cx, const ::onnx::GraphProto& gp, model& out) {
  for (const auto& vi : gp.output()) {
    const auto it = cx.values.find(vi.name());
    if (it == cx.values.end()) bad("output '" + vi.name() + "' is not produced by any node");
    run_value r;
    std::int32_t et = elem_float;
    if (it->second.is_const && it->second.c.numel() == 0) {  // empty: a constant with no values
      const const_value& c = it->second.c;
      r.type = output_dtype(c.elem, vi.name());
      r.id = cx.g.constant(cx.unique(vi.name()), c.shape, r.type, nullptr);
      cx.g.output(r.id);
      out.outputs.push_back({vi.name(), c.shape, r.type, r.id, c.is_float() ? elem_float : c.elem});
      continue;
    }
    if (it->second.is_const) {
      const const_value& c = it->second.c;
      if (c.is_float()) {
        r = cx.graph_constant(c, cx.unique(vi.name() + "/value"));
      } else {
        r = integer_constant(cx, c, cx.unique(vi.name() + "/value"));
        et = c.elem;
      }
    } else {
      r = it->second.r;
      if (r.type != dtype::f32 && r.type != dtype::i64 && r.type != dtype::i32 &&
          r.type != dtype::u8 && r.type != dtype::i8)
        bad("output '" + vi.name() + "' is " + std::string(dtype_name(r.type)) +
            ": kfuse outputs are float32, int64, int32, uint8, int8 or bool");
      et = elem_of(r);
    }
    if (r.shape.size() == 4 && r.layout == tensor_layout::nhwc)
      r = cx.to_layout(r, tensor_layout::nchw, vi.name());
    // A float16 / bfloat16 output (the model's declared type): the f32 result cast at the edge.
    const std::int32_t declared = vi.type().tensor_type().elem_type();
    if ((declared == elem_float16 || declared == elem_bfloat16) && r.type == dtype::f32 &&
        !r.boolean) {
      r.type = declared == elem_float16 ? dtype::f16 : dtype::bf16;
      r.id = cx.g.cast(cx.unique(vi.name() + "/" + elem_name(declared)),
                       cx.as_plain(r, vi.name()).id, r.type);
      r.layout = tensor_layout::plain;
      et = declared;
    }
    if (r.boolean) {  // the graph's f32 truth values -> bytes 0 / 1
      r.id = cx.g.quantize(cx.unique(vi.name() + "/bool"), r.id, dtype::u8, {1.f, 0});
      r.type = dtype::u8;
      et = elem_bool;
    }
    const tensor_desc& td = cx.g.tensor(r.id);
    const bool node_output = td.producer >= 0;
    const bool taken = std::any_of(out.outputs.begin(), out.outputs.end(),
                                   [&](const value_info& o) { return o.id.index == r.id.index; });
    if (!node_output || taken) {  // an output of its own: a copy
      const std::vector<index_t> shape = td.shape;
      std::vector<index_t> strides(shape.size(), 1);
      for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
      r.id = r.type == dtype::f32
                 ? cx.g.scale(cx.unique(vi.name() + "/out"), r.id, 1.f)
                 : cx.g.strided_view(cx.unique(vi.name() + "/out"), r.id, shape, 0, strides);
    }
    cx.g.output(r.id);
    out.outputs.push_back({vi.name(), r.shape, r.type, r.id, et});
  }
}

}  // namespace

model load_bytes(std::span<const std::byte> bytes, const import_options& opt,
                 const std::filesystem::path& base_dir) {
  const ::onnx::ModelProto mp = parse_model(bytes, opt.max_bytes);
  const ::onnx::GraphProto& gp = mp.graph();
  model out;
  out.opset = default_opset(mp);
  out.producer =
      mp.producer_name() + (mp.producer_version().empty() ? "" : " " + mp.producer_version());
  context cx(opt, out.opset);
  tensor_source src{base_dir, opt.max_bytes};

  for (const auto& t : gp.initializer()) {
    if (t.name().empty()) bad("an initializer has no name");
    value v;
    v.is_const = true;
    v.c = decode_tensor(t, src, "initializer '" + t.name() + "'");
    cx.values[t.name()] = std::move(v);
  }
  if (gp.sparse_initializer_size()) bad("sparse initializers are not supported");
  declare_inputs(cx, gp, out);

  std::vector<node_proto> nodes(gp.node().begin(), gp.node().end());
  for (const auto& o : gp.output()) cx.model_outputs.insert(o.name());
  expand_composites(nodes);
  if (opt.fuse_patterns) fuse_patterns(nodes, cx.values, cx.model_outputs, cx.rewrites);
  for (const auto& n : nodes)
    for (const auto& in : n.input())
      if (!in.empty()) ++cx.consumers[in];
  for (const auto& n : nodes) import_node(cx, n);
  mark_outputs(cx, gp, out);
  for (const auto& [name, v] : cx.values)
    if (!v.is_const && v.r.id.index >= 0) out.values[name] = v.r.id;
  out.rewrites = std::move(cx.rewrites);
  out.graph = std::move(cx.g);
  return out;
}

model load(const std::filesystem::path& file, const import_options& opt) {
  const std::vector<std::byte> bytes = read_model_file(file, opt.max_bytes);
  try {
    const auto dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
    return load_bytes(bytes, opt, dir);
  } catch (const error& e) {
    throw error(std::string(e.what()) + " [" + file.filename().string() + "]");
  }
}

tensor_data read_tensor(std::span<const std::byte> bytes, std::size_t max_bytes) {
  if (bytes.size() > max_bytes || bytes.size() > std::size_t(INT_MAX))
    bad("tensor file of " + std::to_string(bytes.size()) + " bytes is above the limit");
  ::onnx::TensorProto t;
  if (!t.ParseFromArray(bytes.data(), int(bytes.size())))
    bad("not a valid ONNX TensorProto (truncated or corrupt?)");
  const const_value c = decode_tensor(t, tensor_source{{}, max_bytes}, "tensor '" + t.name() + "'");
  tensor_data out;
  out.name = t.name();
  out.shape = c.shape;
  out.onnx_type = c.elem;
  out.is_float = c.is_float();
  out.f = c.f;
  out.i = c.i;
  return out;
}

tensor_data read_tensor(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) bad("cannot open '" + file.string() + "'");
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return read_tensor(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(c.data()), c.size()));
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> out;
  for (const op_entry& e : op_table())
    if (std::string_view(e.type).find('.') == std::string_view::npos) out.push_back(e.type);
  out.insert(out.end(), composite_ops().begin(), composite_ops().end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kfuse::onnx
