#pragma once
// compile_context: what the plan compiler's passes and op rules share. The graph and options in,
// the plan being built out, the steps in between, and the helpers every op rule uses (tensors,
// constants, checks that name the node, chains, thread counts). Arch-independent: only the
// lowering of each op (graph/ops/<op>.hpp) is a template over the arch and backend.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kfuse/graph/compiler/step.hpp"
#include "kfuse/graph/graph.hpp"
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/rows.hpp"
#include "kfuse/graph/plan.hpp"
#include "kfuse/graph/thread_choice.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/pool_shape.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

struct compile_context {
  compile_context(const graph& graph_, const compile_options& options)
      : g(graph_), opt(options), d(std::make_shared<plan_data>()) {}

  const graph& g;
  compile_options opt;
  std::shared_ptr<plan_data> d;
  std::vector<int> producer;  // the graph node writing each tensor (-1: none)
  std::vector<int> order;     // nodes in topological order
  std::vector<step> steps;
  std::vector<std::int32_t> views;  // plan steps that are views (reshape)
  bool int8_gemm = false;          // the target arch has an int8 GEMM kernel (set by compile<A, B>)
  bool int8_bf16_outputs = false;  // graph_ops::int8_bf16_outputs<A, B> (set by compile<A, B>)
  std::vector<char> kept_f32;      // per node: of an int8 plan, runs in f32 (passes/narrow_int8)
  // The plan compiler holds the gated and the few-channel conv kernels (a kfuse::runtime built
  // without them, KFUSE_RUNTIME_OPS: set by compile<A, B>); if not, those fusions are skipped.
  bool conv_gates = true;
  bool few_channel_convs = true;

  // ---- errors --------------------------------------------------------------------------------
  [[noreturn]] void fail_node(const node_desc& n, const std::string& what) const {
    fail("graph", "node '" + n.name + "' (" + std::string(op_name(n.op)) + "): " + what);
  }
  const node_desc& node_of(const step& s) const { return g.nodes()[std::size_t(s.node)]; }

  // ---- tensors and constants -----------------------------------------------------------------
  plan_tensor& T(tensor_id id) { return d->tensors[std::size_t(id.index)]; }
  plan_tensor& T(std::int32_t id) { return d->tensors[std::size_t(id)]; }
  const plan_tensor& T(std::int32_t id) const { return d->tensors[std::size_t(id)]; }

