#pragma once
// Entry layout absorption: a convert_layout nchw -> nhwc whose only reader is an f32 conv of at
// most 4 input channels (a CNN's stem behind the conversion that the importer or the layout
// choice put at the network's entry) is read by the conv in NCHW: few_channel_conv2d reads NCHW
// and writes NHWC, so the conversion pass over the input disappears (MobileNetV3-small at batch
// 8: 0.4 ms of 13). In bf16 / int8 plans too, for stems of at most 32 output channels.
#include <string>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/conv2d.hpp"
#include "kfuse/graph/passes/step_uses.hpp"
#include "kfuse/kernels/conv/few_channel_conv2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

inline void absorb_entry_layout(compile_context& cx) {
  step_uses u(cx);
  for (step& m : cx.steps) {
    if (!m.alive || m.op != op_kind::conv2d || m.gate >= 0 || cx.T(m.out).type != dtype::f32)
      continue;
    const int vi = u.single_use_producer(cx, m.x);
    if (vi < 0) continue;
    step& v = cx.steps[std::size_t(vi)];
    if (v.op != op_kind::convert_layout || !v.chain.empty()) continue;
    const plan_tensor &in = cx.T(v.x), &out = cx.T(v.out);
    const conv_shape cs = graph_ops::conv2d_rule::shape_of(cx, m);
    const bool f32 = cx.precision_of(cx.node_of(m)) == precision::f32;
    // A bf16 / int8 stem of at most 32 output channels runs in f32 too: its low-precision
    // GEMM (16 or 32 columns, 27 taps) ran at ~38 GFLOP/s after a conversion pass of its own
    // (MobileNetV3-small at batch 8: 2.3 + 0.3 ms against ~1.1 ms here). ResNet's 64-channel
    // 7x7 stem stays bf16 / int8 (1.5 ms there, 2.4 ms in f32).
    if (in.layout != tensor_layout::nchw || out.layout != tensor_layout::nhwc ||
        in.type != dtype::f32 || !few_channel_shape(cs) || (!f32 && cs.k > 32))
      continue;
    if (!cx.few_channel_convs) {
      cx.note_once(
          "kfuse::runtime: built without conv2d_few_channel (CMake KFUSE_RUNTIME_OPS): a stem "
          "of at most 4 input channels runs on the dense conv after a layout conversion");
      continue;
    }
    if (!f32)
      cx.note_once(
          "low precision: a stem conv of at most 4 input and 32 output channels runs in "
          "f32 (few_channel_conv2d, reading the NCHW input): faster than converting its "
          "input for the low-precision conv");
    m.x = v.x;
    v.alive = false;
    const node_desc& vn = cx.node_of(v);
    m.fused.push_back(vn.name);
    cx.d->report.fused.push_back("fused " + vn.name + " (convert_layout) into " +
                                 cx.node_of(m).name +
                                 " (conv2d): reads its NCHW input, writes NHWC");
    u.count(cx);
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
