#pragma once
// Squeeze-excite fusion: an eltwise step that only multiplies its input by a per-(sample,
// channel) gate (a per-channel operand, or the broadcast of an [N, C, 1, 1] tensor, as the
// importer writes it at batch > 1) and whose only reader is a pointwise NHWC conv loses its
// pass over the feature map (conv2d::run_gated):
//  * f32 / bf16: the conv scales a copy of its weights by the gate per sample (C x K multiplies
//    against the map's H x W x C: where K <= H x W; bf16: the scaled weights are rounded once,
//    where the multiply's output was), or else the input rows as it loads them, a block of rows
//    at a time in cache (conv2d::gates_rows).
//  * int8: the conv reads the f32 input and multiplies and quantizes it as it loads it (with
//    the quant params of the multiply's output, which quantize absorption had it write as u8).
// The broadcast, when there was one, disappears with it.
#include <string>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/conv2d.hpp"
#include "kfuse/graph/passes/step_uses.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The plan tensor holding the gate of multiply step e ([C] shared by the samples, or [N, C]),
/// the broadcast step to drop with it (-1: none), or -1 when e's operand is no channel gate.
inline std::int32_t channel_gate_of(const compile_context& cx, const step& e, const step_uses& u,
                                    const conv_shape& cs, int& broadcast_step) {
  broadcast_step = -1;
  const op_stage& m = e.chain[0];
  const plan_tensor& g = cx.T(m.operand);
  if (g.type != dtype::f32) return -1;
  if (m.per_channel) return shape_numel(g.shape) == cs.c ? m.operand : -1;
  const int b = u.single_use_producer(cx, m.operand);
  if (b < 0 || cx.steps[std::size_t(b)].op != op_kind::broadcast) return -1;
  const std::int32_t src = cx.steps[std::size_t(b)].x;
  const plan_tensor& sg = cx.T(src);
  if (sg.type != dtype::f32 || sg.shape != std::vector<index_t>{cs.n, cs.c, 1, 1}) return -1;
  broadcast_step = b;
  return src;
}

inline void fuse_channel_gates(compile_context& cx) {
  step_uses u(cx);
  for (step& e : cx.steps) {
    if (!e.alive || e.op != op_kind::eltwise || e.chain.size() != 1 ||
        e.chain[0].kind != stage_kind::mul || e.chain[0].operand < 0)
      continue;
    if (u.single_use_producer(cx, e.out) < 0 || cx.T(e.x).type != dtype::f32) continue;
    step* c = nullptr;
    for (step& s : cx.steps)
      if (s.alive && s.x == e.out) c = &s;
    if (c == nullptr || c->op != op_kind::conv2d || c->gate >= 0) continue;
    const node_desc& cn = cx.node_of(*c);
    const conv_shape cs = graph_ops::conv2d_rule::shape_of(cx, *c);
    // The gate takes the command's last input slot: the chain (with a bias a batch norm folds
    // in at lowering) keeps the others.
    const precision pr = cx.precision_of(cn);
    const bool int8 = graph_ops::conv2d_rule::reads_quantized(cx, *c);
    const int operands = operand_count(c->chain) + (c->folded_bn >= 0 && !c->bn_after_bias ? 1 : 0);
    const dtype gated = cx.T(e.out).type, out = cx.T(c->out).type;
    if (!cs.is_pointwise() || cx.T(e.out).layout != tensor_layout::nhwc ||
        operands > graph_ops::chain_max_operands - 1)
      continue;
    if (int8 ? !(gated == dtype::u8 || (gated == dtype::f32 && cx.T(e.out).has_quant)) ||
                   (out != dtype::f32 && out != dtype::u8)
             : (pr != precision::f32 && pr != precision::bf16) || gated != dtype::f32 ||
                   out != dtype::f32)
      continue;
    int b = -1;
    const std::int32_t gate = channel_gate_of(cx, e, u, cs, b);
    if (gate < 0) continue;
    if (!cx.conv_gates) {
      cx.note_once(
          "kfuse::runtime: built without conv2d_gated (CMake KFUSE_RUNTIME_OPS): channel gates "
          "run as their own step before the dense conv");
      continue;
    }
    c->x = e.x;
    c->gate = gate;
    if (int8) c->gated_in = e.out;
    e.alive = false;
    if (b >= 0) cx.steps[std::size_t(b)].alive = false;
    const std::string& ename = cx.node_of(e).name;
    c->fused.push_back(ename);
    cx.d->report.fused.push_back("fused " + ename + " (channel gate) into " + cn.name +
                                 (int8 ? " (conv2d): it gates and quantizes its f32 input as "
                                         "it loads it"
                                  : gates_rows(cs, false)
                                      ? " (conv2d): it gates its input rows as it loads them"
                                      : " (conv2d): its weights are scaled per sample"));
    u.count(cx);
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