  static std::string shape_str(const std::vector<index_t>& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  }
  static bool is_float(dtype t) { return t == dtype::f32 || t == dtype::bf16 || t == dtype::f16; }
  /// A tensor's size in bytes, checked: every later shape_numel of it then fits index_t.
  static std::size_t tensor_bytes(const std::string& name, const std::vector<index_t>& shape,
                                  dtype type) {
    const std::string what = "tensor '" + name + "' " + shape_str(shape);
    return checked_bytes("graph", what, checked_count("graph", what, shape), dtype_size(type));
  }
  std::int32_t new_tensor(std::string name, std::vector<index_t> shape, dtype type,
                          tensor_layout layout = tensor_layout::plain) {
    plan_tensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.type = type;
    t.layout = layout;
    t.bytes = tensor_bytes(t.name, t.shape, type);
    d->tensors.push_back(std::move(t));
    producer.push_back(-1);
    return std::int32_t(d->tensors.size() - 1);
  }
  /// An f32 constant owned by the plan.
  std::int32_t new_constant(std::string name, std::vector<index_t> shape, std::vector<float> v) {
    const std::int32_t id = new_tensor(std::move(name), std::move(shape), dtype::f32);
    auto data = std::make_shared<std::vector<float>>(std::move(v));
    T(id).where = plan_tensor::storage::constant;
    T(id).data = data->data();
    d->owned.push_back(data);
    return id;
  }
  /// Keeps a parameter block alive as long as the plan.
  template <class P>
  const P* own(std::shared_ptr<P> p) {
    d->owned.push_back(p);
    return p.get();
  }
  /// f32 copy of a constant's data (the graph's constant may be any type).
  std::vector<float> constant_f32(std::int32_t id) const {
    const plan_tensor& t = T(id);
    const index_t n = shape_numel(t.shape);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) v[std::size_t(i)] = element_f32(t.type, t.data, i);
    return v;
  }
  static float element_f32(dtype type, const void* p, index_t i) {
    switch (type) {
      case dtype::f32:
        return static_cast<const float*>(p)[i];
      case dtype::bf16:
        return to_float(static_cast<const bf16_t*>(p)[i]);
      case dtype::f16:
        return to_float(static_cast<const f16_t*>(p)[i]);
      case dtype::i8:
        return float(static_cast<const std::int8_t*>(p)[i]);
      case dtype::u8:
        return float(static_cast<const std::uint8_t*>(p)[i]);
      case dtype::i32:
        return float(static_cast<const std::int32_t*>(p)[i]);
      case dtype::i64:
        return float(static_cast<const std::int64_t*>(p)[i]);
    }
    return 0.f;
  }
  /// The channel count a per-channel parameter of t follows: C of a 4-D nchw / nhwc tensor,
  /// else the last axis.
  static index_t channels_of(const plan_tensor& t) {
    if (t.layout != tensor_layout::plain && t.shape.size() == 4) return t.shape[1];
    return t.shape.empty() ? 1 : t.shape.back();
  }
  /// Logical axis -> memory axis of a tensor of rank r in layout l.
  static int memory_axis(tensor_layout l, int axis, int r) {
    if (l != tensor_layout::nhwc || r != 4) return axis;
    constexpr int m[4] = {0, 3, 1, 2};  // N C H W -> positions in N H W C
    return m[axis];
  }
  static std::vector<index_t> memory_shape(const plan_tensor& t) {
    if (t.layout == tensor_layout::nhwc && t.shape.size() == 4)
      return {t.shape[0], t.shape[2], t.shape[3], t.shape[1]};
    return t.shape;
  }
  bool is_graph_output(std::int32_t t) const {
    return std::find(d->outputs.begin(), d->outputs.end(), t) != d->outputs.end();
  }

  // ---- checks that name the node -------------------------------------------------------------
  const plan_tensor& need_constant(const node_desc& n, std::size_t slot, std::string_view what) {
    const plan_tensor& t = T(n.inputs[slot]);
    const tensor_desc& td = g.tensor(n.inputs[slot]);
    if (!td.is_constant)
      fail_node(n, std::string(what) + " '" + t.name + "' must be a constant (graph::constant)");
    if (!td.has_data)
      fail_node(n, std::string(what) + " '" + t.name + "' has no data (graph::set_data)");
    return t;
  }
  void need_float(const node_desc& n, const plan_tensor& x) const {
    if (!is_float(x.type))
      fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                       "; this op takes f32 or bf16 (dequantize first)");
  }
  /// A 4-D nchw / nhwc activation (conv, pool).
  void need_image(const node_desc& n, const plan_tensor& x) const {
    if (x.shape.size() != 4 || x.layout == tensor_layout::plain)
      fail_node(n, "input '" + x.name + "' must be 4-D (N, C, H, W) with layout nchw or nhwc");
  }
  /// A per-channel or per-column parameter: `count` values.
  void need_count(const node_desc& n, std::string_view what, const plan_tensor& p, index_t count,
                  std::string_view of) const {
    if (shape_numel(p.shape) != count)
      fail_node(n, std::string(what) + " '" + p.name + "' has " +
                       std::to_string(shape_numel(p.shape)) + " values for " +
                       std::to_string(count) + " " + std::string(of));
  }
  /// The kernels of an f32 (or int8) linear / conv read f32 input; only the bf16 recipe takes
  /// bf16 (it converts f32 itself).
  void need_input_of_precision(const node_desc& n, const plan_tensor& x) const {
    const precision pr = precision_of(n);
    if (x.type == dtype::f32 || (pr == precision::bf16 && x.type == dtype::bf16)) return;
    fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) + "; " +
                     std::string(pr == precision::bf16   ? "a bf16"
                                 : pr == precision::int8 ? "an int8"
                                                         : "an f32") +
                     " " + std::string(op_name(n.op)) + " takes f32" +
                     (pr == precision::bf16 ? " or bf16" : "") + " (add a cast node first)");
  }
  /// Weights of a linear / conv: a float constant of `rank` dimensions.
  const plan_tensor& need_float_weight(const node_desc& n, std::size_t rank,
                                       std::string_view layout, std::string_view note = "") {
    const plan_tensor& w = need_constant(n, 1, "weight");
    if (w.shape.size() != rank)
      fail_node(n, "weight '" + w.name + "' has shape " + shape_str(w.shape) + "; " +
                       std::string(op_name(n.op)) + " weights are " + std::string(layout));
    if (!is_float(w.type))
      fail_node(n, "weight '" + w.name + "' is " + std::string(dtype_name(w.type)) +
                       "; give float weights" + std::string(note));
    return w;
  }
  /// The optional bias of a linear / conv (slot 2): an f32 constant of `count` values.
  void need_bias(const node_desc& n, index_t count, std::string_view of) {
    if (n.inputs.size() <= 2) return;
    const plan_tensor& b = need_constant(n, 2, "bias");
    if (b.type != dtype::f32)
      fail_node(n, "bias '" + b.name + "' is " + std::string(dtype_name(b.type)) +
                       "; give an f32 bias");  // biases are f32 operands of the chain
    need_count(n, "bias", b, count, of);
  }
  /// Runs f; a kfuse::error it throws is thrown again naming node n.
  template <class F>
  decltype(auto) for_node(const node_desc& n, F&& f) const {
    try {
      return f();
    } catch (const error& e) {
      fail_node(n, e.what());
    }
  }
  /// Runs `check`, a kernel's check whose kfuse::error reads "<kernel>: <problem>"; the problem
  /// is thrown again as node n's ("node 'x' (conv2d): <problem>": the node names the op).
  template <class F>
  void check_for_node(const node_desc& n, std::string_view kernel, F&& check) const {
    try {
      check();
    } catch (const error& e) {
      std::string_view what = e.what();
      if (what.starts_with(kernel) && what.substr(kernel.size()).starts_with(": "))
        what.remove_prefix(kernel.size() + 2);
      fail_node(n, std::string(what));
    }
  }
  /// The output tensor of node n: shape, type and layout (its declared quant params kept).
  void set_out(const node_desc& n, std::vector<index_t> shape, dtype type, tensor_layout layout) {
    plan_tensor& o = T(n.output);
    o.shape = std::move(shape);
    o.type = type;
    o.layout = layout;
    o.bytes = tensor_bytes(o.name, o.shape, type);
    const tensor_desc& od = g.tensor(n.output);
    if (od.has_quant) {
      o.has_quant = true;
      o.quant = od.quant;
    }
  }
  /// Ops that move values without changing them pass the input's quant params on.
  void pass_quant(const node_desc& n, const plan_tensor& x) {
    if (!x.has_quant) return;
    T(n.output).has_quant = true;
    T(n.output).quant = x.quant;
  }

  // ---- precision -----------------------------------------------------------------------------
  /// The precision a linear / conv node runs in.
  precision precision_of(const node_desc& n) const {
    precision pr = declared_precision(n);
    if (pr == precision::inherit) {
      const std::ptrdiff_t i = &n - g.nodes().data();
      if (i >= 0 && std::size_t(i) < kept_f32.size() && kept_f32[std::size_t(i)])
        return precision::f32;
      pr = opt.prec;
    }
    return pr == precision::inherit ? precision::f32 : pr;
  }

  // ---- lowering helpers ----------------------------------------------------------------------
  /// Adds a note to the fusion report unless it is there already (a choice made per node).
  void note_once(const std::string& note) {
    auto& notes = d->report.notes;
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  int threads_for(double bytes, double flops) const {
    return node_threads(d->threads, d->fork_join_ns, bytes, flops);
  }
  /// The chain of a command: its operands go to c.in[first_slot...].
  static graph_ops::chain_list make_chain(const std::vector<op_stage>& chain, plan_command& c,
                                          int first_slot) {
    graph_ops::chain_list l;
    int slot = first_slot;
    for (const op_stage& s : chain) {
      graph_ops::chain_stage& o = l.stages[l.count++];
      o.kind = s.kind;
      o.p0 = s.p0;
      o.p1 = s.p1;
      o.per_channel = s.per_channel;
      if (s.operand >= 0) {
        o.operand = std::int8_t(slot - first_slot);
        c.in[slot++] = s.operand;
      }
    }
    return graph_ops::with_shape(l);
  }
  /// "relu, add" for a chain.
  static std::string chain_text(const std::vector<op_stage>& chain) {
    std::string r;
    for (const op_stage& s : chain) {
      r += r.empty() ? "" : ", ";
      r += kfuse::stage_name(s.kind);
    }
    return r;
  }
  /// A step's kernel text: its chain plus a fused quantize stage, in brackets.
  std::string chain_suffix(const step& s, const std::vector<op_stage>& chain) const {
    std::string r = chain_text(chain);
    const dtype t = T(s.out).type;
    if (t == dtype::u8 || t == dtype::i8)
      r += (r.empty() ? "" : ", ") + ("quantize " + std::string(dtype_name(t)));
    return r.empty() ? "" : " [" + r + "]";
  }
  static quant_params out_quant_params(const step& s) {
    quant_params q;
    q.scale = s.out_quant.scale;
    q.zero_point = s.out_quant.zero_point;
    return q;
  }
  /// How an eltwise pass walks tensor t: flat, or rows following its channels.
  graph_ops::rows_shape rows_for(const plan_tensor& t, bool per_channel) const {
    const index_t n = shape_numel(t.shape);
    if (!per_channel) return graph_ops::make_rows(n, 0, false, 0);
    if (t.layout == tensor_layout::nchw && t.shape.size() == 4)
      return graph_ops::make_rows(n, t.shape[1], false, t.shape[2] * t.shape[3]);
    return graph_ops::make_rows(n, channels_of(t), true, 0);
  }
  /// The chain of a producer with its own stages first: fails when the operands do not fit.
  void need_operand_room(const node_desc& n, const std::vector<op_stage>& chain) const {
    if (operand_count(chain) > graph_ops::chain_max_operands)
      fail_node(n, "too many fused operands");
  }
};

}  // namespace detail

KFUSE_END_NAMESPACE
