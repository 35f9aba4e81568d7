#pragma once
// pool2d: max / average / global pooling as a graph op, any fused stage chain in the epilogue
// (f32), integer tensors pooled with their zero point (quant params pass through).
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/pool2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct pool2d_rule : op_rule {
  static constexpr op_kind kind = op_kind::pool2d;
  using attributes = pool2d_params;
  static constexpr bool absorbs_chain = true;

  static pool_shape shape_of(const plan_tensor& x, const pool2d_params& p) {
    return pool_shape::of({x.shape[0], x.shape[1], x.shape[2], x.shape[3]}, p);
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const pool2d_params& attr = n.attr<pool2d_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_image(n, x);
    if (x.type == dtype::f16 || x.type == dtype::i32 || x.type == dtype::i64)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                          "; pooling takes f32, bf16, u8 or i8");
    if ((x.type == dtype::u8 || x.type == dtype::i8) && !x.has_quant && attr.kind == pool_kind::avg)
      cx.fail_node(n, "average pooling of " + std::string(dtype_name(x.type)) + " input '" +
                          x.name + "' needs its quant params (graph::set_quant)");
    if (attr.global)
      if (attr.pad_top || attr.pad_left || attr.pad_bottom || attr.pad_right)
        cx.fail_node(n, "global pooling takes no padding");
    const pool_shape ps = shape_of(x, attr);
    cx.check_for_node(n, "pool2d", [&] { detail::check_pool_shape("pool2d", ps); });
    cx.set_out(n, {ps.n, ps.c, ps.out_h(), ps.out_w()}, x.type, x.layout);
    cx.pass_quant(n, x);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const pool2d_params& attr = n.attr<pool2d_params>();
    const plan_tensor& x = cx.T(s.x);
    const pool_shape ps = shape_of(x, attr);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    const chain_list stages = cx.make_chain(s.chain, c, 1);
    const double window = ps.global ? double(ps.h * ps.w) : double(ps.r * ps.s);
    info.flops = double(shape_numel(cx.T(s.out).shape)) * window;
    info.bytes = double(x.bytes) + double(cx.T(s.out).bytes);
    with_layout(x.layout, [&]<class L> {
      with_elem<f32, bf16, u8, i8>(x.type, [&]<class Elem> {
        // Integer and bf16 tensors take no chain (infer fuses none into them).
        using Ep = std::conditional_t<std::is_same_v<Elem, f32>, epilogue<chain>, epilogue<>>;
        using K = pool2d<Elem, L, A, Ep, B>;
        using T = storage_t<Elem>;
        auto p = std::make_shared<kernel_params<K>>();
        p->packed = K::initialize(ps);
        p->in = ps.in_dims();
        p->out = ps.out_dims();
        p->stages = stages;
        if (elem_traits<Elem>::is_quantized && x.has_quant) p->in_zero_point = x.quant.zero_point;
        add_kernel_command<K, T, T>(cx, p, ps, c, info, cmds);
      });
    });
    static constexpr const char* modes[] = {"max", "average", "global max", "global average"};
    info.kernel = "pool2d " + std::string(modes[int(attr.kind) + 2 * int(attr.global)]) + " " +
                  std::string(layout_name(x.layout)) +
                  (s.chain.empty() ? "" : " [" + cx.chain_text(s.chain) + "]");
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
