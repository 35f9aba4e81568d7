#pragma once
// softmax over any axis of a tensor in any layout, as a graph op.
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/softmax.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct softmax_params {
  index_t shape[8] = {};  // memory order (nhwc: N, H, W, C)
  int rank = 0;
  int axis = -1;  // memory axis
};

template <class A, class B, class T>
void softmax_cmd(const command& c) {
  const auto& p = *static_cast<const softmax_params*>(c.params);
  softmax<A, B>(static_cast<const T*>(c.in[0]), static_cast<T*>(c.out),
                std::span<const index_t>(p.shape, std::size_t(p.rank)), p.axis, softmax_options{},
                run_options{c.threads});
}

struct softmax_rule : op_rule {
  static constexpr op_kind kind = op_kind::softmax;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    if (x.type == dtype::f16) cx.fail_node(n, "f16 softmax has no kernel: cast to f32");
    const int r = int(x.shape.size());
    if (r == 0 || r > 8)
      cx.fail_node(n, "input '" + x.name + "' has rank " + std::to_string(r) + " (1 to 8)");
    if (n.axis < -r || n.axis >= r)
      cx.fail_node(
          n, "axis " + std::to_string(n.axis) + " is out of range for rank " + std::to_string(r));
    cx.set_out(n, x.shape, x.type, x.layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(s.x);
    auto p = std::make_shared<softmax_params>();
    const auto ms = cx.memory_shape(x);
    const int r = int(ms.size());
    p->rank = r;
    for (int i = 0; i < r; ++i) p->shape[i] = ms[std::size_t(i)];
    p->axis = cx.memory_axis(x.layout, n.axis < 0 ? n.axis + r : n.axis, r);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    c.fn = x.type == dtype::bf16 ? &softmax_cmd<A, B, bf16_t> : &softmax_cmd<A, B, float>;
    info.bytes = 2.0 * double(x.bytes);
    info.flops = 5.0 * double(shape_numel(x.shape));
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.params = cx.own(p);
    info.kernel = "softmax axis " + std::to_string(n.axis);
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
