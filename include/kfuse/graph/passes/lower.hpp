#pragma once
// Lowering: each live step becomes the replay commands of its op's rule (the kernels are
// instantiated here, for arch A and backend B), with its step_info for reports and profiles.
#include <algorithm>
#include <vector>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/registry.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

template <class A, class B>
void lower_steps(compile_context& cx) {
  for (const step& s : cx.steps) {
    if (!s.alive) continue;
    const node_desc& n = cx.node_of(s);
    step_info info;
    info.name = n.name;
    info.op = s.source;
    info.fused = s.fused;
    const plan_tensor& out = cx.T(s.out);
    info.out_shape = out.shape;
    info.out_type = out.type;
    info.out_layout = out.layout;
    std::vector<plan_command> cmds;
    graph_ops::with_rule(
        s.op, [&](auto rule) { decltype(rule)::template lower<A, B>(cx, s, n, info, cmds); });
    if (info.kernel.empty()) info.kernel = std::string(op_name(s.op));
    int t = 1;
    for (const plan_command& c : cmds) t = std::max<int>(t, c.threads);
    info.threads = t;
    cx.d->steps.push_back(std::move(info));
    cx.d->commands.push_back(std::move(cmds));
  }
  cx.d->report.nodes_after = int(cx.d->steps.size());
}

}  // namespace detail

KFUSE_END_NAMESPACE
