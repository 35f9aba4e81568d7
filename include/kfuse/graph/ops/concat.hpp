#pragma once
// concat along one axis as a graph op: one slice copy per input into the output.
#include "kfuse/graph/ops/copy.hpp"
#include "kfuse/graph/ops/op_rule.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct concat_rule : op_rule {
  static constexpr op_kind kind = op_kind::concat;
  using attributes = concat_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const concat_params& attr = n.attr<concat_params>();
    if (n.inputs.empty()) cx.fail_node(n, "no inputs");
    const plan_tensor& x0 = cx.T(n.inputs[0]);
    const int r = int(x0.shape.size());
    const int axis = attr.axis < 0 ? attr.axis + r : attr.axis;
    if (axis < 0 || axis >= r)
      cx.fail_node(n, "axis " + std::to_string(attr.axis) + " is out of range for rank " +
                          std::to_string(r));
    auto shape = x0.shape;
    shape[std::size_t(axis)] = 0;
    for (tensor_id id : n.inputs) {
      const plan_tensor& x = cx.T(id);
      if (x.type != x0.type || x.layout != x0.layout || int(x.shape.size()) != r)
        cx.fail_node(n, "input '" + x.name + "' (" + describe(cx, x) + ") does not match input '" +
                            x0.name + "' (" + describe(cx, x0) + ")");
      for (int i = 0; i < r; ++i)
        if (i != axis && x.shape[std::size_t(i)] != x0.shape[std::size_t(i)])
          cx.fail_node(n, "input '" + x.name + "' has shape " + cx.shape_str(x.shape) +
                              ", input '" + x0.name + "' " + cx.shape_str(x0.shape) +
                              ": extents must match except along axis " + std::to_string(axis));
      shape[std::size_t(axis)] += x.shape[std::size_t(axis)];
    }
    cx.set_out(n, shape, x0.type, x0.layout);
  }
  static std::string describe(const detail::compile_context& cx, const plan_tensor& x) {
    return std::string(dtype_name(x.type)) + ", " + std::string(layout_name(x.layout)) + ", " +
           cx.shape_str(x.shape);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const concat_params& attr = n.attr<concat_params>();
    const plan_tensor& o = cx.T(s.out);
    const int r = int(o.shape.size());
    const int axis = cx.memory_axis(o.layout, attr.axis < 0 ? attr.axis + r : attr.axis, r);
    const auto oshape = cx.memory_shape(o);
    index_t outer = 1, inner_unit = index_t(dtype_size(o.type));
    for (int i = 0; i < axis; ++i) outer *= oshape[std::size_t(i)];
    for (int i = axis + 1; i < r; ++i) inner_unit *= oshape[std::size_t(i)];
    index_t offset = 0;
    for (tensor_id id : n.inputs) {
      const plan_tensor& x = cx.T(id);
      const auto xs = cx.memory_shape(x);
      auto p = std::make_shared<slice_params>();
      p->outer = outer;
      p->inner_in = xs[std::size_t(axis)] * inner_unit;
      p->inner_out = oshape[std::size_t(axis)] * inner_unit;
      p->offset = offset;
      offset += p->inner_in;
      detail::plan_command c;
      c.fn = &slice_copy_cmd;
      c.in[0] = id.index;
      c.out = s.out;
      c.params = cx.own(p);
      c.threads = cx.threads_for(2.0 * double(x.bytes), 0);
      cmds.push_back(c);
      info.bytes += 2.0 * double(x.bytes);
    }
    info.kernel = "concat (" + std::to_string(n.inputs.size()) + " slice copies)";
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
