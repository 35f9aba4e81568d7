#pragma once
// Lowering: each live step becomes the replay commands of its op's rule (the kernels are
// instantiated here, for arch A and backend B), with its step_info for reports and profiles.
// The op set (graph/compiler/op_set.hpp) says which rules' lowerings this instantiates: every
// one, the listed ones, or none (kfuse::runtime's, each defined in its own object).
#include <algorithm>
#include <vector>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/compiler/op_set.hpp"
#include "kfuse/graph/ops/registry.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// kfuse::runtime's lowering of one op: declared, not defined, here, so that no TU that compiles
/// plans through prebuilt_ops instantiates it; graph/compiler/prebuilt_lowering.hpp defines it
/// and src/runtime/ops/ instantiates it, one object per op family and arch.
template <class Rule, class A, class B>
void lower_prebuilt(compile_context& cx, const step& s, const node_desc& n, step_info& info,
                    std::vector<plan_command>& cmds);

template <class A, class B>
void lower_step(all_ops, compile_context& cx, const step& s, const node_desc& n, step_info& info,
                std::vector<plan_command>& cmds) {
  graph_ops::with_rule(
      s.op, [&](auto rule) { decltype(rule)::template lower<A, B>(cx, s, n, info, cmds); });
}

template <class A, class B>
void lower_step(prebuilt_ops, compile_context& cx, const step& s, const node_desc& n,
                step_info& info, std::vector<plan_command>& cmds) {
  graph_ops::with_rule(s.op, [&](auto rule) {
    using R = decltype(rule);
    constexpr runtime_family f = runtime_family_of(R::kind);
    if constexpr (runtime_builds(f))
      lower_prebuilt<R, A, B>(cx, s, n, info, cmds);
    else
      graph_ops::fail_runtime_family(cx, n, f);
  });
}

/// Rule R's lowering in the precisions of set Set (rules whose kernels differ by precision take
/// the set; the others have one lowering).
template <class R, class A, class B, class Set>
void lower_in_set(compile_context& cx, const step& s, const node_desc& n, step_info& info,
                  std::vector<plan_command>& cmds) {
  if constexpr (R::by_precision)
    R::template lower<A, B, Set>(cx, s, n, info, cmds);
  else
    R::template lower<A, B>(cx, s, n, info, cmds);
}

template <class A, class B, class Set>
requires is_selective_op_set<Set>
void lower_step(Set set, compile_context& cx, const step& s, const node_desc& n, step_info& info,
                std::vector<plan_command>& cmds) {
  bool lowered = false;
  graph_ops::with_rule(s.op, [&](auto rule) {
    using R = decltype(rule);
    if constexpr (Set::contains(R::kind)) {
      lower_in_set<R, A, B, Set>(cx, s, n, info, cmds);
      lowered = true;
    }
  });
  if (!lowered) {
    const std::string op(op_name(s.op));
    cx.fail_node(n, "runs op " + op + ", which this plan compiler was not built for (" +
                        op_set_call(set) + "): add op_kind::" + op +
                        " to the set, or link kfuse::runtime and call kfuse::compile from "
                        "kfuse/runtime.hpp (it runs every op)");
  }
}

template <class A, class B, class Ops>
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
    lower_step<A, B>(Ops{}, cx, s, n, info, cmds);
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
