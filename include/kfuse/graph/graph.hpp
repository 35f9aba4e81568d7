#pragma once
// graph: a static dataflow graph of tensors and nodes, built once, then compiled into a plan.
//
//   kfuse::graph g;
//   auto x  = g.input("x", {1, 784});                               // f32, row-major
//   auto w1 = g.constant("w1", {1024, 784}, w1_data);               // owned copy, PyTorch [N, K]
//   auto b1 = g.constant("b1", {1024}, b1_data);
//   auto h  = g.relu("relu1", g.linear("fc1", x, w1, b1));
//   ...
//   g.output(y);
//   kfuse::plan p = kfuse::compile(g, {.threads = 2});   // kfuse/graph/compile.hpp
//   kfuse::replay_buffer r = p.record({kfuse::bind(x_in)}, {kfuse::bind(y_out)});
//   r.replay();                                          // no allocation, no lookup
//   r.bind_input(0, other_x);  r.replay();               // rebind without re-recording
//
// The builder only records; compile() infers shapes, element types and layouts and validates
// everything, with errors that name the node ("graph: node 'fc2' (linear): ...").
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kfuse/detail/checks.hpp"
#include "kfuse/graph/attributes.hpp"
#include "kfuse/graph/names.hpp"

KFUSE_BEGIN_NAMESPACE

/// A tensor of the graph as declared (intermediate shapes are filled in by compile()).
struct tensor_desc {
  std::string name;
  std::vector<index_t> shape;  // for 4-D nchw / nhwc: (N, C, H, W) whatever the layout
  dtype type = dtype::f32;
  tensor_layout layout = tensor_layout::plain;
  bool is_input = false;
  bool is_constant = false;  // a weight or constant: has_data says whether data was given
  bool has_data = false;
  bool has_quant = false;
  tensor_quant quant{};
  std::vector<unsigned char> data;  // constants: an owned copy
  std::int32_t producer = -1;       // the node writing it (-1 for inputs and constants)
};

/// A node as declared: what every node has, and its op's attributes (graph/attributes.hpp).
struct node_desc {
  std::string name;
  op_kind op = op_kind::eltwise;
  std::vector<tensor_id> inputs;  // data inputs first, then weights (see each builder call)
  tensor_id output{};
  node_attributes attributes;  // the op's own type, made by its builder call

  /// The attributes as T, the type of the node's op (graph_ops::<op>_rule::attributes); another
  /// type is an error that names the node.
  template <class T>
  const T& attr() const {
    if (const T* a = attributes.get_if<T>()) return *a;
    fail_attributes();
  }
  template <class T>
  T& attr() {
    if (T* a = attributes.template get_if<T>()) return *a;
    fail_attributes();
  }

 private:
  // Out of line of attr<T>(): one copy of the message's code, not one per attribute type.
  [[noreturn]] void fail_attributes() const;
};

inline void node_desc::fail_attributes() const {
  detail::fail("graph", "node '" + name + "' (" + std::string(op_name(op)) +
                            "): its attributes are not its op's (node_desc edited by hand?)");
}

/// The precision a linear, matmul or conv2d node declares (inherit for every other op).
inline precision declared_precision(const node_desc& n) noexcept {
  if (const auto* c = n.attributes.get_if<conv2d_params>()) return c->prec;
  if (const auto* l = n.attributes.get_if<linear_params>()) return l->prec;
  if (const auto* m = n.attributes.get_if<matmul_params>()) return m->prec;
  return precision::inherit;
}

namespace detail {
class layout_chooser;  // graph/passes/layout_choice.hpp: rewrites a copy of a graph
}

class graph {
  friend class detail::layout_chooser;

 public:
  // ---- tensors -------------------------------------------------------------------------------
  /// A graph input, bound by the caller at record time (in declaration order).
  tensor_id input(std::string name, std::vector<index_t> shape, dtype type = dtype::f32,
                  tensor_layout layout = tensor_layout::plain) {
    tensor_desc t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.type = type;
    t.layout = layout;
    t.is_input = true;
    inputs_.push_back(add_tensor(std::move(t)));
    return inputs_.back();
  }

