#pragma once
// pad as a graph op: constant / reflect / edge padding (negative pads crop) on any logical axes
// of a tensor in any layout (an nchw / nhwc image stays one, its pads mapped to memory order).
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/pad.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct pad_rule : op_rule {
  static constexpr op_kind kind = op_kind::pad;
  using attributes = pad_params;

  static pad_kernel::problem problem_of(const plan_tensor& x, const node_desc& n) {
    const pad_params& attr = n.attr<pad_params>();
    pad_kernel::problem pr;
    const auto ms = detail::compile_context::memory_shape(x);
    pr.rank = int(ms.size());
    for (int i = 0; i < pr.rank; ++i) {
      const int m = detail::compile_context::memory_axis(x.layout, i, pr.rank);
      pr.shape[m] = ms[std::size_t(m)];
      pr.before[m] = attr.pads[std::size_t(i)];
      pr.after[m] = attr.pads[std::size_t(pr.rank + i)];
    }
    pr.mode = attr.mode;
    pr.value = attr.value;
    return pr;
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const pad_params& attr = n.attr<pad_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    const int r = int(x.shape.size());
    if (r == 0 || r > 8)
      cx.fail_node(n, "input '" + x.name + "' has rank " + std::to_string(r) + " (1 to 8)");
    if (attr.pads.size() != std::size_t(2 * r))
      cx.fail_node(n, std::to_string(attr.pads.size()) + " pads for rank " + std::to_string(r) +
                          " (2 per axis: every before, then every after)");
    if (attr.mode == pad_mode::constant && attr.value != attr.value)
      cx.fail_node(n, "the constant is NaN");
    const kernel_status st = pad_kernel::can_implement(problem_of(x, n));
    if (!st.ok()) cx.fail_node(n, st.reason);
    std::vector<index_t> shape(x.shape);
    for (int d = 0; d < r; ++d)
      shape[std::size_t(d)] += attr.pads[std::size_t(d)] + attr.pads[std::size_t(r + d)];
    cx.set_out(n, shape, x.type, x.layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    using K = pad_kernel;
    const plan_tensor& x = cx.T(s.x);
    const K::problem pr = problem_of(x, n);
    auto p = std::make_shared<kernel_params<K>>();
    p->packed = K::initialize(pr);
    p->in = shape_numel(x.shape);
    p->out = shape_numel(cx.T(s.out).shape);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    info.bytes = double(x.bytes) + double(cx.T(s.out).bytes);
    constexpr const char* modes[] = {"constant", "reflect", "edge"};
    info.kernel = std::string("pad ") + modes[int(n.attr<pad_params>().mode)];
    with_elem<f32, bf16, f16>(x.type, [&]<class Elem> {
      using T = storage_t<Elem>;
      add_kernel_command<K, T, T>(cx, p, pr, c, info, cmds);
    });
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
