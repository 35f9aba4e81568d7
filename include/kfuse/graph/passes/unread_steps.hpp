#pragma once
// Unread steps: a step whose output no live step reads and the caller does not bind computes
// nothing anyone sees (an importer's whole channel shuffle when only runs of it are read, a
// user's leftover node), so it does not run. Ops with effects beyond their output stay: custom
// (the caller's callable) and cached_attention (it writes the caller's K / V caches).
#include <string>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/passes/step_uses.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

inline void drop_unread_steps(compile_context& cx) {
  step_uses u(cx);
  int dropped = 0;
  // Steps are in topological order: readers come after their producers, so one backward walk
  // drops whole unread chains.
  for (std::size_t i = cx.steps.size(); i-- > 0;) {
    step& s = cx.steps[i];
    if (!s.alive || u.uses[std::size_t(s.out)] > 0 || s.op == op_kind::custom ||
        s.op == op_kind::cached_attention)
      continue;
    s.alive = false;
    ++dropped;
    if (s.x >= 0) --u.uses[std::size_t(s.x)];
    for (std::int32_t o : s.others) --u.uses[std::size_t(o)];
    if (s.gate >= 0) --u.uses[std::size_t(s.gate)];
    for (const op_stage& st : s.chain)
      if (st.operand >= 0) --u.uses[std::size_t(st.operand)];
  }
  if (dropped > 0)
    cx.d->report.notes.push_back(std::to_string(dropped) +
                                 " node(s) whose outputs nothing reads do not run");
}

}  // namespace detail

KFUSE_END_NAMESPACE