  /// A constant / weight: `data` (numel(shape) elements of T) is copied into the graph.
  template <class T>
  tensor_id constant(std::string name, std::vector<index_t> shape, const T* data,
                     tensor_layout layout = tensor_layout::plain) {
    return constant(std::move(name), std::move(shape), dtype_of<T>(), data, layout);
  }
  tensor_id constant(std::string name, std::vector<index_t> shape, dtype type, const void* data,
                     tensor_layout layout = tensor_layout::plain) {
    // A bad shape fails before the tensor is added: the graph stays as it was.
    detail::checked_count("graph", "constant '" + name + "'", shape);
    const tensor_id id = weight(std::move(name), std::move(shape), type, layout);
    if (data || shape_numel(tensors_[std::size_t(id.index)].shape) == 0) set_data(id, data);
    return id;
  }
  /// A weight declared without data yet (set_data later; compile() fails while it is missing).
  tensor_id weight(std::string name, std::vector<index_t> shape, dtype type = dtype::f32,
                   tensor_layout layout = tensor_layout::plain) {
    tensor_desc t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.type = type;
    t.layout = layout;
    t.is_constant = true;
    return add_tensor(std::move(t));
  }
  /// Copies a constant's data (numel(shape) elements of its type).
  void set_data(tensor_id id, const void* data) {
    tensor_desc& t = at(id, "set_data");
    if (!t.is_constant)
      detail::fail("graph", "set_data: tensor '" + t.name + "' is not a constant");
    // Checked: a negative or overflowing shape is an error here, not a wild copy.
    const std::string what = "set_data: constant '" + t.name + "'";
    const std::size_t bytes = detail::checked_bytes(
        "graph", what, detail::checked_count("graph", what, t.shape), dtype_size(t.type));
    if (bytes && !data) detail::fail("graph", "set_data: null data for '" + t.name + "'");
    t.data.assign(static_cast<const unsigned char*>(data),
                  static_cast<const unsigned char*>(data) + bytes);
    t.has_data = true;
  }

  /// Marks a tensor as a graph output (bound by the caller at record time, in this order).
  void output(tensor_id id) { outputs_.push_back(id); }

  /// Per-tensor quantization parameters of an activation (used by int8 plans).
  void set_quant(tensor_id id, tensor_quant q) {
    tensor_desc& t = at(id, "set_quant");
    t.has_quant = true;
    t.quant = q;
  }

  // ---- eltwise ---------------------------------------------------------------------------------
  tensor_id eltwise(std::string name, tensor_id x, std::vector<eltwise_stage> stages) {
    node_desc n = make(std::move(name), op_kind::eltwise, {x});
    for (const eltwise_stage& s : stages)
      if (stage_reads_operand(s.kind)) n.inputs.push_back(s.operand);
    n.attributes = eltwise_params{std::move(stages)};
    return add_node(std::move(n));
  }
  tensor_id relu(std::string name, tensor_id x) {
    return unary(std::move(name), x, {stage_kind::relu});
  }
  tensor_id leaky_relu(std::string name, tensor_id x, float alpha = 0.01f) {
    return unary(std::move(name), x, {stage_kind::leaky_relu, alpha});
  }
  tensor_id clamp(std::string name, tensor_id x, float lo, float hi) {
    return unary(std::move(name), x, {stage_kind::clamp, lo, hi});
  }
  tensor_id sigmoid(std::string name, tensor_id x) {
    return unary(std::move(name), x, {stage_kind::sigmoid});
  }
  tensor_id silu(std::string name, tensor_id x) {
    return unary(std::move(name), x, {stage_kind::silu});
  }
  tensor_id tanh(std::string name, tensor_id x) {
    return unary(std::move(name), x, {stage_kind::tanh});
  }
  /// GELU; tanh approximation by default (PyTorch approximate="tanh"), erf when exact.
  tensor_id gelu(std::string name, tensor_id x, bool exact = false) {
    return unary(std::move(name), x, {exact ? stage_kind::gelu_erf : stage_kind::gelu_tanh});
  }
  tensor_id hardswish(std::string name, tensor_id x) {
    return unary(std::move(name), x, {stage_kind::hardswish});
  }
  tensor_id hardsigmoid(std::string name, tensor_id x) {
    return unary(std::move(name), x, {stage_kind::hardsigmoid});
  }
  tensor_id scale(std::string name, tensor_id x, float factor) {
    return unary(std::move(name), x, {stage_kind::scale, factor});
  }
  /// x + b[channel] (b: 1-D, one value per channel: the last axis of a plain tensor, C of 4-D).
  tensor_id bias_add(std::string name, tensor_id x, tensor_id b) {
    return eltwise(std::move(name), x, {eltwise_stage{stage_kind::bias, 0, 0, b}});
  }
  /// a + b, elementwise (same shape), e.g. a residual connection.
  tensor_id add(std::string name, tensor_id a, tensor_id b) {
    return eltwise(std::move(name), a, {eltwise_stage{stage_kind::add, 0, 0, b}});
  }
  tensor_id mul(std::string name, tensor_id a, tensor_id b) {
    return eltwise(std::move(name), a, {eltwise_stage{stage_kind::mul, 0, 0, b}});
  }

