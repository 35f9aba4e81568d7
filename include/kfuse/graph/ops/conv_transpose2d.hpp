#pragma once
// conv_transpose2d as a graph op: NHWC f32 images, weights [C, K / groups, R, S] packed once at
// compile time, optional bias [K]; the output size is the node's (ONNX's output_padding and
// output_shape decide it). Lowered onto kfuse::conv_transpose2d through the kernel contract's
// adapter (its workspace a slice of the arena).
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/conv/conv_transpose2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct conv_transpose2d_rule : op_rule {
  static constexpr op_kind kind = op_kind::conv_transpose2d;
  using attributes = conv_transpose2d_params;
  static bool optional_slot(std::size_t slot) { return slot == 2; }

  static conv_transpose_shape shape_of(const plan_tensor& x, const plan_tensor& w,
                                       const node_desc& n) {
    const conv_transpose2d_params& attr = n.attr<conv_transpose2d_params>();
    conv_transpose_shape s;
    s.n = x.shape[0];
    s.c = x.shape[1];
    s.h = x.shape[2];
    s.w = x.shape[3];
    static_cast<conv_geometry&>(s) = attr.conv;  // the window, as the node holds it
    s.k = w.shape[1] * attr.conv.groups;
    s.r = w.shape[2];
    s.s = w.shape[3];
    s.out_h = attr.out_h;
    s.out_w = attr.out_w;
    return s;
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    if (x.shape.size() != 4 || x.layout != tensor_layout::nhwc || x.type != dtype::f32)
      cx.fail_node(n, "input '" + x.name + "' must be a 4-D nhwc f32 image");
    const plan_tensor& w = cx.need_float_weight(n, 4, "[C, K / groups, R, S]");
    const conv_transpose2d_params& attr = n.attr<conv_transpose2d_params>();
    if (attr.out_h < 1 || attr.out_w < 1)
      cx.fail_node(n, "the output size " + std::to_string(attr.out_h) + "x" +
                          std::to_string(attr.out_w) + " is not positive");
    if (attr.conv.groups < 1 || w.shape[0] != x.shape[1])
      cx.fail_node(n, "weight '" + w.name + "' " + cx.shape_str(w.shape) + " does not match " +
                          std::to_string(x.shape[1]) + " input channels");
    const conv_transpose_shape s = shape_of(x, w, n);
    cx.for_node(n, [&] { detail::check_conv_transpose_shape(s); });
    cx.need_bias(n, s.k, "output channels");
    cx.set_out(n, {s.n, s.k, s.out_h, s.out_w}, dtype::f32, tensor_layout::nhwc);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& st, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    using K = conv_transpose2d<A, B>;
    const conv_transpose_shape s = shape_of(cx.T(st.x), cx.T(st.others[0]), n);
    const std::vector<float> w = cx.constant_f32(st.others[0]);
    const std::vector<float> bias =
        st.others.size() > 1 ? cx.constant_f32(st.others[1]) : std::vector<float>{};
    auto p = std::make_shared<kernel_params<K>>();
    p->packed = K::initialize(s, w.data(), bias.empty() ? nullptr : bias.data());
    p->in = s.in_dims();
    p->out = s.out_dims();
    detail::plan_command c;
    c.in[0] = st.x;
    c.out = st.out;
    info.flops = s.flops();
    info.bytes = double(cx.T(st.x).bytes) + double(cx.T(st.out).bytes) + 4.0 * double(w.size());
    info.kernel = "conv_transpose2d nhwc f32 (gemm + col2im)";
    add_kernel_command<K, float, float>(cx, std::move(p), s, c, info, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
