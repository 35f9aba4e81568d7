#pragma once
// reshape (and flatten) as a graph op: a view of its input with another shape, zero copy unless
// the memory plan cannot alias it (then a copy) or the input is nhwc with C and H * W above 1
// (then the logical nchw order is materialized).
#include "kfuse/graph/ops/convert_layout.hpp"
#include "kfuse/graph/ops/copy.hpp"
#include "kfuse/graph/ops/op_rule.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Step s's output as its input's bytes: the memory plan aliases it, and keeps this whole copy
/// only when it must (a view returned as a graph output whose source lives elsewhere).
inline void view_command(detail::compile_context& cx, const detail::step& s,
                         std::vector<detail::plan_command>& cmds) {
  cx.T(s.out).root = s.x;
  cx.views.push_back(std::int32_t(cx.d->steps.size()));
  detail::plan_command c;
  c.fn = &slice_copy_cmd;
  c.in[0] = s.x;
  c.out = s.out;
  c.params = cx.own(std::make_shared<slice_params>(whole_copy(cx.T(s.x).bytes)));
  cmds.push_back(c);
}

struct reshape_rule : op_rule {
  static constexpr op_kind kind = op_kind::reshape;
  using attributes = reshape_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const reshape_params& attr = n.attr<reshape_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    const std::vector<index_t> shape = attr.flatten ? flat_shape(cx, n, x) : target_shape(cx, n, x);
    if (shape_numel(shape) != shape_numel(x.shape))
      cx.fail_node(n, "input '" + x.name + "' has " + std::to_string(shape_numel(x.shape)) +
                          " elements " + cx.shape_str(x.shape) + ", the target shape " +
                          cx.shape_str(shape) + " " + std::to_string(shape_numel(shape)));
    if (attr.as == tensor_layout::nhwc || (attr.as == tensor_layout::nchw && shape.size() != 4))
      cx.fail_node(n,
                   "a reshape's output is plain or, for a 4-D shape, nchw (the same memory "
                   "order), not " +
                       std::string(layout_name(attr.as)) + " " + cx.shape_str(shape));
    cx.set_out(n, shape, x.type, attr.as);
    cx.pass_quant(n, x);
  }

  /// flatten: axes [axis, rank) collapsed into one.
  static std::vector<index_t> flat_shape(const detail::compile_context& cx, const node_desc& n,
                                         const plan_tensor& x) {
    const reshape_params& attr = n.attr<reshape_params>();
    const int r = int(x.shape.size());
    const int axis = attr.axis < 0 ? attr.axis + r : attr.axis;
    if (axis < 0 || axis > r)
      cx.fail_node(n, "axis " + std::to_string(attr.axis) + " is out of range for rank " +
                          std::to_string(r));
    std::vector<index_t> shape(x.shape.begin(), x.shape.begin() + axis);
    index_t inner = 1;
    for (int i = axis; i < r; ++i) inner *= x.shape[std::size_t(i)];
    shape.push_back(inner);
    return shape;
  }

  /// The node's target shape with its -1 (if any) inferred.
  static std::vector<index_t> target_shape(const detail::compile_context& cx, const node_desc& n,
                                           const plan_tensor& x) {
    std::vector<index_t> shape = n.attr<reshape_params>().shape;
    int unknown = -1;
    index_t known = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == -1) {
        if (unknown >= 0) cx.fail_node(n, "more than one -1 in the target shape");
        unknown = int(i);
      } else if (shape[i] <= 0) {
        cx.fail_node(n, "non-positive extent in the target shape " + cx.shape_str(shape));
      } else {
        known *= shape[i];
      }
    }
    if (unknown >= 0) {
      if (shape_numel(x.shape) % known != 0)
        cx.fail_node(n, "cannot infer -1: " + std::to_string(shape_numel(x.shape)) +
                            " elements do not divide by " + std::to_string(known));
      shape[std::size_t(unknown)] = shape_numel(x.shape) / known;
    }
    return shape;
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc&,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(s.x);
    info.kernel = "view";
    // Logical (row-major over (N, C, H, W)) order is the memory order unless x is nhwc with
    // both C and H*W above 1: then the reshape materializes the nchw order.
    const bool reorder = x.layout == tensor_layout::nhwc && x.shape.size() == 4 && x.shape[1] > 1 &&
                         x.shape[2] * x.shape[3] > 1;
    if (reorder) {
      layout_command(cx, s.x, s.out, x.shape, tensor_layout::nhwc, tensor_layout::nchw, cmds);
      info.kernel = "convert_layout nhwc->nchw (reshape of nhwc)";
      info.bytes = 2.0 * double(x.bytes);
      return;
    }
    view_command(cx, s, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