  // ---- compute ops ----------------------------------------------------------------------------
  /// y[M, N] = x[M, K] . weight[N, K]^T (+ bias[N]); x may have any leading dims (..., K).
  tensor_id linear(std::string name, tensor_id x, tensor_id weight, tensor_id bias = {},
                   precision prec = precision::inherit) {
    node_desc n = make(std::move(name), op_kind::linear, {x, weight});
    if (bias.index >= 0) n.inputs.push_back(bias);
    n.attributes = linear_params{prec};
    return add_node(std::move(n));
  }
  /// x: 4-D nchw or nhwc, weight OIHW [K, C / groups, R, S], bias [K] optional.
  tensor_id conv2d(std::string name, tensor_id x, tensor_id weight, tensor_id bias = {},
                   conv2d_params p = {}) {
    node_desc n = make(std::move(name), op_kind::conv2d, {x, weight});
    if (bias.index >= 0) n.inputs.push_back(bias);
    n.attributes = p;
    return add_node(std::move(n));
  }
  tensor_id pool2d(std::string name, tensor_id x, pool2d_params p) {
    node_desc n = make(std::move(name), op_kind::pool2d, {x});
    n.attributes = p;
    return add_node(std::move(n));
  }
  /// The int64 flat input index of each window's maximum of pool2d(x, p) (p: max pooling; x
  /// an NCHW image): (n * C + c) * H * W + h * W + w, or w * H + h in its plane when
  /// column_major (ONNX MaxPool's Indices with storage_order 1).
  tensor_id max_pool_indices(std::string name, tensor_id x, pool2d_params p,
                             bool column_major = false) {
    node_desc n = make(std::move(name), op_kind::max_pool_indices, {x});
    n.attributes = max_pool_indices_params{p, column_major};
    return add_node(std::move(n));
  }
  tensor_id softmax(std::string name, tensor_id x, int axis = -1) {
    node_desc n = make(std::move(name), op_kind::softmax, {x});
    n.attributes = softmax_params{axis, false};
    return add_node(std::move(n));
  }
  /// log(softmax(x)) over `axis`, as x - max - log(sum exp(x - max)).
  tensor_id log_softmax(std::string name, tensor_id x, int axis = -1) {
    node_desc n = make(std::move(name), op_kind::softmax, {x});
    n.attributes = softmax_params{axis, true};
    return add_node(std::move(n));
  }
  /// x padded by pads[d] positions before and pads[rank + d] after each (logical) axis d, as ONNX
  /// Pad orders them; negative pads crop. The new positions hold `value` (constant), mirror x
  /// without its edge (reflect) or repeat the edge (edge).
  tensor_id pad(std::string name, tensor_id x, std::vector<index_t> pads,
                pad_mode mode = pad_mode::constant, float value = 0.f) {
    return pad(std::move(name), x, pad_params{std::move(pads), mode, value});
  }
  tensor_id pad(std::string name, tensor_id x, pad_params p) {
    node_desc n = make(std::move(name), op_kind::pad, {x});
    n.attributes = std::move(p);
    return add_node(std::move(n));
  }
  /// x's channels in `groups` groups, transposed as ShuffleNet's channel shuffle (a reshape to
  /// [N, groups, C / groups, H, W], axes 1 and 2 swapped, a reshape back), of which the channels
  /// [first, first + count) are the output (count -1: to the last; groups 1: a channel slice).
  /// x: a 4-D image, nchw or nhwc (the output keeps its layout and type).
  tensor_id channel_shuffle(std::string name, tensor_id x, int groups, index_t first = 0,
                            index_t count = -1) {
    node_desc n = make(std::move(name), op_kind::channel_shuffle, {x});
    n.attributes = channel_shuffle_params{groups, first, count};
    return add_node(std::move(n));
  }
  /// The int64 index of the maximum / minimum along `axis` (ties: the first, or the last with
  /// select_last; a NaN wins), the axis kept as extent 1 with keepdims. x: plain or nchw.
  tensor_id arg_reduce(std::string name, tensor_id x, arg_kind kind, int axis = -1,
                       bool keepdims = true, bool select_last = false) {
    node_desc n = make(std::move(name), op_kind::arg_reduce, {x});
    n.attributes = arg_reduce_params{kind, axis, keepdims, select_last};
    return add_node(std::move(n));
  }
  /// A reduction over the logical `axes` (negative count from the end; empty: all),
  /// keeping them as extents of 1 with keepdims.
  tensor_id reduce(std::string name, tensor_id x, reduce_kind kind, std::vector<int> axes = {},
                   bool keepdims = true) {
    node_desc n = make(std::move(name), op_kind::reduce, {x});
    n.attributes = reduce_params{kind, std::move(axes), keepdims};
    return add_node(std::move(n));
  }
  /// Over the last axis; gamma / beta ([last]) optional.
  tensor_id layer_norm(std::string name, tensor_id x, tensor_id gamma = {}, tensor_id beta = {},
                       float eps = 1e-5f) {
    node_desc n = make(std::move(name), op_kind::layer_norm, {x, gamma, beta});
    n.attributes = norm_params{eps};
    return add_node(std::move(n));
  }
  tensor_id rms_norm(std::string name, tensor_id x, tensor_id gamma = {}, float eps = 1e-6f) {
    node_desc n = make(std::move(name), op_kind::rms_norm, {x, gamma});
    n.attributes = norm_params{eps};
    return add_node(std::move(n));
  }
  /// Inference batch norm over C of a 4-D tensor (or the last axis of a plain one):
  /// y = (x - mean) / sqrt(var + eps) * gamma + beta. Folded into a preceding conv2d.
  tensor_id batch_norm(std::string name, tensor_id x, tensor_id mean, tensor_id var,
                       tensor_id gamma, tensor_id beta, float eps = 1e-5f) {
    node_desc n = make(std::move(name), op_kind::batch_norm, {x, mean, var, gamma, beta});
    n.attributes = norm_params{eps};
    return add_node(std::move(n));
  }

