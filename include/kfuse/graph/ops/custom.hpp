#pragma once
// custom: a user's callable as a graph node, with its declared output and cost
// (make_custom_op in graph/graph.hpp).
#include "kfuse/graph/ops/op_rule.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct custom_params {
  custom_op op;
  int n_inputs = 0;
};

inline void custom_cmd(const command& c) {
  const auto& p = *static_cast<const custom_params*>(c.params);
  p.op.run(custom_call{c.in, p.n_inputs, c.out, p.op.state.get()});
}

struct custom_rule : op_rule {
  static constexpr op_kind kind = op_kind::custom;
  using attributes = custom_op;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const custom_op& attr = n.attr<custom_op>();
    if (n.inputs.size() > 4) cx.fail_node(n, "custom nodes take at most 4 inputs");
    if (!attr.run) cx.fail_node(n, "no callable (make_custom_op)");
    for (index_t e : attr.out_shape)
      if (e <= 0)
        cx.fail_node(n, "declared output shape " + cx.shape_str(attr.out_shape) +
                            " has a non-positive extent");
    cx.set_out(n, attr.out_shape, attr.out_type, attr.out_layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const custom_op& attr = n.attr<custom_op>();
    auto p = std::make_shared<custom_params>();
    p->op = attr;
    p->n_inputs = int(n.inputs.size());
    detail::plan_command c;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) c.in[i] = n.inputs[i].index;
    c.out = s.out;
    c.fn = &custom_cmd;
    c.params = cx.own(p);
    cmds.push_back(c);
    info.flops = attr.flops;
    info.kernel = "custom";
    for (tensor_id id : n.inputs) info.bytes += double(cx.T(id).bytes);
    info.bytes += double(cx.T(s.out).bytes);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
