#pragma once
// Quantize absorption. A tensor produced in f32 whose one reader quantizes it is written as int8
// by its producer (its chain, then quantize<E> in the epilogue), so the f32 tensor and the
// separate quantize pass disappear:
//  (a) the input of a step that reads u8 (op_rule::reads_quantized: an int8 linear / dense conv
//      would convert f32 -> u8 with the input's quant params): the producer writes u8 with
//      those params;
//  (b) an explicit quantize node (cast f32 -> u8 / i8): the producer writes its output.
// Not when the f32 tensor is a graph output or has another reader, and only into producers
// whose kernel exists with that output type on this target (op_rule::writes_quantized).
#include <string>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/registry.hpp"
#include "kfuse/graph/passes/step_uses.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The live step that can write tensor x quantized to `to` in its epilogue, or -1.
inline int quantize_producer(const compile_context& cx, std::int32_t x, dtype to,
                             const step_uses& u) {
  const int pi = u.single_use_producer(cx, x);
  if (pi < 0 || cx.T(x).type != dtype::f32) return -1;
  const step& p = cx.steps[std::size_t(pi)];
  bool ok = false;
  graph_ops::with_rule(p.op, [&](auto rule) { ok = decltype(rule)::writes_quantized(cx, p, to); });
  return ok ? pi : -1;
}

inline void absorb_quantize(compile_context& cx) {
  step_uses u(cx);
  for (step& c : cx.steps) {
    if (!c.alive || c.x < 0) continue;
    const node_desc& cn = cx.node_of(c);
    const plan_tensor& x = cx.T(c.x);
    if (x.type != dtype::f32) continue;
    const cast_params* cast = c.op == op_kind::cast ? &cn.attr<cast_params>() : nullptr;
    const bool explicit_q = cast && (cast->to == dtype::u8 || cast->to == dtype::i8);
    bool reads_u8 = false;
    if (!explicit_q && x.has_quant && graph_ops::valid_u8_quant(x.quant))
      graph_ops::with_rule(c.op,
                           [&](auto rule) { reads_u8 = decltype(rule)::reads_quantized(cx, c); });
    if (!explicit_q && !reads_u8) continue;
    const dtype to = explicit_q ? cast->to : dtype::u8;
    const int pi = quantize_producer(cx, c.x, to, u);
    if (pi < 0) continue;
    step& p = cx.steps[std::size_t(pi)];
    const std::string into = cx.node_of(p).name + " (" + std::string(op_name(p.op)) + ")";
    if (explicit_q) {
      p.out_quant = cast->quant;
      p.out = c.out;
      p.fused.push_back(cn.name);
      c.alive = false;
      cx.d->report.fused.push_back("fused " + cn.name + " (quantize " +
                                   std::string(dtype_name(to)) + ") into " + into);
    } else {
      plan_tensor& t = cx.T(c.x);
      p.out_quant = t.quant;
      t.type = to;
      t.bytes = std::size_t(shape_numel(t.shape)) * dtype_size(to);
      cx.d->report.fused.push_back("fused quantize of " + cn.name + "'s input (u8) into " + into);
    }
    u.count(cx);
  }
}

/// bf16 absorption. In a bf16 plan a tensor whose one reader converts it to bf16 (a bf16 conv
/// or linear) is written as bf16 by its producer when that producer's kernel can (a bf16 conv):
/// the f32 tensor, half of the producer's writes and the consumer's conversion pass disappear.
/// Run after the channel gates are fused (a gated conv reads f32).
inline void absorb_bf16(compile_context& cx) {
  step_uses u(cx);
  for (step& c : cx.steps) {
    if (!c.alive || c.x < 0 || cx.T(c.x).type != dtype::f32) continue;
    bool reads = false;
    graph_ops::with_rule(c.op, [&](auto rule) { reads = decltype(rule)::reads_bf16(cx, c); });
    if (!reads) continue;
    const int pi = quantize_producer(cx, c.x, dtype::bf16, u);
    if (pi < 0) continue;
    plan_tensor& t = cx.T(c.x);
    t.type = dtype::bf16;
    t.bytes = std::size_t(shape_numel(t.shape)) * dtype_size(dtype::bf16);
    cx.d->report.fused.push_back("bf16 output of " + cx.node_of(cx.steps[std::size_t(pi)]).name +
                                 " (read as bf16 by " + cx.node_of(c).name + ")");
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
