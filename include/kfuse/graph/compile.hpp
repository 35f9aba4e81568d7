#pragma once
// compile(graph, options) -> plan: inference and validation, topological order, fusion passes,
// lowering to commands (weights packed here), memory planning and per-node thread counts.
//
// This header instantiates the kernels the plan may call: include it only in the translation
// units that compile plans (everything else needs kfuse/graph/graph.hpp only).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "kfuse/graph/graph.hpp"
#include "kfuse/graph/ops/conv.hpp"
#include "kfuse/graph/ops/conv_dense.hpp"
#include "kfuse/graph/ops/eltwise.hpp"
#include "kfuse/graph/ops/linear.hpp"
#include "kfuse/graph/ops/norm.hpp"
#include "kfuse/graph/ops/pool.hpp"
#include "kfuse/graph/ops/shape.hpp"
#include "kfuse/graph/thread_choice.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

template <class A, class B>
class graph_compiler {
 public:
  graph_compiler(const graph& g, const compile_options& opt) : g_(g), opt_(opt) {}

  plan run() {
    d_ = std::make_shared<plan_data>();
    d_->options = opt_;
    if (opt_.threads < 0)
      fail("compile", "threads = " + std::to_string(opt_.threads) +
                          ": must be >= 1, or 0 for the default pool's size");
    if (!(opt_.fork_join_ns < 0 || opt_.fork_join_ns >= 0))
      fail("compile",
           "fork_join_ns is NaN: give a cost in ns, 0 to split every node, or < 0 "
           "to measure it");
    d_->threads = opt_.threads > 0 ? std::min(opt_.threads, pool_threads(0)) : pool_threads(0);
    if (opt_.exec) d_->threads = std::min(d_->threads, std::max(1, opt_.exec->concurrency));
    d_->fork_join_ns = opt_.fork_join_ns >= 0 ? opt_.fork_join_ns
                       : d_->threads <= 1     ? 0
                       : opt_.exec            ? user_executor_fork_join_ns
                                              : default_pool().fork_join_ns();
    copy_tensors();
    check_ids();
    topo_sort();
    for (int n : order_) infer(g_.nodes()[std::size_t(n)]);
    check_io();
    build_steps();
    if (opt_.fuse) fuse();
    lower();
    set_target(*d_, make_target_info<A>(simd::impl_name<A, B>()));
    plan_memory();
    return plan(std::shared_ptr<const plan_data>(d_));
  }