  // ---- shape and type ops ---------------------------------------------------------------------
  /// Same elements, another shape (one extent may be -1). A view: no copy when possible.
  /// `as`: the output's layout, plain or (for a 4-D target) nchw, which is the same memory
  /// order: a [N, C, L] sequence viewed as an [N, C, 1, L] image for conv2d, without a copy.
  tensor_id reshape(std::string name, tensor_id x, std::vector<index_t> shape,
                    tensor_layout as = tensor_layout::plain) {
    node_desc n = make(std::move(name), op_kind::reshape, {x});
    n.attributes = reshape_params{std::move(shape), as, false, 1};
    return add_node(std::move(n));
  }
  /// Collapses axes [axis, rank) into one (a plain [N, C*H*W] from nchw by default).
  tensor_id flatten(std::string name, tensor_id x, int axis = 1) {
    node_desc n = make(std::move(name), op_kind::reshape, {x});
    // the target shape is derived at compile time
    n.attributes = reshape_params{{}, tensor_layout::plain, true, axis};
    return add_node(std::move(n));
  }
  tensor_id concat(std::string name, std::vector<tensor_id> xs, int axis) {
    node_desc n = make(std::move(name), op_kind::concat, std::move(xs));
    n.attributes = concat_params{axis};
    return add_node(std::move(n));
  }
  tensor_id convert_layout(std::string name, tensor_id x, tensor_layout to) {
    node_desc n = make(std::move(name), op_kind::convert_layout, {x});
    n.attributes = convert_layout_params{to};
    return add_node(std::move(n));
  }
  /// Float to float (round to nearest even), e.g. f32 -> bf16.
  tensor_id cast(std::string name, tensor_id x, dtype to) {
    node_desc n = make(std::move(name), op_kind::cast, {x});
    n.attributes = cast_params{to, {}};
    return add_node(std::move(n));
  }
  /// Float -> i8 / u8 with q's scale and zero point (also recorded as the output's quant).
  tensor_id quantize(std::string name, tensor_id x, dtype to, tensor_quant q) {
    node_desc n = make(std::move(name), op_kind::cast, {x});
    n.attributes = cast_params{to, q};
    const tensor_id y = add_node(std::move(n));
    set_quant(y, q);
    return y;
  }
  /// i8 / u8 -> f32 with the input's quant params.
  tensor_id dequantize(std::string name, tensor_id x) {
    node_desc n = make(std::move(name), op_kind::cast, {x});
    n.attributes = cast_params{dtype::f32, {}};
    return add_node(std::move(n));
  }
  /// x expanded to `shape` by NumPy's rules (extent-1 axes repeated, missing leading axes
  /// added), written in layout `as` (plain, or nchw / nhwc for a 4-D shape).
  tensor_id broadcast(std::string name, tensor_id x, std::vector<index_t> shape,
                      tensor_layout as = tensor_layout::plain) {
    node_desc n = make(std::move(name), op_kind::broadcast, {x});
    n.attributes = broadcast_params{std::move(shape), as};
    return add_node(std::move(n));
  }
  /// out[i0, i1, ...] = x[offset + i0 * strides[0] + i1 * strides[1] + ...] over x's logical
  /// order; strides in elements, 0 repeats, negative reads backwards. Transposes, slices with
  /// steps, tiles. An nhwc x is read in place when each axis of the view walks one of its axes;
  /// `as`: plain, or nchw / nhwc for a 4-D result. A view that reads x's memory in order copies
  /// nothing.
  tensor_id strided_view(std::string name, tensor_id x, std::vector<index_t> shape, index_t offset,
                         std::vector<index_t> strides, tensor_layout as = tensor_layout::plain) {
    node_desc n = make(std::move(name), op_kind::strided_view, {x});
    n.attributes = strided_view_params{std::move(shape), offset, std::move(strides), as};
    return add_node(std::move(n));
  }
  /// a [..., M, K] . b [..., K, N] of two run-time tensors (NumPy matmul: batch dimensions
  /// broadcast, a 1-D operand is a row / column). f32; bf16 plans multiply in bf16.
  tensor_id matmul(std::string name, tensor_id a, tensor_id b,
                   precision prec = precision::inherit) {
    node_desc n = make(std::move(name), op_kind::matmul, {a, b});
    n.attributes = matmul_params{prec};
    return add_node(std::move(n));
  }
  /// Fused attention: softmax(Q.K^T * scale + bias) . V with Q [B, Sq, H, d], K and V
  /// [B, Sk, Hkv, d] (Hkv divides H: grouped-query), out [B, Sq, H, d]; bias (optional) any shape
  /// that broadcasts to [B, H, Sq, Sk] (a key-padding mask [B, 1, 1, Sk]); scale 0: 1 / sqrt(d).
  tensor_id attention(std::string name, tensor_id q, tensor_id k, tensor_id v, tensor_id bias = {},
                      attention_params p = {}) {
    node_desc n = make(std::move(name), op_kind::attention, {q, k, v, bias});
    n.attributes = p;
    return add_node(std::move(n));
  }
  /// A decoder step (or a prefill of Sq tokens) against KV caches the caller owns: k_new and
  /// v_new [B, Sq, Hkv, d] are written into k_cache and v_cache [B, Smax, Hkv, d] (graph inputs
  /// the plan writes: bind writable buffers) at rows [pos, pos + Sq), pos = position's one i32 /
  /// i64 value read at every replay; then q [B, Sq, H, d] attends causally to the first
  /// pos + Sq cached rows (query i sees keys up to pos + i). out [B, Sq, H, d]; scale 0:
  /// 1 / sqrt(d). A position past the cache is a kfuse::error, raised before any write.
  tensor_id cached_attention(std::string name, tensor_id q, tensor_id k_new, tensor_id v_new,
                             tensor_id k_cache, tensor_id v_cache, tensor_id position,
                             attention_params p = {}) {
    node_desc n = make(std::move(name), op_kind::cached_attention,
                       {q, k_new, v_new, k_cache, v_cache, position});
    n.attributes = p;
    return add_node(std::move(n));
  }
  /// out = table gathered along `axis` by i32 / i64 `indices` (negative ones count from the end):
  /// the shape is table's before axis, then indices', then table's after axis (ONNX Gather).
  tensor_id gather(std::string name, tensor_id table, tensor_id indices, int axis = 0) {
    node_desc n = make(std::move(name), op_kind::gather, {table, indices});
    n.attributes = gather_params{axis};
    return add_node(std::move(n));
  }
  /// Transposed convolution of an nhwc image: weights [C, K / groups, R, S], bias [K]
  /// optional; p's strides, dilations, groups and top / left padding; output out_h x out_w.
  tensor_id conv_transpose2d(std::string name, tensor_id x, tensor_id weight, tensor_id bias,
                             conv2d_params p, index_t out_h, index_t out_w) {
    node_desc n = make(std::move(name), op_kind::conv_transpose2d, {x, weight});
    if (bias.index >= 0) n.inputs.push_back(bias);
    n.attributes = conv_transpose2d_params{p, out_h, out_w};
    return add_node(std::move(n));
  }
  /// x (4-D nchw or nhwc) resampled to p.out_h x p.out_w, nearest or bilinear.
  tensor_id resize(std::string name, tensor_id x, resize_params p) {
    node_desc n = make(std::move(name), op_kind::resize, {x});
    n.attributes = p;
    return add_node(std::move(n));
  }
  /// A user's fused op (see make_custom_op): at most 4 inputs.
  tensor_id custom(std::string name, std::vector<tensor_id> inputs, custom_op op) {
    node_desc n = make(std::move(name), op_kind::custom, std::move(inputs));
    n.attributes = std::move(op);
    return add_node(std::move(n));
  }

