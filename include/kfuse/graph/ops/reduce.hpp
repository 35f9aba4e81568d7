#pragma once
// reduce as a graph op: sum / mean / max / min / prod / L1 / L2 / sum of squares / log-sum-exp
// over any axes (logical axes; on nchw / nhwc tensors mapped to memory), keepdims or not.
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/reduce.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct reduce_rule : op_rule {
  static constexpr op_kind kind = op_kind::reduce;
  using attributes = reduce_params;

  /// The reduced logical axes of node n on x (checked; all of them when its axes are empty).
  static std::vector<bool> reduced_axes(detail::compile_context& cx, const node_desc& n,
                                        const plan_tensor& x) {
    const reduce_params& attr = n.attr<reduce_params>();
    const int r = int(x.shape.size());
    std::vector<bool> red(std::size_t(r), attr.axes.empty());
    for (int a : attr.axes) {
      if (a < -r || a >= r)
        cx.fail_node(
            n, "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
      const std::size_t d = std::size_t(a < 0 ? a + r : a);
      if (red[d]) cx.fail_node(n, "axis " + std::to_string(a) + " is listed twice");
      red[d] = true;
    }
    return red;
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const reduce_params& attr = n.attr<reduce_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    if (x.type == dtype::f16) cx.fail_node(n, "f16 reduce has no kernel: cast to f32");
    const int r = int(x.shape.size());
    if (r == 0 || r > 8)
      cx.fail_node(n, "input '" + x.name + "' has rank " + std::to_string(r) + " (1 to 8)");
    if (int(attr.kind) > int(reduce_kind::log_sum_exp))
      cx.fail_node(n, "unknown reduce_kind " + std::to_string(int(attr.kind)));
    const std::vector<bool> red = reduced_axes(cx, n, x);
    std::vector<index_t> shape;
    for (int d = 0; d < r; ++d)
      if (!red[std::size_t(d)])
        shape.push_back(x.shape[std::size_t(d)]);
      else if (attr.keepdims)
        shape.push_back(1);
    if (shape.empty()) shape.push_back(1);  // a reduction of everything is one value
    tensor_layout out_layout = attr.keepdims ? x.layout : tensor_layout::plain;
    if (x.layout == tensor_layout::nhwc && r == 4 && !attr.keepdims && !red[1] &&
        (!red[2] || !red[3]))
      // The kept values lie in N H W C order: as a plain (N, C, H, W) subset they would not.
      cx.fail_node(n, "input '" + x.name +
                          "' is nhwc and keeps C and H or W without keepdims: convert it to "
                          "nchw first, or keep the dimensions");
    cx.set_out(n, shape, x.type, out_layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const reduce_params& attr = n.attr<reduce_params>();
    using K = reduce_kernel<A, B>;
    const plan_tensor& x = cx.T(s.x);
    const std::vector<bool> red = reduced_axes(cx, n, x);
    typename K::problem pr;
    const auto ms = cx.memory_shape(x);
    pr.rank = int(ms.size());
    for (int i = 0; i < pr.rank; ++i) {
      pr.shape[i] = ms[std::size_t(i)];
      pr.axes[cx.memory_axis(x.layout, i, pr.rank)] = red[std::size_t(i)];
    }
    pr.kind = attr.kind;
    auto p = std::make_shared<kernel_params<K>>();
    p->packed = K::initialize(pr);
    p->in = shape_numel(x.shape);
    p->out = shape_numel(cx.T(s.out).shape);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    info.bytes = double(x.bytes) + double(cx.T(s.out).bytes);
    info.flops = double(shape_numel(x.shape));
    constexpr const char* names[] = {"sum", "mean", "max",        "min",        "prod",
                                     "l1",  "l2",   "sum_square", "log_sum_exp"};
    info.kernel = std::string("reduce ") + names[int(attr.kind)];
    with_elem<f32, bf16>(x.type, [&]<class Elem> {
      using T = storage_t<Elem>;
      add_kernel_command<K, T, T>(cx, p, pr, c, info, cmds);
    });
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
