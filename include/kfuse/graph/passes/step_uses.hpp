#pragma once
// step_uses: for each plan tensor, how many live steps read it (as data input, other input,
// chain operand or gate) plus one if it is a graph output, and which live step writes it. The
// fusion passes recount after every rewrite.
#include <algorithm>
#include <vector>

#include "kfuse/graph/compiler/context.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

struct step_uses {
  std::vector<int> uses;     // per tensor
  std::vector<int> step_of;  // per tensor: the live step producing it (-1: none)

  explicit step_uses(const compile_context& cx) { count(cx); }
  void count(const compile_context& cx) {
    // (A pass may have added tensors since the last count.)
    uses.assign(cx.d->tensors.size(), 0);
    step_of.assign(cx.d->tensors.size(), -1);
    for (std::size_t i = 0; i < cx.steps.size(); ++i) {
      const step& s = cx.steps[i];
      if (!s.alive) continue;
      step_of[std::size_t(s.out)] = int(i);
      if (s.x >= 0) ++uses[std::size_t(s.x)];
      for (std::int32_t o : s.others) ++uses[std::size_t(o)];
      if (s.gate >= 0) ++uses[std::size_t(s.gate)];
      for (const op_stage& st : s.chain)
        if (st.operand >= 0) ++uses[std::size_t(st.operand)];
    }
    for (std::int32_t o : cx.d->outputs) ++uses[std::size_t(o)];
  }
  /// The live step whose output is tensor x and which is its only reader's producer, or -1:
  /// x is read once and is not a graph output.
  int single_use_producer(const compile_context& cx, std::int32_t x) const {
    if (x < 0 || step_of[std::size_t(x)] < 0) return -1;
    const int pi = step_of[std::size_t(x)];
    const step& p = cx.steps[std::size_t(pi)];
    if (!p.alive || p.out != x || uses[std::size_t(x)] != 1 || cx.is_graph_output(x)) return -1;
    return pi;
  }
};

}  // namespace detail

KFUSE_END_NAMESPACE
