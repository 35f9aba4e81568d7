#pragma once
// The attributes of each graph op: one type per op, held by its node (node_desc::attributes) and
// declared by its rule (graph_ops::<op>_rule::attributes). The builder calls of graph.hpp make
// them, the rules read them (node_desc::attr<T>()); no field is shared between ops.
//
// Ops with geometry use the types of graph/types.hpp: conv2d_params, pool2d_params,
// resize_params, attention_params (attention, cached_attention), reduce_params, pad_params,
// arg_reduce_params, channel_shuffle_params.
#include <atomic>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

/// eltwise: its chain of stages (binary stages name their operand).
struct eltwise_params {
  std::vector<eltwise_stage> stages;
};

/// linear: the arithmetic it runs in (inherit: compile_options::prec).
struct linear_params {
  precision prec = precision::inherit;
};

/// matmul: the arithmetic it runs in (inherit: compile_options::prec).
struct matmul_params {
  precision prec = precision::inherit;
};

/// max_pool_indices: the pooling whose maxima it locates; column_major: the index in a plane is
/// w * H + h (ONNX MaxPool's storage_order 1).
struct max_pool_indices_params {
  pool2d_params pool;
  bool column_major = false;
};

/// softmax: over `axis` (negative counts from the end); log: log_softmax.
struct softmax_params {
  int axis = -1;
  bool log = false;
};

/// layer_norm, rms_norm, batch_norm: the epsilon added to the variance.
struct norm_params {
  float eps = 1e-5f;
};

/// reshape: the target shape (one extent may be -1), or with flatten the axes [axis, rank)
/// collapsed into one; `as`: the output's layout (plain, or nchw for a 4-D target).
struct reshape_params {
  std::vector<index_t> shape;
  tensor_layout as = tensor_layout::plain;
  bool flatten = false;
  int axis = 1;
};

/// concat: along `axis` (negative counts from the end).
struct concat_params {
  int axis = 0;
};

/// convert_layout: the layout written (nchw or nhwc).
struct convert_layout_params {
  tensor_layout to = tensor_layout::nchw;
};

/// cast: the element type written; quantize (to i8 / u8): the output's quant params.
struct cast_params {
  dtype to = dtype::f32;
  tensor_quant quant{};
};

/// broadcast: the target shape and the layout written (plain, or nchw / nhwc when 4-D).
struct broadcast_params {
  std::vector<index_t> shape;
  tensor_layout as = tensor_layout::plain;
};

/// conv_transpose2d: strides, dilations, groups and top / left padding, and the output's size.
struct conv_transpose2d_params {
  conv2d_params conv;
  index_t out_h = 0, out_w = 0;
};

/// strided_view: out[i0, i1, ...] = x[offset + i0 * strides[0] + ...] with the output's shape
/// and layout (plain, or nchw when 4-D).
struct strided_view_params {
  std::vector<index_t> shape;
  index_t offset = 0;
  std::vector<index_t> strides;
  tensor_layout as = tensor_layout::plain;
};

/// gather: along the table's `axis` (negative counts from the end).
struct gather_params {
  int axis = 0;
};

/// What a custom node's callable receives on every run.
struct custom_call {
  const void* const* inputs;  // the node's input tensors, in order
  int n_inputs;
  void* output;
  const void* state;  // the op's own state (the callable)
};

/// custom: a user's fused-op instantiation as a graph node: a callable, its declared output and
/// cost. Build one with make_custom_op(callable, shape, type); the callable is called as
/// fn(const void* const* inputs, void* output) and must not throw during replay.
struct custom_op {
  std::vector<index_t> out_shape;
  dtype out_type = dtype::f32;
  tensor_layout out_layout = tensor_layout::plain;
  double flops = 0;  // per run, for the profiler
  std::shared_ptr<const void> state;
  void (*run)(const custom_call&) = nullptr;
};

template <class F>
custom_op make_custom_op(F fn, std::vector<index_t> out_shape, dtype out_type = dtype::f32,
                         double flops = 0, tensor_layout out_layout = tensor_layout::plain) {
  custom_op op;
  op.out_shape = std::move(out_shape);
  op.out_type = out_type;
  op.out_layout = out_layout;
  op.flops = flops;
  op.state = std::make_shared<const F>(std::move(fn));
  op.run = [](const custom_call& c) { (*static_cast<const F*>(c.state))(c.inputs, c.output); };
  return op;
}

