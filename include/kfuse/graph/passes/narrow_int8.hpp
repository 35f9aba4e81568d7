#pragma once
// Narrow int8 convs run in f32. In an int8 plan, a dense conv with at most 16 output channels
// fills at most a quarter of the int8 micro-kernel's register tile on AVX-512 (4 vectors of 16
// columns; half on AVX2), and its 4-deep k groups pad a 16-channel input: the int8 conv does
// not pay for quantizing its input there (MobileNetV3-small's gated 16 -> 16 conv at 56x56:
// 45.6 us in int8 against 19.0 us in f32). Such a node, when it inherits the plan's precision,
// runs in f32 and the report says so; a node that asks for int8 itself keeps it. Runs before
// quantize absorption and the channel gates, which follow each node's precision.
#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/conv2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

inline constexpr index_t narrow_int8_channels = 16;

inline void keep_narrow_int8_in_f32(compile_context& cx) {
  if (!cx.int8_gemm || cx.opt.prec != precision::int8) return;
  for (const step& s : cx.steps) {
    if (!s.alive || s.op != op_kind::conv2d) continue;
    const node_desc& n = cx.node_of(s);
    if (declared_precision(n) != precision::inherit) continue;
    const conv_shape cs = graph_ops::conv2d_rule::shape_of(cx, s);
    if (cs.is_depthwise() || cs.groups != 1 || cs.k > narrow_int8_channels) continue;
    cx.kept_f32.resize(cx.g.nodes().size(), 0);
    cx.kept_f32[std::size_t(s.node)] = 1;
    cx.note_once("int8: convs with at most " + std::to_string(narrow_int8_channels) +
                 " output channels run in f32 (a narrow int8 GEMM fills a fraction of its "
                 "register tile: slower than f32 after quantizing its input; conv2d_params::prec "
                 "= int8 keeps a node int8)");
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
