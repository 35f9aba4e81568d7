#pragma once
// max_pool_indices as a graph op: the int64 flat input index of each max-pooling window's
// maximum (ONNX MaxPool's Indices output), from an f32 / bf16 NCHW (or plain 4-D) image; the window
// is the node's pool2d_params (max; its ceil_mode sets the output size), the storage order
// n.column_major.
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/graph/ops/pool2d.hpp"
#include "kfuse/kernels/pool_indices.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct max_pool_indices_rule : op_rule {
  static constexpr op_kind kind = op_kind::max_pool_indices;
  using attributes = max_pool_indices_params;

  static max_pool_indices_kernel::problem problem_of(const plan_tensor& x, const node_desc& n) {
    const max_pool_indices_params& attr = n.attr<max_pool_indices_params>();
    return {pool2d_rule::shape_of(x, attr.pool), attr.column_major};
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    if (x.shape.size() != 4)  // plain 4-D is NCHW's memory order too
      cx.fail_node(n, "input '" + x.name + "' must be 4-D (N, C, H, W)");
    cx.need_float(n, x);
    if (x.layout == tensor_layout::nhwc)
      cx.fail_node(n, "input '" + x.name + "' is nhwc: convert it to nchw first");
    const max_pool_indices_kernel::problem pr = problem_of(x, n);
    const kernel_status st = max_pool_indices_kernel::can_implement(pr);
    if (!st.ok()) cx.fail_node(n, st.reason);
    cx.set_out(n, {pr.shape.n, pr.shape.c, pr.shape.out_h(), pr.shape.out_w()}, dtype::i64,
               tensor_layout::plain);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    using K = max_pool_indices_kernel;
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
    info.flops = double(p->out) * double(pr.shape.r * pr.shape.s);
    info.kernel = "max_pool_indices";
    with_elem<f32, bf16>(x.type, [&]<class Elem> {
      add_kernel_command<K, storage_t<Elem>, std::int64_t>(cx, p, pr, c, info, cmds);
    });
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
