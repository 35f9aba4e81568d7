#pragma once
// arg_reduce as a graph op: the int64 index of the max / min along one logical axis (ArgMax /
// ArgMin), keepdims or not. Inputs plain or nchw (the same memory order as the logical one).
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/arg_reduce.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct arg_reduce_rule : op_rule {
  static constexpr op_kind kind = op_kind::arg_reduce;
  using attributes = arg_reduce_params;

  static arg_reduce_kernel::problem problem_of(const plan_tensor& x, const node_desc& n) {
    const arg_reduce_params& attr = n.attr<arg_reduce_params>();
    arg_reduce_kernel::problem pr;
    pr.rank = int(x.shape.size());
    for (int i = 0; i < pr.rank && i < 8; ++i) pr.shape[i] = x.shape[std::size_t(i)];
    pr.axis = attr.axis;
    pr.kind = attr.kind;
    pr.last = attr.select_last;
    return pr;
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const arg_reduce_params& attr = n.attr<arg_reduce_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    if (x.layout == tensor_layout::nhwc && x.shape.size() == 4)
      cx.fail_node(n, "input '" + x.name + "' is nhwc: convert it to nchw first");
    const kernel_status st = arg_reduce_kernel::can_implement(problem_of(x, n));
    if (!st.ok()) cx.fail_node(n, st.reason);
    const int r = int(x.shape.size());
    const int axis = attr.axis < 0 ? attr.axis + r : attr.axis;
    std::vector<index_t> shape;
    for (int d = 0; d < r; ++d)
      if (d != axis)
        shape.push_back(x.shape[std::size_t(d)]);
      else if (attr.keepdims)
        shape.push_back(1);
    if (shape.empty()) shape.push_back(1);
    cx.set_out(n, shape, dtype::i64, tensor_layout::plain);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const arg_reduce_params& attr = n.attr<arg_reduce_params>();
    using K = arg_reduce_kernel;
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
    info.flops = double(shape_numel(x.shape));
    info.kernel = std::string(attr.kind == arg_kind::max ? "argmax" : "argmin") + " axis " +
                  std::to_string(attr.axis);
    with_elem<f32, bf16>(x.type, [&]<class Elem> {
      add_kernel_command<K, storage_t<Elem>, std::int64_t>(cx, p, pr, c, info, cmds);
    });
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
