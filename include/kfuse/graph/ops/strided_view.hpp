#pragma once
// strided_view as a graph op: out[i0, i1, ...] = x[offset + i0 * s0 + i1 * s1 + ...] for a plain x
// (strides in elements, may be 0 or negative), materialized. The importer builds Transpose,
// Slice (with steps), Split, Tile, DepthToSpace and SpaceToDepth of run-time data from it.
// Every element it may read is checked against x's extent at compile time.
#include "kfuse/graph/ops/broadcast.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct strided_view_rule : op_rule {
  static constexpr op_kind kind = op_kind::strided_view;
  using attributes = strided_view_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const strided_view_params& attr = n.attr<strided_view_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    if (x.layout == tensor_layout::nhwc && x.shape.size() == 4)
      cx.fail_node(n, "input '" + x.name + "' is nhwc; a strided view reads plain (or nchw) data");
    const std::vector<index_t>& shape = attr.shape;
    if (shape.empty() || shape.size() > std::size_t(broadcast_shape::max_rank) ||
        attr.strides.size() != shape.size())
      cx.fail_node(n, "the view needs 1 to 6 extents and one stride per extent");
    index_t lo = attr.offset, hi = attr.offset;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 1) cx.fail_node(n, "non-positive extent in " + cx.shape_str(shape));
      index_t span = 0;
      if (__builtin_mul_overflow(attr.strides[d], shape[d] - 1, &span))
        cx.fail_node(n, "stride " + std::to_string(attr.strides[d]) + " overflows");
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= shape_numel(x.shape))
      cx.fail_node(n, "the view reads elements " + std::to_string(lo) + " to " +
                          std::to_string(hi) + " of input '" + x.name + "', which has " +
                          std::to_string(shape_numel(x.shape)));
    if (attr.as != tensor_layout::plain && (attr.as != tensor_layout::nchw || shape.size() != 4))
      cx.fail_node(n, "a view's output is plain, or nchw when 4-D");
    cx.set_out(n, shape, x.type, attr.as);
    cx.pass_quant(n, x);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& st, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const strided_view_params& attr = n.attr<strided_view_params>();
    const plan_tensor& x = cx.T(st.x);
    auto p = std::make_shared<broadcast_shape>();
    p->rank = int(attr.shape.size());
    for (int d = 0; d < p->rank; ++d) {
      p->dims[d] = attr.shape[std::size_t(d)];
      p->in_strides[d] = attr.strides[std::size_t(d)];
    }
    p->in_offset = attr.offset;
    strided_copy_command(cx, st, std::move(p), "strided_view", info, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