/// An op without attributes declares this as its rule's attribute type.
struct no_attributes {};

/// The attribute types in a fixed order: a node's attributes record their type as its place in
/// this list, the same in every per-ISA copy of kfuse (kfuse::runtime's tiers read the caller's
/// graph). A new op with attributes appends its type.
template <class... T>
struct attribute_types {
  /// U's place in the list, -1 when it is not in it.
  template <class U>
  static constexpr int index_of() noexcept {
    int i = 0, found = -1;
    ((std::is_same_v<U, T> ? (found = i++) : i++), ...);
    return found;
  }
};
using node_attribute_types =
    attribute_types<eltwise_params, linear_params, conv2d_params, pool2d_params, softmax_params,
                    norm_params, reshape_params, concat_params, convert_layout_params, cast_params,
                    custom_op, broadcast_params, resize_params, conv_transpose2d_params,
                    strided_view_params, matmul_params, gather_params, attention_params,
                    reduce_params, pad_params, arg_reduce_params, max_pool_indices_params,
                    channel_shuffle_params>;

namespace detail {
/// One attribute value with its reference count. `destroy` is set where the value is made: the
/// code that made it deletes it, whichever per-ISA copy of kfuse drops the last reference.
struct attribute_box {
  std::atomic<long> refs{1};
  void (*destroy)(const attribute_box*) = nullptr;
};
template <class T>
struct attribute_box_of : attribute_box {
  T value;
  template <class... Args>
  explicit attribute_box_of(Args&&... args) : value(std::forward<Args>(args)...) {
    destroy = [](const attribute_box* b) { delete static_cast<const attribute_box_of*>(b); };
  }
};
}  // namespace detail

/// A node's attributes: one value of one of node_attribute_types, or none (no_attributes: an op
/// without attributes, or a node_desc made by hand). Copies share the value until one of them
/// changes it (copy on write), so copying a graph copies no attributes, and a changed copy leaves
/// the original as it was.
class node_attributes {
 public:
  node_attributes() = default;
  /// n.attributes = conv2d_params{...}
  template <class T>
  requires(node_attribute_types::index_of<std::decay_t<T>>() >= 0)
      node_attributes(T&& value) {  // NOLINT: implicit, as an assignment of the value
    emplace<std::decay_t<T>>(std::forward<T>(value));
  }
  node_attributes(const node_attributes& o) noexcept : box_(o.box_), id_(o.id_) {
    if (box_) box_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  node_attributes(node_attributes&& o) noexcept : box_(o.box_), id_(o.id_) { o.box_ = nullptr; }
  node_attributes& operator=(node_attributes o) noexcept {
    std::swap(box_, o.box_);
    std::swap(id_, o.id_);
    return *this;
  }
  ~node_attributes() { release(); }

  template <class T, class... Args>
  T& emplace(Args&&... args) {
    static_assert(id_of<T>() >= 0,
                  "kfuse: not an attribute type of graph/attributes.hpp (node_attribute_types)");
    auto* b = new detail::attribute_box_of<T>(std::forward<Args>(args)...);
    release();
    box_ = b;
    id_ = id_of<T>();
    return b->value;
  }
  /// Whether the value is a T (no_attributes: whether there is none).
  template <class T>
  bool holds() const noexcept {
    if constexpr (std::is_same_v<T, no_attributes>)
      return box_ == nullptr;
    else
      return box_ && id_ == id_of<T>();
  }
  /// The value as a T, or null when it is not one.
  template <class T>
  const T* get_if() const noexcept {
    return holds<T>() ? &static_cast<const detail::attribute_box_of<T>*>(box_)->value : nullptr;
  }
  /// The value as a T to change (this node's own copy from then on), or null.
  template <class T>
  T* get_if() {
    if (!holds<T>()) return nullptr;
    auto* b = static_cast<detail::attribute_box_of<T>*>(box_);
    if (b->refs.load(std::memory_order_acquire) > 1) {
      auto* own = new detail::attribute_box_of<T>(b->value);
      release();
      box_ = b = own;
    }
    return &b->value;
  }

 private:
  template <class T>
  static constexpr int id_of() noexcept {
    return node_attribute_types::index_of<T>();
  }
  void release() noexcept {
    if (box_ && box_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) box_->destroy(box_);
    box_ = nullptr;
  }
  detail::attribute_box* box_ = nullptr;
  int id_ = -1;
};

KFUSE_END_NAMESPACE
