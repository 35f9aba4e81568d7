#pragma once
// Fusion: an eltwise step (a chain of stages, or a batch norm) whose input comes from a producer
// that takes a stage chain in its epilogue (op_rule::absorbs_chain), and that is that input's
// only reader, is appended to the producer's chain and disappears with its intermediate
// tensor. A batch norm right after a conv (nothing but its bias in between) is folded into the
// conv's weights instead (op_rule::folds_batch_norm; the weights are folded at lowering).
#include <string>
#include <utility>
#include <vector>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/registry.hpp"
#include "kfuse/graph/passes/step_uses.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Whether eltwise step e can be absorbed into the producer of tensor x.
inline bool fusable_into(const compile_context& cx, std::int32_t x, const step& e,
                         const step_uses& u) {
  const int pi = u.single_use_producer(cx, x);
  if (pi < 0) return false;
  const step& p = cx.steps[std::size_t(pi)];
  if (!graph_ops::absorbs_chain(p.op)) return false;
  if (cx.T(x).type != dtype::f32 || cx.T(e.out).type != dtype::f32) return false;
  if (p.chain.size() + e.chain.size() > std::size_t(graph_ops::chain_max_stages)) return false;
  if (operand_count(p.chain) + operand_count(e.chain) > graph_ops::chain_operand_slots(p.op))
    return false;
  // Operands must exist when the producer runs, and must not be x itself.
  for (const op_stage& st : e.chain) {
    if (st.operand < 0) continue;
    if (st.operand == x) return false;
    const int q = u.step_of[std::size_t(st.operand)];
    if (q >= 0 && q >= pi) return false;
  }
  return true;
}

/// A batch norm step e folds into producer p: p folds batch norms and has nothing but a
/// constant bias in its chain (that bias is folded through the batch norm too).
inline bool folds_into(const compile_context& cx, const step& p, const step& e) {
  if (e.source != op_kind::batch_norm || !graph_ops::folds_batch_norm(p.op) || p.folded_bn >= 0)
    return false;
  if (p.chain.empty()) return true;
  const op_stage& b = p.chain[0];
  return p.chain.size() == 1 && b.kind == stage_kind::bias && b.operand >= 0 &&
         cx.T(b.operand).where == plan_tensor::storage::constant && cx.T(b.operand).data != nullptr;
}

inline void fuse_chains(compile_context& cx) {
  step_uses u(cx);
  for (step& e : cx.steps) {
    if (!e.alive || e.op != op_kind::eltwise) continue;
    // A residual add(skip, y) where y comes from a fusable producer: add(y, skip) instead.
    if (e.chain.size() == 1 && e.chain[0].kind == stage_kind::add && !e.chain[0].per_channel) {
      step swapped = e;
      std::swap(swapped.x, swapped.chain[0].operand);
      const std::int32_t a = e.x, b = swapped.x;
      if (!fusable_into(cx, a, e, u) && fusable_into(cx, b, swapped, u) &&
          cx.T(a).type == dtype::f32 && cx.T(a).shape == cx.T(b).shape &&
          cx.T(a).layout == cx.T(b).layout)
        e = std::move(swapped);
    }
    if (!fusable_into(cx, e.x, e, u)) continue;
    step& p = cx.steps[std::size_t(u.step_of[std::size_t(e.x)])];
    const bool fold = folds_into(cx, p, e);
    if (fold) {
      p.folded_bn = e.node;
      p.bn_after_bias = !p.chain.empty();
      p.chain.insert(p.chain.end(), e.chain.begin() + 2, e.chain.end());  // after scale, shift
    } else {
      p.chain.insert(p.chain.end(), e.chain.begin(), e.chain.end());
    }
    const std::string& ename = cx.node_of(e).name;
    p.fused.push_back(ename);
    p.fused.insert(p.fused.end(), e.fused.begin(), e.fused.end());
    cx.d->report.fused.push_back(std::string(fold ? "folded " : "fused ") + ename + " (" +
                                 std::string(op_name(e.source)) + ") into " + cx.node_of(p).name +
                                 " (" + std::string(op_name(p.op)) + ")");
    p.out = e.out;
    e.alive = false;
    u.count(cx);
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
