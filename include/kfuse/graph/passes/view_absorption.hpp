#pragma once
// View absorption: a strided_view (a Transpose, Slice or Gemm transA of run-time data, which
// would copy its input) whose only reader is a matmul operand is read by the matmul in place:
// batched_gemm takes any non-negative strides, so the view's strides and offset become the
// operand's, and the copy disappears. The matmul step keeps the view node (step::views) for its
// logical shape, strides and offset.
#include <algorithm>
#include <string>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/passes/step_uses.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

inline void absorb_views(compile_context& cx) {
  step_uses u(cx);
  for (step& m : cx.steps) {
    if (!m.alive || m.op != op_kind::matmul) continue;
    for (int slot = 0; slot < 2; ++slot) {
      std::int32_t& operand = slot == 0 ? m.x : m.others[0];
      const int vi = u.single_use_producer(cx, operand);
      if (vi < 0) continue;
      step& v = cx.steps[std::size_t(vi)];
      const node_desc& vn = cx.node_of(v);
      // A negative stride (a flip) would need a negative batched_gemm stride; a chain would
      // need the view's values computed; the strides are over a plain (or nchw) input's order.
      if (v.op != op_kind::strided_view || !v.chain.empty() ||
          cx.T(v.x).layout == tensor_layout::nhwc ||
          std::ranges::any_of(vn.attr<strided_view_params>().strides,
                              [](index_t s) { return s < 0; }))
        continue;
      operand = v.x;
      m.views[std::size_t(slot)] = v.node;
      v.alive = false;
      m.fused.push_back(vn.name);
      const node_desc& mn = cx.node_of(m);
      cx.d->report.fused.push_back("fused " + vn.name + " (strided_view) into " + mn.name +
                                   " (matmul): operand " + (slot == 0 ? "a" : "b") +
                                   " read through its strides, no copy");
      u.count(cx);
    }
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