 private:
  // ---- helpers -------------------------------------------------------------------------------
  [[noreturn]] void fail_node(const node_desc& n, const std::string& what) const {
    fail("graph", "node '" + n.name + "' (" + std::string(op_name(n.op)) + "): " + what);
  }
  plan_tensor& T(tensor_id id) { return d_->tensors[std::size_t(id.index)]; }
  plan_tensor& T(std::int32_t id) { return d_->tensors[std::size_t(id)]; }
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
    return detail::checked_bytes("graph", what, detail::checked_count("graph", what, shape),
                                 dtype_size(type));
  }
  std::int32_t new_tensor(std::string name, std::vector<index_t> shape, dtype type,
                          tensor_layout layout = tensor_layout::plain) {
    plan_tensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.type = type;
    t.layout = layout;
    t.bytes = tensor_bytes(t.name, t.shape, type);
    d_->tensors.push_back(std::move(t));
    producer_.push_back(-1);
    return std::int32_t(d_->tensors.size() - 1);
  }
  /// A constant owned by the plan.
  std::int32_t new_constant(std::string name, std::vector<index_t> shape, std::vector<float> v) {
    const std::int32_t id = new_tensor(std::move(name), std::move(shape), dtype::f32);
    auto data = std::make_shared<std::vector<float>>(std::move(v));
    T(id).where = plan_tensor::storage::constant;
    T(id).data = data->data();
    d_->owned.push_back(data);
    return id;
  }
  template <class P>
  const P* own(std::shared_ptr<P> p) {
    d_->owned.push_back(p);
    return p.get();
  }
  /// f32 copy of a constant's data (the graph's constant may be any float type).
  std::vector<float> constant_f32(std::int32_t id) {
    const plan_tensor& t = T(id);
    const index_t n = shape_numel(t.shape);
    std::vector<float> v(static_cast<std::size_t>(n));
    const void* p = t.data;
    for (index_t i = 0; i < n; ++i) {
      switch (t.type) {
        case dtype::f32:
          v[std::size_t(i)] = static_cast<const float*>(p)[i];
          break;
        case dtype::bf16:
          v[std::size_t(i)] = to_float(static_cast<const bf16_t*>(p)[i]);
          break;
        case dtype::f16:
          v[std::size_t(i)] = to_float(static_cast<const f16_t*>(p)[i]);
          break;
        case dtype::i8:
          v[std::size_t(i)] = float(static_cast<const std::int8_t*>(p)[i]);
          break;
        case dtype::u8:
          v[std::size_t(i)] = float(static_cast<const std::uint8_t*>(p)[i]);
          break;
        case dtype::i32:
          v[std::size_t(i)] = float(static_cast<const std::int32_t*>(p)[i]);
          break;
      }
    }
    return v;
  }
  /// The channel count a per-channel parameter of t follows: C of a 4-D nchw / nhwc tensor,
  /// else the last axis.
  static index_t channels_of(const plan_tensor& t) {
    if (t.layout != tensor_layout::plain && t.shape.size() == 4) return t.shape[1];
    return t.shape.empty() ? 1 : t.shape.back();
  }

  static conv_shape conv_shape_of(const plan_tensor& x, const plan_tensor& w,
                                  const conv2d_params& p) {
    conv_shape cs;
    cs.n = x.shape[0];
    cs.c = x.shape[1];
    cs.h = x.shape[2];
    cs.w = x.shape[3];
    cs.k = w.shape[0];
    cs.r = w.shape[2];
    cs.s = w.shape[3];
    cs.stride_h = p.stride_h;
    cs.stride_w = p.stride_w;
    cs.pad_top = p.pad_top;
    cs.pad_left = p.pad_left;
    cs.pad_bottom = p.pad_bottom;
    cs.pad_right = p.pad_right;
    cs.dilation_h = p.dilation_h;
    cs.dilation_w = p.dilation_w;
    cs.groups = p.groups;
    return cs;
  }

  static pool_shape pool_shape_of(const plan_tensor& x, const pool2d_params& p) {
    pool_shape ps;
    ps.n = x.shape[0];
    ps.c = x.shape[1];
    ps.h = x.shape[2];
    ps.w = x.shape[3];
    ps.kind = (p.kind == pool_mode::max || p.kind == pool_mode::global_max) ? pool_kind::max
                                                                            : pool_kind::avg;
    ps.global = p.kind == pool_mode::global_max || p.kind == pool_mode::global_average;
    if (!ps.global) {
      ps.r = p.kernel_h;
      ps.s = p.kernel_w;
      ps.stride_h = p.stride_h;
      ps.stride_w = p.stride_w;
      ps.pad_top = p.pad_top;
      ps.pad_left = p.pad_left;
      ps.pad_bottom = p.pad_bottom;
      ps.pad_right = p.pad_right;
      ps.ceil_mode = p.ceil_mode;
      ps.count_include_pad = p.count_include_pad;
    }
    return ps;
  }

  // ---- tensors, ids, order -------------------------------------------------------------------
  void copy_tensors() {
    const auto& ts = g_.tensors();
    d_->tensors.reserve(ts.size() * 2);
    for (const tensor_desc& td : ts) {
      plan_tensor t;
      t.name = td.name;
      t.shape = td.shape;
      t.type = td.type;
      t.layout = td.layout;
      t.has_quant = td.has_quant;
      t.quant = td.quant;
      if (td.is_constant) {
        t.where = plan_tensor::storage::constant;
        t.data = td.has_data ? td.data.data() : nullptr;
      }
      t.bytes = tensor_bytes(t.name, t.shape, t.type);
      d_->tensors.push_back(std::move(t));
      producer_.push_back(-1);
    }
    // The plan owns its constants: one shared copy of the graph's bytes.
    auto store = std::make_shared<std::vector<std::vector<unsigned char>>>();
    for (const tensor_desc& td : ts)
      store->push_back(td.is_constant ? td.data : std::vector<unsigned char>{});
    for (std::size_t i = 0; i < ts.size(); ++i)
      if (ts[i].is_constant && ts[i].has_data) d_->tensors[i].data = (*store)[i].data();
    d_->owned.push_back(store);
    for (std::size_t i = 0; i < ts.size(); ++i)
      if (ts[i].is_input && ts[i].layout != tensor_layout::plain && ts[i].shape.size() != 4)
        fail("graph", "input '" + ts[i].name + "' has layout " +
                          std::string(layout_name(ts[i].layout)) + " but " +
                          std::to_string(ts[i].shape.size()) + " dimensions (4 needed)");
    for (std::size_t i = 0; i < ts.size(); ++i)
      for (index_t e : ts[i].shape)
        if (e <= 0 && (ts[i].is_input || ts[i].is_constant))
          fail("graph", "tensor '" + ts[i].name + "' has a non-positive extent in " +
                            shape_str(ts[i].shape));
    check_names_and_quant();
    // A weight declared without data (graph::weight) may not reach a kernel, whatever slot it
    // is used in (operands of add / mul / concat included).
    for (const node_desc& n : g_.nodes())
      for (tensor_id in : n.inputs)
        if (in.index >= 0 && std::size_t(in.index) < ts.size() &&
            ts[std::size_t(in.index)].is_constant && !ts[std::size_t(in.index)].has_data)
          fail_node(
              n, "weight '" + ts[std::size_t(in.index)].name + "' has no data (graph::set_data)");
  }

  /// Names identify nodes and tensors in every error, report and profile: they must be unique
  /// (a node's output tensor carries the node's name). Quant params must be usable: a positive
  /// finite scale and a zero point inside the tensor's integer range.
  void check_names_and_quant() {
    std::unordered_map<std::string_view, const char*> seen;
    for (const tensor_desc& td : g_.tensors()) {
      const char* what = td.is_input ? "an input" : td.is_constant ? "a constant" : "a node";
      if (td.name.empty()) fail("graph", std::string(what) + " has an empty name");
      const auto [it, fresh] = seen.emplace(td.name, what);
      if (!fresh)
        fail("graph", "duplicate name '" + td.name + "': " + it->second + " and " + what +
                          " (names must be unique)");
      if (!td.has_quant) continue;
      const tensor_quant& q = td.quant;
      const std::int32_t lo = td.type == dtype::u8 ? 0 : -128;
      const std::int32_t hi = td.type == dtype::i8 ? 127 : 255;
      if (!(q.scale > 0.f) || !std::isfinite(q.scale))
        fail("graph", "tensor '" + td.name + "': quant scale must be positive and finite, not " +
                          std::to_string(q.scale));
      if (q.zero_point < lo || q.zero_point > hi)
        fail("graph", "tensor '" + td.name + "': quant zero point " + std::to_string(q.zero_point) +
                          " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                          (td.type == dtype::i8 || td.type == dtype::u8
                               ? " (" + std::string(dtype_name(td.type)) + ")"
                               : ""));
    }
  }

  /// Slots that may be left empty (tensor_id{}): bias of linear / conv, gamma / beta of norms.
  static bool optional_slot(const node_desc& n, std::size_t slot) {
    switch (n.op) {
      case op_kind::linear:
      case op_kind::conv2d:
        return slot == 2;
      case op_kind::layer_norm:
        return slot >= 1;
      case op_kind::rms_norm:
        return slot == 1;
      default:
        return false;
    }
  }

  void check_ids() {
    const auto nt = std::int32_t(g_.tensors().size());
    for (const node_desc& n : g_.nodes()) {
      for (std::size_t s = 0; s < n.inputs.size(); ++s) {
        const std::int32_t id = n.inputs[s].index;
        if (id == -1 && optional_slot(n, s)) continue;
        if (id < 0 || id >= nt)
          fail_node(n, "input " + std::to_string(s) + " is an unknown tensor (id " +
                           std::to_string(id) + ")");
      }
      if (n.output.index >= 0) producer_[std::size_t(n.output.index)] = int(&n - g_.nodes().data());
    }
    for (tensor_id o : g_.outputs())
      if (o.index < 0 || o.index >= nt)
        fail("graph", "an output is an unknown tensor (id " + std::to_string(o.index) + ")");
    if (g_.outputs().empty()) fail("graph", "no outputs (graph::output)");
  }

  void topo_sort() {
    const auto& nodes = g_.nodes();
    const std::size_t N = nodes.size();
    std::vector<int> missing(N, 0);
    std::vector<std::vector<int>> users(N);
    for (std::size_t i = 0; i < N; ++i)
      for (tensor_id t : nodes[i].inputs) {
        if (t.index < 0) continue;
        const int p = producer_[std::size_t(t.index)];
        if (p >= 0) {
          ++missing[i];
          users[std::size_t(p)].push_back(int(i));
        }
      }
    std::vector<int> ready;
    for (std::size_t i = 0; i < N; ++i)
      if (missing[i] == 0) ready.push_back(int(i));
    // Declaration order among ready nodes: a stable, readable order.
    std::size_t head = 0;
    while (head < ready.size()) {
      std::sort(ready.begin() + std::ptrdiff_t(head), ready.end());
      const int n = ready[head++];
      order_.push_back(n);
      for (int u : users[std::size_t(n)])
        if (--missing[std::size_t(u)] == 0) ready.push_back(u);
    }
    if (order_.size() == N) return;
    // A cycle: walk back through unfinished producers until a node repeats.
    int n = 0;
    while (missing[std::size_t(n)] == 0) ++n;
    std::vector<char> seen(N, 0);
    while (!seen[std::size_t(n)]) {
      seen[std::size_t(n)] = 1;
      for (tensor_id t : nodes[std::size_t(n)].inputs) {
        const int p = t.index >= 0 ? producer_[std::size_t(t.index)] : -1;
        if (p >= 0 && missing[std::size_t(p)] != 0) {
          n = p;
          break;
        }
      }
    }
    fail("graph", "cycle through node '" + nodes[std::size_t(n)].name + "' (" +
                      std::string(op_name(nodes[std::size_t(n)].op)) +
                      "): its inputs depend on its own output");
  }

  // ---- inference -----------------------------------------------------------------------------
  const plan_tensor& need_constant(const node_desc& n, std::size_t slot, std::string_view what) {
    const plan_tensor& t = T(n.inputs[slot]);
    const tensor_desc& td = g_.tensor(n.inputs[slot]);
    if (!td.is_constant)
      fail_node(n, std::string(what) + " '" + t.name + "' must be a constant (graph::constant)");
    if (!td.has_data)
      fail_node(n, std::string(what) + " '" + t.name + "' has no data (graph::set_data)");
    return t;
  }
  /// The kernels of an f32 (or int8) linear / conv read f32 input; only the bf16 recipe takes
  /// bf16 (it converts f32 itself).
  void need_input_of_precision(const node_desc& n, const plan_tensor& x) {
    const precision pr = precision_of(n);
    if (x.type == dtype::f32 || (pr == precision::bf16 && x.type == dtype::bf16)) return;
    fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) + "; " +
                     std::string(pr == precision::bf16   ? "a bf16"
                                 : pr == precision::int8 ? "an int8"
                                                         : "an f32") +
                     " " + std::string(op_name(n.op)) + " takes f32" +
                     (pr == precision::bf16 ? " or bf16" : "") + " (add a cast node first)");
  }
  /// Biases are f32 operands of the epilogue chain.
  void need_f32_bias(const node_desc& n, const plan_tensor& b) {
    if (b.type != dtype::f32)
      fail_node(
          n, "bias '" + b.name + "' is " + std::string(dtype_name(b.type)) + "; give an f32 bias");
  }
  void need_float(const node_desc& n, const plan_tensor& x) {
    if (!is_float(x.type))
      fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                       "; this op takes f32 or bf16 (dequantize first)");
  }
  void set_out(const node_desc& n, std::vector<index_t> shape, dtype type, tensor_layout layout) {
    plan_tensor& o = T(n.output);
    o.shape = std::move(shape);
    o.type = type;
    o.layout = layout;
    o.bytes = tensor_bytes(o.name, o.shape, type);
    const tensor_desc& od = g_.tensor(n.output);
    if (od.has_quant) {
      o.has_quant = true;
      o.quant = od.quant;
    }
  }

  void infer(const node_desc& n) {
    switch (n.op) {
      case op_kind::eltwise: {
        const plan_tensor& x = T(n.inputs[0]);
        if (x.type != dtype::f32 && x.type != dtype::bf16)
          fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                           "; eltwise stages take f32 or bf16");
        std::size_t slot = 1;
        for (const eltwise_stage& s : n.stages) {
          if (s.kind != stage_kind::add && s.kind != stage_kind::mul && s.kind != stage_kind::bias)
            continue;
          const plan_tensor& o = T(n.inputs[slot++]);
          if (o.type != dtype::f32)
            fail_node(n, "operand '" + o.name + "' is " + std::string(dtype_name(o.type)) +
                             "; operands must be f32");
          const bool per_channel = s.kind == stage_kind::bias || s.per_channel;
          if (per_channel) {
            if (shape_numel(o.shape) != channels_of(x))
              fail_node(n, "per-channel operand '" + o.name + "' has " +
                               std::to_string(shape_numel(o.shape)) + " values, input '" + x.name +
                               "' has " + std::to_string(channels_of(x)) + " channels");
          } else if (o.shape != x.shape || o.layout != x.layout) {
            fail_node(n, "operand '" + o.name + "' has shape " + shape_str(o.shape) + " (" +
                             std::string(layout_name(o.layout)) + "), input '" + x.name + "' " +
                             shape_str(x.shape) + " (" + std::string(layout_name(x.layout)) +
                             "): shapes must match");
          }
        }
        if (s_count_operands(n) > graph_ops::chain_max_operands)
          fail_node(n, "more than " + std::to_string(graph_ops::chain_max_operands) +
                           " tensor operands in one eltwise node");
        if (n.stages.size() > std::size_t(graph_ops::chain_max_stages))
          fail_node(n, "more than " + std::to_string(graph_ops::chain_max_stages) + " stages");
        for (const eltwise_stage& s : n.stages) {
          if (s.kind == stage_kind::clamp && !(s.p0 <= s.p1)) fail_node(n, "clamp: lo exceeds hi");
          if ((s.kind == stage_kind::scale || s.kind == stage_kind::leaky_relu) &&
              !std::isfinite(s.p0))
            fail_node(
                n, std::string(s.kind == stage_kind::scale ? "scale factor" : "leaky_relu slope") +
                       " must be finite, not " + std::to_string(s.p0));
        }
        set_out(n, x.shape, x.type, x.layout);
        break;
      }
      case op_kind::conv2d: {
        const plan_tensor& x = T(n.inputs[0]);
        need_float(n, x);
        need_input_of_precision(n, x);
        if (x.shape.size() != 4 || x.layout == tensor_layout::plain)
          fail_node(n, "input '" + x.name + "' must be 4-D (N, C, H, W) with layout nchw or nhwc");
        const plan_tensor& w = need_constant(n, 1, "weight");
        if (w.shape.size() != 4)
          fail_node(n, "weight '" + w.name + "' has shape " + shape_str(w.shape) +
                           "; conv2d weights are OIHW [K, C / groups, R, S]");
        if (!is_float(w.type))
          fail_node(n, "weight '" + w.name + "' is " + std::string(dtype_name(w.type)) +
                           "; give float weights");
        const conv2d_params& cp = n.conv;
        const conv_shape cs = conv_shape_of(x, w, cp);
        if (cp.groups >= 1 && x.shape[1] % cp.groups == 0 && w.shape[1] * cp.groups != x.shape[1])
          fail_node(n, "input has " + std::to_string(x.shape[1]) + " channels, weights expect " +
                           std::to_string(w.shape[1] * cp.groups) + " (" +
                           std::to_string(w.shape[1]) + " per group x " +
                           std::to_string(cp.groups) + " groups)");
        try {
          check_conv_shape("conv2d", cs);
        } catch (const error& e) {
          fail_node(n, std::string(e.what()).substr(8));  // drop "conv2d: "
        }
        if (n.inputs.size() > 2) {
          const plan_tensor& b = need_constant(n, 2, "bias");
          need_f32_bias(n, b);
          if (shape_numel(b.shape) != cs.k)
            fail_node(n, "bias '" + b.name + "' has " + std::to_string(shape_numel(b.shape)) +
                             " values for " + std::to_string(cs.k) + " output channels");
        }
        set_out(n, {cs.n, cs.k, cs.out_h(), cs.out_w()}, dtype::f32, x.layout);
        break;
      }
      case op_kind::linear: {
        const plan_tensor& x = T(n.inputs[0]);
        need_float(n, x);
        need_input_of_precision(n, x);
        if (x.shape.empty()) fail_node(n, "input '" + x.name + "' is a scalar");
        if (x.layout != tensor_layout::plain)
          fail_node(n, "input '" + x.name + "' is " + std::string(layout_name(x.layout)) +
                           "; flatten it first");
        const plan_tensor& w = need_constant(n, 1, "weight");
        if (w.shape.size() != 2)
          fail_node(n, "weight '" + w.name + "' has shape " + shape_str(w.shape) +
                           "; linear weights are [out_features, in_features]");
        if (!is_float(w.type))
          fail_node(n, "weight '" + w.name + "' is " + std::string(dtype_name(w.type)) +
                           "; give float weights (int8 plans quantize them)");
        const index_t K = x.shape.back(), N = w.shape[0];
        if (w.shape[1] != K)
          fail_node(n, "input has " + std::to_string(K) + " features, weights expect " +
                           std::to_string(w.shape[1]));
        if (n.inputs.size() > 2) {
          const plan_tensor& b = need_constant(n, 2, "bias");
          need_f32_bias(n, b);
          if (shape_numel(b.shape) != N)
            fail_node(n, "bias '" + b.name + "' has " + std::to_string(shape_numel(b.shape)) +
                             " values for " + std::to_string(N) + " output features");
        }
        auto shape = x.shape;
        shape.back() = N;
        set_out(n, shape, dtype::f32, tensor_layout::plain);
        break;
      }
      case op_kind::pool2d: {
        const plan_tensor& x = T(n.inputs[0]);
        if (x.shape.size() != 4 || x.layout == tensor_layout::plain)
          fail_node(n, "input '" + x.name + "' must be 4-D (N, C, H, W) with layout nchw or nhwc");
        if (x.type == dtype::f16 || x.type == dtype::i32)
          fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                           "; pooling takes f32, bf16, u8 or i8");
        if ((x.type == dtype::u8 || x.type == dtype::i8) && !x.has_quant &&
            (n.pool.kind == pool_mode::average || n.pool.kind == pool_mode::global_average))
          fail_node(n, "average pooling of " + std::string(dtype_name(x.type)) + " input '" +
                           x.name + "' needs its quant params (graph::set_quant)");
        if (n.pool.kind == pool_mode::global_max || n.pool.kind == pool_mode::global_average)
          if (n.pool.pad_top || n.pool.pad_left || n.pool.pad_bottom || n.pool.pad_right)
            fail_node(n, "global pooling takes no padding");
        const pool_shape ps = pool_shape_of(x, n.pool);
        try {
          check_pool_shape("pool2d", ps);
        } catch (const error& e) {
          fail_node(n, std::string(e.what()).substr(8));  // drop "pool2d: "
        }
        set_out(n, {ps.n, ps.c, ps.out_h(), ps.out_w()}, x.type, x.layout);
        if (x.has_quant) {
          T(n.output).has_quant = true;
          T(n.output).quant = x.quant;
        }
        break;
      }
      case op_kind::softmax: {
        const plan_tensor& x = T(n.inputs[0]);
        need_float(n, x);
        if (x.type == dtype::f16) fail_node(n, "f16 softmax has no kernel: cast to f32");
        const int r = int(x.shape.size());
        if (r == 0 || r > 8)
          fail_node(n, "input '" + x.name + "' has rank " + std::to_string(r) + " (1 to 8)");
        if (n.axis < -r || n.axis >= r)
          fail_node(n, "axis " + std::to_string(n.axis) + " is out of range for rank " +
                           std::to_string(r));
        set_out(n, x.shape, x.type, x.layout);
        break;
      }
      case op_kind::layer_norm:
      case op_kind::rms_norm: {
        const plan_tensor& x = T(n.inputs[0]);
        need_float(n, x);
        if (x.type == dtype::f16) fail_node(n, "f16 norms have no kernel: cast to f32");
        if (x.shape.empty()) fail_node(n, "input '" + x.name + "' is a scalar");
        if (x.layout != tensor_layout::plain)
          fail_node(n, "input '" + x.name + "' is " + std::string(layout_name(x.layout)) +
                           "; norms run over the last axis of a plain tensor");
        const index_t cols = x.shape.back();
        const char* names[] = {"", "gamma", "beta"};
        for (std::size_t s = 1; s < n.inputs.size(); ++s) {
          if (n.inputs[s].index < 0) continue;
          const plan_tensor& p = need_constant(n, s, names[s]);
          if (shape_numel(p.shape) != cols)
            fail_node(n, std::string(names[s]) + " '" + p.name + "' has " +
                             std::to_string(shape_numel(p.shape)) + " values for " +
                             std::to_string(cols) + " columns");
        }
        if (!(n.eps >= 0.f)) fail_node(n, "eps must be non-negative");
        set_out(n, x.shape, x.type, x.layout);
        break;
      }
      case op_kind::batch_norm: {
        const plan_tensor& x = T(n.inputs[0]);
        need_float(n, x);
        if (x.type != dtype::f32)
          fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                           "; batch_norm takes f32 (add a cast node first)");
        const index_t C = channels_of(x);
        const char* names[] = {"", "mean", "var", "gamma", "beta"};
        for (std::size_t s = 1; s < 5; ++s) {
          const plan_tensor& p = need_constant(n, s, names[s]);
          if (shape_numel(p.shape) != C)
            fail_node(n, std::string(names[s]) + " '" + p.name + "' has " +
                             std::to_string(shape_numel(p.shape)) + " values for " +
                             std::to_string(C) + " channels");
        }
        if (!(n.eps >= 0.f)) fail_node(n, "eps must be non-negative");
        const std::vector<float> var = constant_f32(n.inputs[2].index);
        for (std::size_t c = 0; c < var.size(); ++c)
          if (!(var[c] >= 0.f))
            fail_node(n, "variance of channel " + std::to_string(c) + " is negative or NaN (" +
                             std::to_string(var[c]) + ")");
        set_out(n, x.shape, dtype::f32, x.layout);
        break;
      }
      case op_kind::reshape: {
        const plan_tensor& x = T(n.inputs[0]);
        std::vector<index_t> shape;
        if (n.flatten) {
          const int r = int(x.shape.size());
          const int axis = n.axis < 0 ? n.axis + r : n.axis;
          if (axis < 0 || axis > r)
            fail_node(n, "axis " + std::to_string(n.axis) + " is out of range for rank " +
                             std::to_string(r));
          for (int i = 0; i < axis; ++i) shape.push_back(x.shape[std::size_t(i)]);
          index_t inner = 1;
          for (int i = axis; i < r; ++i) inner *= x.shape[std::size_t(i)];
          shape.push_back(inner);
        } else {
          shape = n.shape;
          int unknown = -1;
          index_t known = 1;
          for (std::size_t i = 0; i < shape.size(); ++i) {
            if (shape[i] == -1) {
              if (unknown >= 0) fail_node(n, "more than one -1 in the target shape");
              unknown = int(i);
            } else if (shape[i] <= 0) {
              fail_node(n, "non-positive extent in the target shape " + shape_str(shape));
            } else {
              known *= shape[i];
            }
          }
          if (unknown >= 0) {
            if (shape_numel(x.shape) % known != 0)
              fail_node(n, "cannot infer -1: " + std::to_string(shape_numel(x.shape)) +
                               " elements do not divide by " + std::to_string(known));
            shape[std::size_t(unknown)] = shape_numel(x.shape) / known;
          }
        }
        if (shape_numel(shape) != shape_numel(x.shape))
          fail_node(n, "input '" + x.name + "' has " + std::to_string(shape_numel(x.shape)) +
                           " elements " + shape_str(x.shape) + ", the target shape " +
                           shape_str(shape) + " " + std::to_string(shape_numel(shape)));
        set_out(n, shape, x.type, tensor_layout::plain);
        if (x.has_quant) {
          T(n.output).has_quant = true;
          T(n.output).quant = x.quant;
        }
        break;
      }
      case op_kind::concat: {
        if (n.inputs.empty()) fail_node(n, "no inputs");
        const plan_tensor& x0 = T(n.inputs[0]);
        const int r = int(x0.shape.size());
        const int axis = n.axis < 0 ? n.axis + r : n.axis;
        if (axis < 0 || axis >= r)
          fail_node(n, "axis " + std::to_string(n.axis) + " is out of range for rank " +
                           std::to_string(r));
        auto shape = x0.shape;
        shape[std::size_t(axis)] = 0;
        for (tensor_id id : n.inputs) {
          const plan_tensor& x = T(id);
          if (x.type != x0.type || x.layout != x0.layout || int(x.shape.size()) != r)
            fail_node(n, "input '" + x.name + "' (" + std::string(dtype_name(x.type)) + ", " +
                             std::string(layout_name(x.layout)) + ", " + shape_str(x.shape) +
                             ") does not match input '" + x0.name + "' (" +
                             std::string(dtype_name(x0.type)) + ", " +
                             std::string(layout_name(x0.layout)) + ", " + shape_str(x0.shape) +
                             ")");
          for (int i = 0; i < r; ++i)
            if (i != axis && x.shape[std::size_t(i)] != x0.shape[std::size_t(i)])
              fail_node(n, "input '" + x.name + "' has shape " + shape_str(x.shape) + ", input '" +
                               x0.name + "' " + shape_str(x0.shape) +
                               ": extents must match except along axis " + std::to_string(axis));
          shape[std::size_t(axis)] += x.shape[std::size_t(axis)];
        }
        set_out(n, shape, x0.type, x0.layout);
        break;
      }
      case op_kind::convert_layout: {
        const plan_tensor& x = T(n.inputs[0]);
        if (x.shape.size() != 4)
          fail_node(n, "input '" + x.name + "' has " + std::to_string(x.shape.size()) +
                           " dimensions; layout conversion takes 4-D (N, C, H, W)");
        if (n.to_layout == tensor_layout::plain) fail_node(n, "target layout must be nchw or nhwc");
        set_out(n, x.shape, x.type, n.to_layout);
        if (x.has_quant) {
          T(n.output).has_quant = true;
          T(n.output).quant = x.quant;
        }
        break;
      }
      case op_kind::cast: {
        const plan_tensor& x = T(n.inputs[0]);
        const dtype to = n.to_type;
        const bool q_in = x.type == dtype::i8 || x.type == dtype::u8;
        const bool q_out = to == dtype::i8 || to == dtype::u8;
        if (x.type == dtype::i32 || to == dtype::i32)
          fail_node(n, "i32 tensors cannot be cast (they hold raw accumulators)");
        if (q_in && q_out)
          fail_node(n, "from " + std::string(dtype_name(x.type)) + " to " +
                           std::string(dtype_name(to)) + ": dequantize, then quantize");
        if (q_in && !x.has_quant)
          fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                           " without quant params (graph::set_quant)");
        if (q_in && to != dtype::f32) fail_node(n, "dequantize produces f32");
        if (q_out && !(n.quant.scale > 0.f && std::isfinite(n.quant.scale)))
          fail_node(n, "quantize scale must be positive and finite");
        if (q_out && (n.quant.zero_point < (to == dtype::u8 ? 0 : -128) ||
                      n.quant.zero_point > (to == dtype::u8 ? 255 : 127)))
          fail_node(n, "quantize zero point " + std::to_string(n.quant.zero_point) +
                           " is outside the range of " + std::string(dtype_name(to)));
        set_out(n, x.shape, to, x.layout);
        break;
      }
      case op_kind::custom: {
        if (n.inputs.size() > 4) fail_node(n, "custom nodes take at most 4 inputs");
        if (!n.custom.run) fail_node(n, "no callable (make_custom_op)");
        for (index_t e : n.custom.out_shape)
          if (e <= 0)
            fail_node(n, "declared output shape " + shape_str(n.custom.out_shape) +
                             " has a non-positive extent");
        set_out(n, n.custom.out_shape, n.custom.out_type, n.custom.out_layout);
        break;
      }
      default:
        fail_node(n, "no kernel for this op in this build yet");
    }
  }
  static std::size_t s_count_operands(const node_desc& n) { return n.inputs.size() - 1; }

  void check_io() {
    std::vector<char> is_out(d_->tensors.size(), 0);
    for (std::size_t k = 0; k < g_.outputs().size(); ++k) {
      const tensor_id o = g_.outputs()[k];
      const tensor_desc& td = g_.tensor(o);
      if (td.is_input || td.is_constant)
        fail("graph", "output '" + td.name + "' is a graph " +
                          (td.is_input ? "input" : "constant") + ": no node computes it");
      if (is_out[std::size_t(o.index)]) fail("graph", "output '" + td.name + "' is listed twice");
      is_out[std::size_t(o.index)] = 1;
    }
    for (std::size_t i = 0; i < g_.inputs().size(); ++i) {
      plan_tensor& t = T(g_.inputs()[i]);
      t.where = plan_tensor::storage::input;
      t.index = std::int32_t(i);
      d_->inputs.push_back(g_.inputs()[i].index);
    }
    for (std::size_t k = 0; k < g_.outputs().size(); ++k)
      d_->outputs.push_back(g_.outputs()[k].index);
  }

  // ---- steps and fusion ----------------------------------------------------------------------
  struct op_stage {
    stage_kind kind;
    float p0 = 0, p1 = 0;
    std::int32_t operand = -1;  // plan tensor
    bool per_channel = false;
  };
  struct step {
    int node = -1;
    op_kind op = op_kind::eltwise;
    std::vector<std::string> fused;
    std::int32_t x = -1;               // data input
    std::vector<std::int32_t> others;  // weights and other inputs (not chain operands)
    std::vector<op_stage> chain;       // stages fused after the op (eltwise: the op itself)
    std::int32_t out = -1;
    bool alive = true;
    std::string lowered_from;                   // batch_norm lowered to a chain, ...
    std::int32_t bn_scale = -1, bn_shift = -1;  // conv2d: a batch norm folded into the weights
    bool bn_after_bias = false;  // the folded batch norm came after a bias (the chain's first)
    tensor_quant out_quant{};    // an int8 output (quantize absorbed): its scale and zero point
  };

  void build_steps() {
    const auto& nodes = g_.nodes();
    for (int ni : order_) {
      const node_desc& n = nodes[std::size_t(ni)];
      step s;
      s.node = ni;
      s.op = n.op;
      s.out = n.output.index;
      s.x = n.inputs.empty() ? -1 : n.inputs[0].index;
      if (n.op == op_kind::eltwise) {
        std::size_t slot = 1;
        for (const eltwise_stage& e : n.stages) {
          op_stage o{e.kind, e.p0, e.p1, -1, e.per_channel};
          if (e.kind == stage_kind::add || e.kind == stage_kind::mul || e.kind == stage_kind::bias)
            o.operand = n.inputs[slot++].index;
          s.chain.push_back(o);
        }
      } else if (n.op == op_kind::batch_norm) {
        // Inference batch norm is a per-channel affine map: scale = gamma / sqrt(var + eps),
        // shift = beta - mean * scale, run as a chain (or folded into a preceding conv).
        const auto mean = constant_f32(n.inputs[1].index), var = constant_f32(n.inputs[2].index),
                   gamma = constant_f32(n.inputs[3].index), beta = constant_f32(n.inputs[4].index);
        std::vector<float> sc(mean.size()), sh(mean.size());
        for (std::size_t c = 0; c < mean.size(); ++c) {
          sc[c] = gamma[c] / std::sqrt(var[c] + n.eps);
          sh[c] = beta[c] - mean[c] * sc[c];
        }
        const index_t C = index_t(mean.size());
        s.op = op_kind::eltwise;
        s.lowered_from = "batch_norm";
        s.chain.push_back({stage_kind::mul, 0, 0, new_constant(n.name + ".scale", {C}, sc), true});
        s.chain.push_back({stage_kind::add, 0, 0, new_constant(n.name + ".shift", {C}, sh), true});
      } else {
        for (std::size_t i = 1; i < n.inputs.size(); ++i)
          if (n.inputs[i].index >= 0) s.others.push_back(n.inputs[i].index);
        if ((n.op == op_kind::linear || n.op == op_kind::conv2d) && n.inputs.size() > 2) {
          s.others.pop_back();  // the bias becomes the first stage of the epilogue
          s.chain.push_back({stage_kind::bias, 0, 0, n.inputs[2].index, true});
        }
      }
      steps_.push_back(std::move(s));
    }
  }

  static int operand_count(const std::vector<op_stage>& chain) {
    int k = 0;
    for (const op_stage& s : chain) k += s.operand >= 0 && s.kind != stage_kind::scale;
    return k;
  }
  bool is_graph_output(std::int32_t t) const {
    return std::find(d_->outputs.begin(), d_->outputs.end(), t) != d_->outputs.end();
  }

  void fuse() {
    d_->report.nodes_before = int(g_.nodes().size());
    // Uses of each tensor by live steps (as x, operand or other input) and as a graph output.
    std::vector<int> uses(d_->tensors.size(), 0);
    std::vector<int> step_of(d_->tensors.size(), -1);  // the live step producing a tensor
    auto count = [&] {
      std::fill(uses.begin(), uses.end(), 0);
      for (std::size_t i = 0; i < steps_.size(); ++i) {
        const step& s = steps_[i];
        if (!s.alive) continue;
        step_of[std::size_t(s.out)] = int(i);
        if (s.x >= 0) ++uses[std::size_t(s.x)];
        for (std::int32_t o : s.others) ++uses[std::size_t(o)];
        for (const op_stage& st : s.chain)
          if (st.operand >= 0) ++uses[std::size_t(st.operand)];
      }
      for (std::int32_t o : d_->outputs) ++uses[std::size_t(o)];
    };
    count();
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      step& e = steps_[i];
      if (!e.alive || e.op != op_kind::eltwise) continue;
      // A residual add(skip, y) where y comes from a fusable producer: add(y, skip) instead.
      if (e.chain.size() == 1 && e.chain[0].kind == stage_kind::add && !e.chain[0].per_channel) {
        const std::int32_t a = e.x, b = e.chain[0].operand;
        if (!fusable_into(a, e, uses, step_of) && fusable_into(b, e, uses, step_of) &&
            T(a).type == dtype::f32 && T(a).shape == T(b).shape) {
          e.x = b;
          e.chain[0].operand = a;
        }
      }
      if (!fusable_into(e.x, e, uses, step_of)) continue;
      step& p = steps_[std::size_t(step_of[std::size_t(e.x)])];
      // Batch norm right after a conv (nothing but its bias in between): fold it into the
      // weights and bias at lowering instead of running the per-channel affine.
      // A bias before it is folded too, so it must be constant data (not a graph input).
      const bool fold =
          p.op == op_kind::conv2d && e.lowered_from == "batch_norm" && p.bn_scale < 0 &&
          (p.chain.empty() ||
           (p.chain.size() == 1 && p.chain[0].kind == stage_kind::bias && p.chain[0].operand >= 0 &&
            T(p.chain[0].operand).where == plan_tensor::storage::constant &&
            T(p.chain[0].operand).data != nullptr));
      if (fold) {
        p.bn_scale = e.chain[0].operand;
        p.bn_shift = e.chain[1].operand;
        p.bn_after_bias = !p.chain.empty();
        p.chain.insert(p.chain.end(), e.chain.begin() + 2, e.chain.end());
      } else {
        p.chain.insert(p.chain.end(), e.chain.begin(), e.chain.end());
      }
      p.fused.push_back(g_.nodes()[std::size_t(e.node)].name);
      p.fused.insert(p.fused.end(), e.fused.begin(), e.fused.end());
      d_->report.fused.push_back(
          std::string(fold ? "folded " : "fused ") + g_.nodes()[std::size_t(e.node)].name + " (" +
          (e.lowered_from.empty() ? std::string("eltwise") : e.lowered_from) + ") into " +
          g_.nodes()[std::size_t(p.node)].name + " (" + std::string(op_name(p.op)) + ")");
      p.out = e.out;
      e.alive = false;
      count();
    }
    fuse_quantize(uses, step_of, count);
  }

  /// The precision a linear / conv node runs in.
  precision precision_of(const node_desc& n) const {
    precision pr = n.op == op_kind::conv2d ? n.conv.prec : n.prec;
    if (pr == precision::inherit) pr = opt_.prec;
    return pr == precision::inherit ? precision::f32 : pr;
  }
  bool is_depthwise(const step& s) const {
    const node_desc& n = g_.nodes()[std::size_t(s.node)];
    return conv_shape_of(d_->tensors[std::size_t(s.x)], d_->tensors[std::size_t(s.others[0])],
                         n.conv)
        .is_depthwise();
  }
  static bool valid_u8_quant(const tensor_quant& q) {
    return q.scale > 0.f && std::isfinite(q.scale) && q.zero_point >= 0 && q.zero_point <= 255;
  }

  /// Quantize absorption. A tensor produced in f32 whose one use quantizes it is written as int8
  /// by its producer (the chain, then quantize<E> in the epilogue), so the f32 tensor and the
  /// separate quantize pass disappear:
  ///  (a) the input of an int8 linear / dense conv (it would convert f32 -> u8 with the input's
  ///      quant params): the producer writes u8 with those params;
  ///  (b) an explicit quantize node (cast f32 -> u8 / i8): the producer writes its output.
  /// Not when the f32 tensor is a graph output or has another use, and only into kernels that
  /// exist with that output type (quantize_producer).
  template <class Count>
  void fuse_quantize(std::vector<int>& uses, std::vector<int>& step_of, Count& count) {
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      step& c = steps_[i];
      if (!c.alive || c.x < 0) continue;
      const node_desc& cn = g_.nodes()[std::size_t(c.node)];
      const plan_tensor& x = T(c.x);
      if (x.type != dtype::f32) continue;
      const bool explicit_q =
          c.op == op_kind::cast && (cn.to_type == dtype::u8 || cn.to_type == dtype::i8);
      const bool int8_input =
          (c.op == op_kind::linear || c.op == op_kind::conv2d) &&
          graph_ops::gemm_available<i8, A, B>() && precision_of(cn) == precision::int8 &&
          !(c.op == op_kind::conv2d && is_depthwise(c)) && x.has_quant && valid_u8_quant(x.quant);
      if (!explicit_q && !int8_input) continue;
      const dtype to = explicit_q ? cn.to_type : dtype::u8;
      const int pi = quantize_producer(c.x, to, uses, step_of);
      if (pi < 0) continue;
      step& p = steps_[std::size_t(pi)];
      const std::string& pname = g_.nodes()[std::size_t(p.node)].name;
      const std::string pop = std::string(op_name(p.op));
      if (explicit_q) {
        p.out_quant = cn.quant;
        p.out = c.out;
        p.fused.push_back(cn.name);
        c.alive = false;
        d_->report.fused.push_back("fused " + cn.name + " (quantize " +
                                   std::string(dtype_name(to)) + ") into " + pname + " (" + pop +
                                   ")");
      } else {
        plan_tensor& t = T(c.x);
        p.out_quant = t.quant;
        t.type = to;
        t.bytes = std::size_t(shape_numel(t.shape)) * dtype_size(to);
        d_->report.fused.push_back("fused quantize of " + cn.name + "'s input (u8) into " + pname +
                                   " (" + pop + ")");
      }
      count();
    }
  }

  /// The live step that can write tensor x quantized to `to` in its epilogue, or -1: x is its
  /// output, f32, used once and not a graph output, and the producer's kernel has an int8
  /// output instantiation in this compiler: an f32 eltwise chain (u8 or i8); u8 from a linear of
  /// the f32 or int8 recipe or a dense / grouped conv of the int8 recipe. Each further one would
  /// add seconds of compile time to every TU that compiles plans (depthwise: ~8 s per layout,
  /// f32 dense conv ~3 s per layout; docs/executor.md): those keep the separate quantize pass.
  int quantize_producer(std::int32_t x, dtype to, const std::vector<int>& uses,
                        const std::vector<int>& step_of) {
    if (x < 0 || step_of[std::size_t(x)] < 0) return -1;
    const int pi = step_of[std::size_t(x)];
    const step& p = steps_[std::size_t(pi)];
    if (!p.alive || p.out != x || uses[std::size_t(x)] != 1 || is_graph_output(x)) return -1;
    if (T(x).type != dtype::f32) return -1;
    switch (p.op) {
      case op_kind::eltwise:
        return T(p.x).type == dtype::f32 ? pi : -1;
      case op_kind::linear:
      case op_kind::conv2d: {
        if (to != dtype::u8) return -1;
        const precision pr = precision_of(g_.nodes()[std::size_t(p.node)]);
        if (p.op == op_kind::conv2d && is_depthwise(p)) return -1;
        if (pr == precision::int8) return graph_ops::gemm_available<i8, A, B>() ? pi : -1;
        return pr == precision::f32 && p.op == op_kind::linear ? pi : -1;
      }
      default:
        return -1;
    }
  }

  /// Whether eltwise step e can be absorbed into the producer of tensor x.
  bool fusable_into(std::int32_t x, const step& e, const std::vector<int>& uses,
                    const std::vector<int>& step_of) {
    if (x < 0 || step_of[std::size_t(x)] < 0) return false;
    const step& p = steps_[std::size_t(step_of[std::size_t(x)])];
    if (!p.alive || p.out != x) return false;
    if (p.op != op_kind::eltwise && p.op != op_kind::linear && p.op != op_kind::conv2d &&
        p.op != op_kind::pool2d && p.op != op_kind::layer_norm && p.op != op_kind::rms_norm)
      return false;
    if (uses[std::size_t(x)] != 1 || is_graph_output(x)) return false;
    if (T(x).type != dtype::f32 || T(e.out).type != dtype::f32) return false;
    if (p.chain.size() + e.chain.size() > std::size_t(graph_ops::chain_max_stages)) return false;
    if (operand_count(p.chain) + operand_count(e.chain) > graph_ops::chain_max_operands)
      return false;
    // Operands must exist when the producer runs, and must not be x itself.
    const int pi = step_of[std::size_t(x)];
    for (const op_stage& st : e.chain) {
      if (st.operand < 0) continue;
      if (st.operand == x) return false;
      const int q = step_of[std::size_t(st.operand)];
      if (q >= 0 && q >= pi) return false;
    }
    return true;
  }

  // ---- lowering ------------------------------------------------------------------------------
  graph_ops::chain_list make_chain(const std::vector<op_stage>& chain, plan_command& c,
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
    return l;
  }
  static std::string chain_text(const std::vector<op_stage>& chain) {
    std::string r;
    static constexpr const char* names[] = {
        "relu",     "leaky_relu", "clamp",       "sigmoid", "silu", "tanh", "gelu_tanh",
        "gelu_erf", "hardswish",  "hardsigmoid", "scale",   "bias", "add",  "mul"};
    for (const op_stage& s : chain) {
      r += r.empty() ? "" : ", ";
      r += names[int(s.kind)];
    }
    return r;
  }
  /// The fused quantize stage of a step writing an int8 tensor ("" for a float output).
  std::string quantize_text(const step& s) {
    const dtype t = T(s.out).type;
    return t == dtype::u8 || t == dtype::i8 ? "quantize " + std::string(dtype_name(t)) : "";
  }
  /// A step's kernel text: its chain plus a fused quantize stage, in brackets.
  std::string chain_suffix(const step& s, const std::vector<op_stage>& chain) {
    std::string r = chain_text(chain);
    const std::string q = quantize_text(s);
    if (!q.empty()) r += (r.empty() ? "" : ", ") + q;
    return r.empty() ? "" : " [" + r + "]";
  }
  static quant_params out_quant_params(const step& s) {
    quant_params q;
    q.scale = s.out_quant.scale;
    q.zero_point = s.out_quant.zero_point;
    return q;
  }
  int threads_for(double bytes, double flops) const {
    return node_threads(d_->threads, d_->fork_join_ns, bytes, flops);
  }
  graph_ops::rows_shape rows_for(const plan_tensor& t, bool per_channel) const {
    const index_t n = shape_numel(t.shape);
    if (!per_channel) return graph_ops::make_rows(n, 0, false, 0);
    if (t.layout == tensor_layout::nchw && t.shape.size() == 4)
      return graph_ops::make_rows(n, t.shape[1], false, t.shape[2] * t.shape[3]);
    return graph_ops::make_rows(n, channels_of(t), true, 0);
  }
  static bool chain_per_channel(const std::vector<op_stage>& chain) {
    for (const op_stage& s : chain)
      if (s.kind == stage_kind::bias ||
          ((s.kind == stage_kind::add || s.kind == stage_kind::mul) && s.per_channel))
        return true;
    return false;
  }

  void lower() {
    for (step& s : steps_) {
      if (!s.alive) continue;
      const node_desc& n = g_.nodes()[std::size_t(s.node)];
      step_info info;
      info.name = n.name;
      info.op = s.lowered_from.empty() ? s.op : n.op;
      info.fused = s.fused;
      const plan_tensor& out = T(s.out);
      info.out_shape = out.shape;
      info.out_type = out.type;
      info.out_layout = out.layout;
      std::vector<plan_command> cmds;
      switch (s.op) {
        case op_kind::eltwise:
          lower_eltwise(s, info, cmds);
          break;
        case op_kind::linear:
          lower_linear(s, n, info, cmds);
          break;
        case op_kind::conv2d:
          lower_conv(s, n, info, cmds);
          break;
        case op_kind::pool2d:
          lower_pool(s, n, info, cmds);
          break;
        case op_kind::softmax:
          lower_softmax(s, n, info, cmds);
          break;
        case op_kind::layer_norm:
          lower_norm<false>(s, n, info, cmds);
          break;
        case op_kind::rms_norm:
          lower_norm<true>(s, n, info, cmds);
          break;
        case op_kind::reshape:
          lower_reshape(s, info, cmds);
          break;
        case op_kind::concat:
          lower_concat(s, n, info, cmds);
          break;
        case op_kind::convert_layout:
          lower_layout(s, info, cmds);
          break;
        case op_kind::cast:
          lower_cast(s, n, info, cmds);
          break;
        case op_kind::custom:
          lower_custom(s, n, info, cmds);
          break;
        default:
          fail_node(n, "no kernel for this op in this build yet");
      }
      if (info.kernel.empty()) info.kernel = std::string(op_name(s.op));
      int t = 1;
      for (const plan_command& c : cmds) t = std::max<int>(t, c.threads);
      info.threads = t;
      d_->steps.push_back(std::move(info));
      d_->commands.push_back(std::move(cmds));
    }
    d_->report.nodes_after = int(d_->steps.size());
    if (!opt_.fuse) d_->report.nodes_before = int(g_.nodes().size());
  }
  void lower_eltwise(const step& s, step_info& info, std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    auto p = std::make_shared<graph_ops::eltwise_params>();
    plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    p->stages = make_chain(s.chain, c, 1);
    p->shape = rows_for(x, chain_per_channel(s.chain));
    c.begin = 0;
    c.end = p->shape.rows;
    const bool bf = x.type == dtype::bf16;
    const bool just_relu = s.chain.size() == 1 && s.chain[0].kind == stage_kind::relu;
    const dtype to = T(s.out).type;
    if (to == dtype::u8 || to == dtype::i8) {
      p->out_q = out_quant_params(s);
      c.fn = to == dtype::u8 ? &graph_ops::eltwise_chain_quantize_cmd<A, B, std::uint8_t>
                             : &graph_ops::eltwise_chain_quantize_cmd<A, B, std::int8_t>;
    } else if (just_relu)
      c.fn = bf ? &graph_ops::eltwise_relu_cmd<A, B, bf16_t>
                : &graph_ops::eltwise_relu_cmd<A, B, float>;
    else
      c.fn = bf ? &graph_ops::eltwise_chain_cmd<A, B, bf16_t>
                : &graph_ops::eltwise_chain_cmd<A, B, float>;
    const double n = double(shape_numel(x.shape));
    info.bytes = double(x.bytes) + double(T(s.out).bytes) + double(operand_count(s.chain)) * n * 4;
    info.flops = n * double(s.chain.size());
    c.threads = threads_for(info.bytes, info.flops);
    c.params = own(p);
    info.kernel = "eltwise" + chain_suffix(s, s.chain);
    cmds.push_back(c);
  }

  /// Out: float, or uint8_t when fuse_quantize made this step write its output quantized.
  template <class Recipe, class Out = float>
  void lower_linear_recipe(const step& s, const node_desc& n, step_info& info,
                           std::vector<plan_command>& cmds, std::string_view recipe) {
    if constexpr (!graph_ops::gemm_available<Recipe, A, B>()) {
      fail_node(n, std::string(recipe) + " linear has no kernel on arch " + std::string(A::name) +
                       " (int8 needs vpdpbusd: avx512_vnni or avx2_vnni)");
    } else {
      using P = graph_ops::linear_params<Recipe, A, B, Out>;
      const plan_tensor& x = T(s.x);
      const index_t K = x.shape.back(), N = T(s.out).shape.back();
      const index_t M = shape_numel(x.shape) / K;
      auto p = std::make_shared<P>();
      p->M = M;
      p->out_q = out_quant_params(s);
      std::vector<float> w = constant_f32(s.others[0]);
      std::vector<op_stage> chain = s.chain;
      std::int32_t a = s.x;
      if constexpr (std::is_same_v<Recipe, f32>) {
        p->w = P::kernel::pack(w.data(), K, N, b_layout::nk);
      } else if constexpr (std::is_same_v<Recipe, bf16>) {
        if (x.type != dtype::bf16) a = convert_input(s, n, dtype::bf16, {}, cmds);
        p->w = P::kernel::pack(w.data(), K, N, b_layout::nk);
      } else {
        // int8: u8 activations with the input's quant params, i8 weights per output channel
        // (symmetric), and the dequantization scale a_scale * w_scale[n] as the chain's first
        // stage, before the bias.
        if (!x.has_quant)
          fail_node(n,
                    "an int8 linear needs the input's quant params: calibrate, then "
                    "graph::set_quant on '" +
                        x.name + "'");
        const tensor_quant q = x.quant;
        if (!(q.scale > 0.f) || q.zero_point < 0 || q.zero_point > 255)
          fail_node(n, "input '" + x.name +
                           "' quant params: scale must be positive and the "
                           "zero point in [0, 255] (u8 activations)");
        std::vector<std::int8_t> wq(w.size());
        std::vector<float> deq(static_cast<std::size_t>(N));
        for (index_t o = 0; o < N; ++o) {
          float m = 0.f;
          for (index_t k = 0; k < K; ++k) m = std::max(m, std::fabs(w[std::size_t(o * K + k)]));
          const float ws = m > 0.f ? m / 127.f : 1.f;
          for (index_t k = 0; k < K; ++k)
            wq[std::size_t(o * K + k)] = std::int8_t(
                std::clamp(std::nearbyint(w[std::size_t(o * K + k)] / ws), -127.f, 127.f));
          deq[std::size_t(o)] = ws * q.scale;
        }
        p->w = P::kernel::pack(wq.data(), K, N, b_layout::nk);
        p->a_zero = q.zero_point;
        if (x.type != dtype::u8) a = convert_input(s, n, dtype::u8, q, cmds);
        chain.insert(chain.begin(), op_stage{stage_kind::mul, 0, 0,
                                             new_constant(n.name + ".dequant", {N}, deq), true});
      }
      if (operand_count(chain) > graph_ops::chain_max_operands)
        fail_node(n, "too many fused operands");
      plan_command c;
      c.in[0] = a;
      c.out = s.out;
      p->stages = make_chain(chain, c, 1);
      c.fn = &graph_ops::linear_cmd<Recipe, A, B, Out>;
      info.flops = 2.0 * double(M) * double(N) * double(K);
      info.bytes = double(x.bytes) + double(T(s.out).bytes) +
                   double(p->w.K()) * double(p->w.N()) *
                       double(sizeof(typename P::kernel::microkernel::storage));
      c.threads = threads_for(info.bytes, info.flops);
      c.begin = 0;
      c.end = M;
      c.params = own(p);
      info.kernel =
          "gemm " + std::string(recipe) + " " + P::kernel::micro_kernel() + chain_suffix(s, chain);
      cmds.push_back(c);
    }
  }

  /// A conversion of the step's input into a new arena tensor (bf16 or u8) for the kernel.
  std::int32_t convert_input(const step& s, const node_desc& n, dtype to, tensor_quant q,
                             std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    if (x.type != dtype::f32)
      fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                       "; this precision needs f32 or " + std::string(dtype_name(to)));
    const std::int32_t t = new_tensor(n.name + ".in_" + std::string(dtype_name(to)), x.shape, to);
    auto p = std::make_shared<graph_ops::convert_params>();
    p->shape = graph_ops::make_rows(shape_numel(x.shape), 0, false, 0);
    p->q.scale = q.scale;
    p->q.zero_point = q.zero_point;
    plan_command c;
    c.in[0] = s.x;
    c.out = t;
    c.begin = 0;
    c.end = p->shape.rows;
    c.threads = threads_for(double(x.bytes) * 1.5, 0);
    if (to == dtype::bf16)
      c.fn = &graph_ops::convert_cmd<A, B, float, bf16_t, epilogue<cast<bf16>>>;
    else
      c.fn = &graph_ops::convert_cmd<A, B, float, std::uint8_t, epilogue<quantize<u8>>>;
    c.params = own(p);
    cmds.push_back(c);
    return t;
  }

  void lower_linear(const step& s, const node_desc& n, step_info& info,
                    std::vector<plan_command>& cmds) {
    const bool q8 = T(s.out).type == dtype::u8;  // quantize fused (f32 and int8 recipes)
    switch (precision_of(n)) {
      case precision::bf16:
        lower_linear_recipe<bf16>(s, n, info, cmds, "bf16");
        break;
      case precision::int8:
        if (q8)
          lower_linear_recipe<i8, std::uint8_t>(s, n, info, cmds, "int8");
        else
          lower_linear_recipe<i8>(s, n, info, cmds, "int8");
        break;
      default:
        if (q8)
          lower_linear_recipe<f32, std::uint8_t>(s, n, info, cmds, "f32");
        else
          lower_linear_recipe<f32>(s, n, info, cmds, "f32");
        break;
    }
  }

  /// f32 OIHW weights and bias of a conv step, with a folded batch norm applied; the chain's
  /// leading bias stage (if any) is replaced by the folded bias.
  void conv_weights(const step& s, std::vector<float>& w, std::vector<op_stage>& chain, index_t K,
                    const std::string& name) {
    w = constant_f32(s.others[0]);
    chain = s.chain;
    if (s.bn_scale < 0) return;
    const auto sc = constant_f32(s.bn_scale), sh = constant_f32(s.bn_shift);
    const index_t per = index_t(w.size()) / K;
    for (index_t k = 0; k < K; ++k)
      for (index_t i = 0; i < per; ++i) w[std::size_t(k * per + i)] *= sc[std::size_t(k)];
    std::vector<float> b(static_cast<std::size_t>(K), 0.f);
    // Only a bias that came before the batch norm is folded through it; a bias fused after it
    // stays in the chain, after the folded one.
    const bool had_bias = s.bn_after_bias;
    if (had_bias) b = constant_f32(chain[0].operand);
    for (index_t k = 0; k < K; ++k)
      b[std::size_t(k)] = b[std::size_t(k)] * sc[std::size_t(k)] + sh[std::size_t(k)];
    const op_stage folded{stage_kind::bias, 0, 0, new_constant(name + ".folded_bias", {K}, b),
                          true};
    if (had_bias)
      chain[0] = folded;
    else
      chain.insert(chain.begin(), folded);
  }

  template <class Recipe, class L>
  void lower_depthwise(const step& s, const node_desc& n, step_info& info,
                       std::vector<plan_command>& cmds, const conv_shape& cs) {
    using P = graph_ops::depthwise_params<Recipe, L, A, B>;
    auto p = std::make_shared<P>();
    std::vector<float> w;
    std::vector<op_stage> chain;
    conv_weights(s, w, chain, cs.k, n.name);
    p->w = P::kernel::pack(w.data(), cs);
    p->in = cs.in_dims();
    p->out = cs.out_dims();
    plan_command c;
    c.in[0] = s.x;
    if constexpr (std::is_same_v<Recipe, bf16>)
      if (T(s.x).type != dtype::bf16) c.in[0] = convert_input(s, n, dtype::bf16, {}, cmds);
    c.out = s.out;
    if (operand_count(chain) > graph_ops::chain_max_operands)
      fail_node(n, "too many fused operands");
    p->stages = make_chain(chain, c, 1);
    c.fn = &graph_ops::depthwise_cmd<Recipe, L, A, B>;
    info.flops = cs.flops();
    info.bytes = double(T(s.x).bytes) + double(T(s.out).bytes) + 4.0 * double(w.size());
    c.threads = threads_for(info.bytes, info.flops);
    c.params = own(p);
    info.kernel = std::string("depthwise_conv2d ") +
                  (std::is_same_v<Recipe, bf16> ? "bf16 " : "f32 ") + std::string(L::name) +
                  (chain.empty() ? "" : " [" + chain_text(chain) + "]");
    cmds.push_back(c);
  }

  void lower_conv(const step& s, const node_desc& n, step_info& info,
                  std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    const conv_shape cs = conv_shape_of(x, T(s.others[0]), n.conv);
    const precision pr = precision_of(n);
    const bool nhwc_ = x.layout == tensor_layout::nhwc;
    if (cs.is_depthwise()) {
      if (pr == precision::bf16) {
        if (nhwc_)
          lower_depthwise<bf16, nhwc>(s, n, info, cmds, cs);
        else
          lower_depthwise<bf16, nchw>(s, n, info, cmds, cs);
      } else {
        // int8 depthwise runs in f32 here (its cost is memory, not arithmetic).
        if (nhwc_)
          lower_depthwise<f32, nhwc>(s, n, info, cmds, cs);
        else
          lower_depthwise<f32, nchw>(s, n, info, cmds, cs);
      }
      return;
    }
    const bool q8 = T(s.out).type == dtype::u8;  // quantize fused (int8 recipe only)
    switch (pr) {
      case precision::bf16:
        if (nhwc_)
          lower_dense_conv<bf16, nhwc>(s, n, info, cmds, cs, "bf16");
        else
          lower_dense_conv<bf16, nchw>(s, n, info, cmds, cs, "bf16");
        break;
      case precision::int8:
        if (nhwc_ && q8)
          lower_dense_conv<i8, nhwc, std::uint8_t>(s, n, info, cmds, cs, "int8");
        else if (nhwc_)
          lower_dense_conv<i8, nhwc>(s, n, info, cmds, cs, "int8");
        else if (q8)
          lower_dense_conv<i8, nchw, std::uint8_t>(s, n, info, cmds, cs, "int8");
        else
          lower_dense_conv<i8, nchw>(s, n, info, cmds, cs, "int8");
        break;
      default:
        if (nhwc_)
          lower_dense_conv<f32, nhwc>(s, n, info, cmds, cs, "f32");
        else
          lower_dense_conv<f32, nchw>(s, n, info, cmds, cs, "f32");
        break;
    }
  }

  template <class Recipe, class L, class Out = float>
  void lower_dense_conv(const step& s, const node_desc& n, step_info& info,
                        std::vector<plan_command>& cmds, const conv_shape& cs,
                        std::string_view recipe) {
    if constexpr (!graph_ops::gemm_available<Recipe, A, B>()) {
      fail_node(n, std::string(recipe) + " conv2d has no kernel on arch " + std::string(A::name) +
                       " (int8 needs vpdpbusd: avx512_vnni or avx2_vnni)");
    } else {
      using P = graph_ops::conv_params<Recipe, L, A, B, Out>;
      auto p = std::make_shared<P>();
      p->out_q = out_quant_params(s);
      std::vector<float> w;
      std::vector<op_stage> chain;
      conv_weights(s, w, chain, cs.k, n.name);
      const plan_tensor& x = T(s.x);
      plan_command c;
      c.in[0] = s.x;
      if constexpr (std::is_same_v<Recipe, f32>) {
        p->w = P::kernel::pack(w.data(), cs);
      } else if constexpr (std::is_same_v<Recipe, bf16>) {
        p->w = P::kernel::pack(w.data(), cs);
        if (x.type != dtype::bf16) c.in[0] = convert_input(s, n, dtype::bf16, {}, cmds);
      } else {
        // int8 as for linear: u8 activations (the input's quant params), i8 weights per output
        // channel, the dequantization scale first in the chain.
        if (!x.has_quant)
          fail_node(n,
                    "an int8 conv2d needs the input's quant params: calibrate, then "
                    "graph::set_quant on '" +
                        x.name + "'");
        const tensor_quant q = x.quant;
        if (!(q.scale > 0.f) || q.zero_point < 0 || q.zero_point > 255)
          fail_node(n, "input '" + x.name +
                           "' quant params: scale must be positive and the "
                           "zero point in [0, 255] (u8 activations)");
        const index_t per = index_t(w.size()) / cs.k;
        std::vector<std::int8_t> wq(w.size());
        std::vector<float> deq(static_cast<std::size_t>(cs.k));
        for (index_t o = 0; o < cs.k; ++o) {
          float m = 0.f;
          for (index_t i = 0; i < per; ++i) m = std::max(m, std::fabs(w[std::size_t(o * per + i)]));
          const float ws = m > 0.f ? m / 127.f : 1.f;
          for (index_t i = 0; i < per; ++i)
            wq[std::size_t(o * per + i)] = std::int8_t(
                std::clamp(std::nearbyint(w[std::size_t(o * per + i)] / ws), -127.f, 127.f));
          deq[std::size_t(o)] = ws * q.scale;
        }
        p->w = P::kernel::pack(wq.data(), cs);
        p->x_zero = q.zero_point;
        if (x.type != dtype::u8) c.in[0] = convert_input(s, n, dtype::u8, q, cmds);
        chain.insert(chain.begin(), op_stage{stage_kind::mul, 0, 0,
                                             new_constant(n.name + ".dequant", {cs.k}, deq), true});
      }
      if (operand_count(chain) > graph_ops::chain_max_operands)
        fail_node(n, "too many fused operands");
      p->in = cs.in_dims();
      p->out = cs.out_dims();
      c.out = s.out;
      p->stages = make_chain(chain, c, 1);
      c.fn = &graph_ops::conv_cmd<Recipe, L, A, B, Out>;
      info.flops = cs.flops();
      info.bytes = double(x.bytes) + double(T(s.out).bytes) +
                   double(w.size()) * double(sizeof(typename P::kernel::weight_storage));
      c.threads = threads_for(info.bytes, info.flops);
      c.params = own(p);
      info.kernel =
          "conv2d " + std::string(recipe) + " " + std::string(L::name) + chain_suffix(s, chain);
      cmds.push_back(c);
    }
  }

  template <class Elem, class L>
  void pool_fn(plan_command& c) {
    c.fn = &graph_ops::pool_cmd<Elem, L, A, B>;
  }
  void lower_pool(const step& s, const node_desc& n, step_info& info,
                  std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    auto p = std::make_shared<graph_ops::pool_params>();
    p->shape = pool_shape_of(x, n.pool);
    p->zero_point = x.has_quant ? x.quant.zero_point : 0;
    plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    p->stages = make_chain(s.chain, c, 1);
    const bool cl = x.layout == tensor_layout::nhwc;
    switch (x.type) {
      case dtype::bf16:
        cl ? pool_fn<bf16, nhwc>(c) : pool_fn<bf16, nchw>(c);
        break;
      case dtype::u8:
        cl ? pool_fn<u8, nhwc>(c) : pool_fn<u8, nchw>(c);
        break;
      case dtype::i8:
        cl ? pool_fn<i8, nhwc>(c) : pool_fn<i8, nchw>(c);
        break;
      default:
        cl ? pool_fn<f32, nhwc>(c) : pool_fn<f32, nchw>(c);
        break;
    }
    const double window =
        p->shape.global ? double(p->shape.h * p->shape.w) : double(p->shape.r * p->shape.s);
    info.flops = double(shape_numel(T(s.out).shape)) * window;
    info.bytes = double(x.bytes) + double(T(s.out).bytes);
    c.threads = threads_for(info.bytes, info.flops);
    c.params = own(p);
    static constexpr const char* modes[] = {"max", "average", "global max", "global average"};
    info.kernel = "pool2d " + std::string(modes[int(n.pool.kind)]) + " " +
                  std::string(layout_name(x.layout)) +
                  (s.chain.empty() ? "" : " [" + chain_text(s.chain) + "]");
    cmds.push_back(c);
  }

  void lower_softmax(const step& s, const node_desc& n, step_info& info,
                     std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    auto p = std::make_shared<graph_ops::softmax_params>();
    const auto ms = memory_shape(x);
    const int r = int(ms.size());
    p->rank = r;
    for (int i = 0; i < r; ++i) p->shape[i] = ms[std::size_t(i)];
    p->axis = memory_axis(x.layout, n.axis < 0 ? n.axis + r : n.axis, r);
    plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    c.fn = x.type == dtype::bf16 ? &graph_ops::softmax_cmd<A, B, bf16_t>
                                 : &graph_ops::softmax_cmd<A, B, float>;
    info.bytes = 2.0 * double(x.bytes);
    info.flops = 5.0 * double(shape_numel(x.shape));
    c.threads = threads_for(info.bytes, info.flops);
    c.params = own(p);
    info.kernel = "softmax axis " + std::to_string(n.axis);
    cmds.push_back(c);
  }

  template <bool Rms>
  void lower_norm(const step& s, const node_desc& n, step_info& info,
                  std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    auto p = std::make_shared<graph_ops::norm_params>();
    p->cols = x.shape.back();
    p->rows = shape_numel(x.shape) / p->cols;
    p->eps = n.eps;
    if (n.inputs.size() > 1 && n.inputs[1].index >= 0) p->gamma = constant_f32(n.inputs[1].index);
    if (!Rms && n.inputs.size() > 2 && n.inputs[2].index >= 0)
      p->beta = constant_f32(n.inputs[2].index);
    plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    p->stages = make_chain(s.chain, c, 1);
    c.fn = x.type == dtype::bf16 ? &graph_ops::norm_cmd<A, B, Rms, bf16_t>
                                 : &graph_ops::norm_cmd<A, B, Rms, float>;
    info.bytes = 2.0 * double(x.bytes) + double(operand_count(s.chain)) * double(x.bytes);
    info.flops = 8.0 * double(shape_numel(x.shape));
    c.threads = threads_for(info.bytes, info.flops);
    c.params = own(p);
    info.kernel = std::string(Rms ? "rms_norm" : "layer_norm") +
                  (s.chain.empty() ? "" : " [" + chain_text(s.chain) + "]");
    cmds.push_back(c);
  }

  void lower_reshape(const step& s, step_info& info, std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    plan_tensor& o = T(s.out);
    info.kernel = "view";
    // Logical (row-major over (N, C, H, W)) order is the memory order unless x is nhwc with
    // both C and H*W above 1: then the reshape materializes the nchw order.
    const bool reorder = x.layout == tensor_layout::nhwc && x.shape.size() == 4 && x.shape[1] > 1 &&
                         x.shape[2] * x.shape[3] > 1;
    if (reorder) {
      lower_layout_impl(s.x, s.out, x.shape, tensor_layout::nhwc, tensor_layout::nchw, cmds);
      info.kernel = "convert_layout nhwc->nchw (reshape of nhwc)";
      info.bytes = 2.0 * double(x.bytes);
      return;
    }
    o.root = s.x;  // a view: resolved after memory planning (copy only if storage forces it)
    views_.push_back(std::int32_t(d_->steps.size()));
    plan_command c;  // a copy, kept only when the view cannot alias
    auto p = std::make_shared<graph_ops::slice_params>();
    p->outer = 1;
    p->inner_in = p->inner_out = index_t(x.bytes);
    c.fn = &graph_ops::slice_copy_cmd;
    c.in[0] = s.x;
    c.out = s.out;
    c.params = own(p);
    cmds.push_back(c);
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

  void lower_concat(const step& s, const node_desc& n, step_info& info,
                    std::vector<plan_command>& cmds) {
    const plan_tensor& o = T(s.out);
    const int r = int(o.shape.size());
    const int axis = memory_axis(o.layout, n.axis < 0 ? n.axis + r : n.axis, r);
    const auto oshape = memory_shape(o);
    index_t outer = 1, inner_unit = index_t(dtype_size(o.type));
    for (int i = 0; i < axis; ++i) outer *= oshape[std::size_t(i)];
    for (int i = axis + 1; i < r; ++i) inner_unit *= oshape[std::size_t(i)];
    index_t offset = 0;
    for (tensor_id id : n.inputs) {
      const plan_tensor& x = T(id);
      const auto xs = memory_shape(x);
      auto p = std::make_shared<graph_ops::slice_params>();
      p->outer = outer;
      p->inner_in = xs[std::size_t(axis)] * inner_unit;
      p->inner_out = oshape[std::size_t(axis)] * inner_unit;
      p->offset = offset;
      offset += p->inner_in;
      plan_command c;
      c.fn = &graph_ops::slice_copy_cmd;
      c.in[0] = id.index;
      c.out = s.out;
      c.params = own(p);
      cmds.push_back(c);
      info.bytes += 2.0 * double(x.bytes);
    }
    info.kernel = "concat (" + std::to_string(n.inputs.size()) + " slice copies)";
  }

  template <class T_>
  void layout_fn(tensor_layout from, tensor_layout to, plan_command& c) {
    if (from == tensor_layout::nhwc && to == tensor_layout::nchw)
      c.fn = &graph_ops::convert_layout_cmd<T_, nhwc, nchw>;
    else if (from == to && to == tensor_layout::nhwc)
      c.fn = &graph_ops::convert_layout_cmd<T_, nhwc, nhwc>;
    else if (to == tensor_layout::nhwc)
      c.fn = &graph_ops::convert_layout_cmd<T_, nchw, nhwc>;
    else
      c.fn = &graph_ops::convert_layout_cmd<T_, nchw, nchw>;
  }
  void lower_layout_impl(std::int32_t x, std::int32_t out, const std::vector<index_t>& shape,
                         tensor_layout from, tensor_layout to, std::vector<plan_command>& cmds) {
    auto p = std::make_shared<graph_ops::layout_params>();
    p->dims = dims4{shape[0], shape[1], shape[2], shape[3]};
    plan_command c;
    c.in[0] = x;
    c.out = out;
    switch (dtype_size(T(x).type)) {
      case 4:
        layout_fn<float>(from, to, c);
        break;
      case 2:
        layout_fn<std::uint16_t>(from, to, c);
        break;
      default:
        layout_fn<std::uint8_t>(from, to, c);
        break;
    }
    c.params = own(p);
    cmds.push_back(c);
  }
  void lower_layout(const step& s, step_info& info, std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    const tensor_layout from =
        x.layout == tensor_layout::nhwc ? tensor_layout::nhwc : tensor_layout::nchw;
    lower_layout_impl(s.x, s.out, x.shape, from, T(s.out).layout, cmds);
    info.kernel = "convert_layout " + std::string(layout_name(from)) + "->" +
                  std::string(layout_name(T(s.out).layout));
    info.bytes = 2.0 * double(x.bytes);
  }

  void lower_cast(const step& s, const node_desc& n, step_info& info,
                  std::vector<plan_command>& cmds) {
    const plan_tensor& x = T(s.x);
    const dtype to = n.to_type;
    auto p = std::make_shared<graph_ops::convert_params>();
    p->shape = graph_ops::make_rows(shape_numel(x.shape), 0, false, 0);
    plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    c.begin = 0;
    c.end = p->shape.rows;
    using namespace graph_ops;
    const auto from = x.type;
    if (to == dtype::i8 || to == dtype::u8) {
      p->q.scale = n.quant.scale;
      p->q.zero_point = n.quant.zero_point;
      info.kernel = "quantize";
      if (from != dtype::f32) fail_node(n, "quantize takes f32 input");
      c.fn = to == dtype::i8 ? &convert_cmd<A, B, float, std::int8_t, epilogue<quantize<i8>>>
                             : &convert_cmd<A, B, float, std::uint8_t, epilogue<quantize<u8>>>;
    } else if (from == dtype::i8 || from == dtype::u8) {
      p->q.scale = x.quant.scale;
      p->q.zero_point = x.quant.zero_point;
      info.kernel = "dequantize";
      c.fn = from == dtype::i8 ? &convert_cmd<A, B, std::int8_t, float, epilogue<dequantize>>
                               : &convert_cmd<A, B, std::uint8_t, float, epilogue<dequantize>>;
    } else {
      info.kernel = "cast " + std::string(dtype_name(from)) + "->" + std::string(dtype_name(to));
      if (from == to) {
        c.fn = &convert_cmd<A, B, float, float, epilogue<>>;
        if (from != dtype::f32) {
          auto sp = std::make_shared<slice_params>();
          sp->outer = 1;
          sp->inner_in = sp->inner_out = index_t(x.bytes);
          c.fn = &slice_copy_cmd;
          c.params = own(sp);
          cmds.push_back(c);
          return;
        }
      } else if (from == dtype::f32 && to == dtype::bf16) {
        c.fn = &convert_cmd<A, B, float, bf16_t, epilogue<cast<bf16>>>;
      } else if (from == dtype::f32 && to == dtype::f16) {
        c.fn = &convert_cmd<A, B, float, f16_t, epilogue<cast<f16>>>;
      } else if (from == dtype::bf16 && to == dtype::f32) {
        c.fn = &convert_cmd<A, B, bf16_t, float, epilogue<>>;
      } else if (from == dtype::f16 && to == dtype::f32) {
        c.fn = &convert_cmd<A, B, f16_t, float, epilogue<>>;
      } else if (from == dtype::bf16 && to == dtype::f16) {
        c.fn = &convert_cmd<A, B, bf16_t, f16_t, epilogue<cast<f16>>>;
      } else {
        c.fn = &convert_cmd<A, B, f16_t, bf16_t, epilogue<cast<bf16>>>;
      }
    }
    info.bytes = double(x.bytes) + double(T(s.out).bytes);
    c.threads = threads_for(info.bytes, 0);
    c.params = own(p);
    cmds.push_back(c);
  }

  void lower_custom(const step& s, const node_desc& n, step_info& info,
                    std::vector<plan_command>& cmds) {
    auto p = std::make_shared<graph_ops::custom_params>();
    p->op = n.custom;
    p->n_inputs = int(n.inputs.size());
    plan_command c;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) c.in[i] = n.inputs[i].index;
    c.out = s.out;
    c.fn = &graph_ops::custom_cmd;
    c.params = own(p);
    cmds.push_back(c);
    info.flops = n.custom.flops;
    info.kernel = "custom";
    for (tensor_id id : n.inputs) info.bytes += double(T(id).bytes);
    info.bytes += double(T(s.out).bytes);
  }

  // ---- memory plan ---------------------------------------------------------------------------
  std::int32_t root_of(std::int32_t t) const {
    while (d_->tensors[std::size_t(t)].root >= 0 && d_->tensors[std::size_t(t)].root != t)
      t = d_->tensors[std::size_t(t)].root;
    return t;
  }

  void plan_memory() {
    auto& ts = d_->tensors;
    const int n_steps = int(d_->steps.size());
    // Graph outputs live in the caller's buffers.
    for (std::size_t k = 0; k < d_->outputs.size(); ++k) {
      plan_tensor& o = ts[std::size_t(d_->outputs[k])];
      o.where = plan_tensor::storage::output;
      o.index = std::int32_t(k);
    }
    // Views alias their source. A view that is a graph output moves its source into the
    // output buffer when the source is a plain intermediate; otherwise its copy command stays.
    for (std::int32_t si : views_) {
      plan_command& c = d_->commands[std::size_t(si)][0];
      plan_tensor& v = ts[std::size_t(c.out)];
      plan_tensor& src = ts[std::size_t(c.in[0])];
      bool copy = false;
      if (v.where == plan_tensor::storage::output) {
        if (src.where == plan_tensor::storage::none && src.root < 0) {
          src.where = plan_tensor::storage::output;
          src.index = v.index;
          src.offset = 0;
        } else {
          copy = true;
          v.root = -1;
        }
      }
      if (!copy) d_->commands[std::size_t(si)].clear();
      d_->steps[std::size_t(si)].kernel = copy ? "copy (reshape into an output)" : "view";
    }
    // Liveness over roots: the first step writing a root, the last step touching it.
    std::vector<int> last_use(ts.size()), first_def(ts.size());
    auto mark = [&] {
      std::fill(last_use.begin(), last_use.end(), -1);
      std::fill(first_def.begin(), first_def.end(), n_steps);
      for (int si = 0; si < n_steps; ++si)
        for (const plan_command& c : d_->commands[std::size_t(si)]) {
          for (std::int32_t i : c.in)
            if (i >= 0) last_use[std::size_t(root_of(i))] = si;
          if (c.out >= 0) {
            const auto r = std::size_t(root_of(c.out));
            first_def[r] = std::min(first_def[r], si);
            last_use[r] = std::max(last_use[r], si);
          }
        }
    };
    mark();
    // In place: an eltwise step whose input (an intermediate) dies there writes over it.
    std::vector<char> in_place(ts.size(), 0);
    for (int si = 0; si < n_steps; ++si) {
      if (d_->commands[std::size_t(si)].size() != 1 ||
          d_->steps[std::size_t(si)].op != op_kind::eltwise)
        continue;
      const plan_command& c = d_->commands[std::size_t(si)][0];
      const std::int32_t xr = root_of(c.in[0]);
      plan_tensor& o = ts[std::size_t(c.out)];
      const plan_tensor& x = ts[std::size_t(xr)];
      if (o.where != plan_tensor::storage::none || x.where != plan_tensor::storage::none) continue;
      if (ts[std::size_t(c.in[0])].bytes != o.bytes || x.type != o.type) continue;
      if (last_use[std::size_t(xr)] != si) continue;
      bool operand = false;
      for (int k = 1; k < 4; ++k) operand = operand || (c.in[k] >= 0 && root_of(c.in[k]) == xr);
      if (operand) continue;
      o.root = xr;
      in_place[std::size_t(c.out)] = 1;
      mark();
    }
    // The arena: every intermediate root, placed by liveness with greedy best fit (largest
    // first; the smallest gap between blocks live at the same time that fits, else the end).
    struct item {
      std::int32_t t;
      std::size_t size;
      int first, last;
    };
    std::vector<item> items;
    std::size_t sum = 0;
    for (std::size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].where != plan_tensor::storage::none || root_of(std::int32_t(i)) != std::int32_t(i))
        continue;
      if (last_use[i] < 0) continue;  // never touched by a command (fused away, unused)
      ts[i].where = plan_tensor::storage::arena;
      items.push_back({std::int32_t(i), (ts[i].bytes + 63) / 64 * 64, first_def[i], last_use[i]});
      sum += ts[i].bytes;
    }
    for (std::size_t i = 0; i < ts.size(); ++i)
      if (in_place[i]) sum += ts[i].bytes;  // without reuse it would be a tensor of its own
    std::stable_sort(items.begin(), items.end(),
                     [](const item& a, const item& b) { return a.size > b.size; });
    struct placed {
      std::size_t off, size;
      int first, last;
    };
    std::vector<placed> done;
    std::size_t arena = 0;
    for (const item& it : items) {
      std::vector<std::pair<std::size_t, std::size_t>> busy;
      for (const placed& p : done)
        if (!(p.last < it.first || it.last < p.first)) busy.push_back({p.off, p.off + p.size});
      std::sort(busy.begin(), busy.end());
      std::size_t best = SIZE_MAX, best_gap = SIZE_MAX, at = 0;
      for (const auto& b : busy) {
        if (b.first > at && b.first - at >= it.size && b.first - at < best_gap) {
          best = at;
          best_gap = b.first - at;
        }
        at = std::max(at, b.second);
      }
      if (best == SIZE_MAX) best = at;
      // Each tensor's size was checked; their placement in one arena is checked here.
      detail::checked_add("graph", "the activation arena (bytes)", index_t(best), index_t(it.size));
      ts[std::size_t(it.t)].offset = best;
      done.push_back({best, it.size, it.first, it.last});
      arena = std::max(arena, best + it.size);
    }
    // Views and in-place outputs take their root's storage.
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const std::int32_t r = root_of(std::int32_t(i));
      if (r == std::int32_t(i)) {
        ts[i].root = -1;
        continue;
      }
      ts[i].where = ts[std::size_t(r)].where;
      ts[i].index = ts[std::size_t(r)].index;
      ts[i].offset = ts[std::size_t(r)].offset;
      ts[i].data = ts[std::size_t(r)].data;
      ts[i].root = r;
    }
    d_->arena_bytes = arena;
    d_->intermediate_bytes = sum;
  }

  const graph& g_;
  compile_options opt_;
  std::shared_ptr<plan_data> d_;
  std::vector<int> producer_;  // the graph node writing each tensor (-1: none)
  std::vector<int> order_;
  std::vector<step> steps_;
  std::vector<std::int32_t> views_;  // steps that are views
};

}  // namespace detail

/// Compiles a graph into a plan for arch A and backend B (the TU's native arch by default).
template <class A = arch::native, class B = backend::xsimd>
plan compile(const graph& g, const compile_options& options = {}) {
  return detail::graph_compiler<A, B>(g, options).run();
}

KFUSE_END_NAMESPACE
