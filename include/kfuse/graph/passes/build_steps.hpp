#pragma once
// Inference and step building: each node, in topological order, is validated and gets its
// output's shape, type and layout from its op's rule (infer), then becomes one step (build_step).
// A node must hold its op's attributes (graph_ops::<op>_rule::attributes): the builder calls
// make them; a node_desc made by hand may not.
#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/registry.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

inline void infer_nodes(compile_context& cx) {
  for (int ni : cx.order) {
    const node_desc& n = cx.g.nodes()[std::size_t(ni)];
    graph_ops::with_rule(n.op, [&](auto rule) {
      using R = decltype(rule);
      if (!n.attributes.holds<typename R::attributes>())
        cx.fail_node(n, "its attributes are not its op's (a node_desc made or edited by hand?)");
      R::infer(cx, n);
    });
  }
}

inline void build_steps(compile_context& cx) {
  for (int ni : cx.order) {
    const node_desc& n = cx.g.nodes()[std::size_t(ni)];
    step s;
    s.node = ni;
    s.op = s.source = n.op;
    s.out = n.output.index;
    s.x = n.inputs.empty() ? -1 : n.inputs[0].index;
    graph_ops::with_rule(n.op, [&](auto rule) { decltype(rule)::build_step(cx, n, s); });
    cx.steps.push_back(std::move(s));
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