  // ---- editing and introspection --------------------------------------------------------------
  /// Rewires input `slot` of the node called `node` (tools and tests; may create a cycle, which
  /// compile() reports).
  void set_node_input(std::string_view node, std::size_t slot, tensor_id t) {
    for (node_desc& n : nodes_)
      if (n.name == node) {
        if (slot >= n.inputs.size())
          detail::fail("graph", "set_node_input: node '" + n.name + "' has no input " +
                                    std::to_string(slot));
        n.inputs[slot] = t;
        return;
      }
    detail::fail("graph", "set_node_input: no node '" + std::string(node) + "'");
  }

  const std::vector<tensor_desc>& tensors() const noexcept { return tensors_; }
  const std::vector<node_desc>& nodes() const noexcept { return nodes_; }
  const std::vector<tensor_id>& inputs() const noexcept { return inputs_; }
  const std::vector<tensor_id>& outputs() const noexcept { return outputs_; }
  const tensor_desc& tensor(tensor_id id) const {
    return const_cast<graph*>(this)->at(id, "tensor");
  }
  /// The tensor called `name` (a node's output is named after the node).
  tensor_id find(std::string_view name) const {
    for (std::size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].name == name) return tensor_id{std::int32_t(i)};
    detail::fail("graph", "no tensor '" + std::string(name) + "'");
  }

 private:
  tensor_desc& at(tensor_id id, std::string_view what) {
    if (id.index < 0 || std::size_t(id.index) >= tensors_.size())
      detail::fail("graph", std::string(what) + ": unknown tensor id " + std::to_string(id.index));
    return tensors_[std::size_t(id.index)];
  }
  tensor_id add_tensor(tensor_desc t) {
    tensors_.push_back(std::move(t));
    return tensor_id{std::int32_t(tensors_.size() - 1)};
  }
  static node_desc make(std::string name, op_kind op, std::vector<tensor_id> inputs) {
    node_desc n;
    n.name = std::move(name);
    n.op = op;
    n.inputs = std::move(inputs);
    return n;
  }
  tensor_id unary(std::string name, tensor_id x, eltwise_stage s) {
    return eltwise(std::move(name), x, {s});
  }
  tensor_id add_node(node_desc n) {
    tensor_desc t;
    t.name = n.name;
    t.producer = std::int32_t(nodes_.size());
    n.output = add_tensor(std::move(t));
    nodes_.push_back(std::move(n));
    return nodes_.back().output;
  }

  std::vector<tensor_desc> tensors_;
  std::vector<node_desc> nodes_;
  std::vector<tensor_id> inputs_, outputs_;
};

KFUSE_END_NAMESPACE
