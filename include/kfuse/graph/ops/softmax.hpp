#pragma once
// softmax (or log_softmax) over any axis of a tensor in any layout, as a graph op.
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/softmax.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct softmax_rule : op_rule {
  static constexpr op_kind kind = op_kind::softmax;
  using attributes = softmax_params;
  static constexpr bool by_precision = true;  // bf16 tensors have a kernel of their own

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const softmax_params& attr = n.attr<softmax_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    if (x.type == dtype::f16) cx.fail_node(n, "f16 softmax has no kernel: cast to f32");
    const int r = int(x.shape.size());
    if (r == 0 || r > 8)
      cx.fail_node(n, "input '" + x.name + "' has rank " + std::to_string(r) + " (1 to 8)");
    if (attr.axis < -r || attr.axis >= r)
      cx.fail_node(n, "axis " + std::to_string(attr.axis) + " is out of range for rank " +
                          std::to_string(r));
    cx.set_out(n, x.shape, x.type, x.layout);
  }

  template <class A, class B, class Set = detail::all_ops>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const softmax_params& attr = n.attr<softmax_params>();
    using K = softmax_kernel<A, B>;
    const plan_tensor& x = cx.T(s.x);
    typename K::problem pr;
    const auto ms = cx.memory_shape(x);
    pr.rank = int(ms.size());
    for (int i = 0; i < pr.rank; ++i) pr.shape[i] = ms[std::size_t(i)];
    pr.axis = cx.memory_axis(x.layout, attr.axis < 0 ? attr.axis + pr.rank : attr.axis, pr.rank);
    pr.options.log = attr.log;
    auto p = std::make_shared<kernel_params<K>>();
    p->packed = K::initialize(pr);
    p->in = p->out = shape_numel(x.shape);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    info.bytes = 2.0 * double(x.bytes);
    info.flops = 5.0 * double(shape_numel(x.shape));
    info.kernel =
        std::string(attr.log ? "log_softmax" : "softmax") + " axis " + std::to_string(attr.axis);
    if constexpr (bf16_tensors<Set>()) {
      with_elem<f32, bf16>(x.type, [&]<class Elem> {
        using T = storage_t<Elem>;
        add_kernel_command<K, T, T>(cx, p, pr, c, info, cmds);
      });
    } else {
      if (x.type == dtype::bf16) fail_precision<Set>(cx, n, precision::bf16);
      add_kernel_command<K, float, float>(cx, p, pr, c, info, cmds);
    }
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
