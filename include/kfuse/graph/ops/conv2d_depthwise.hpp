#pragma once
// conv2d lowered as a depthwise convolution (groups == C == K): kfuse::depthwise_conv2d.
#include "kfuse/graph/ops/conv2d_common.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct conv2d_depthwise_lowering : conv2d_common {
  template <class Recipe, class L, class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds,
                    const conv_shape& cs) {
    using K = depthwise_conv2d<Recipe, L, A, epilogue<chain>, B>;
    using T = storage_t<Recipe>;
    auto p = std::make_shared<kernel_params<K>>();
    std::vector<detail::op_stage> chain;
    const std::vector<float> w = weights(cx, s, cs, chain);
    p->packed = K::initialize(cs, w.data());
    p->in = cs.in_dims();
    p->out = cs.out_dims();
    detail::plan_command c;
    c.in[0] = s.x;
    if (std::is_same_v<Recipe, bf16> && cx.T(s.x).type != dtype::bf16)
      c.in[0] = convert_input<A, B>(cx, s, n, dtype::bf16, {}, cmds);
    c.out = s.out;
    cx.need_operand_room(n, chain);
    p->stages = cx.make_chain(chain, c, 1);
    info.flops = cs.flops();
    info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) + 4.0 * double(w.size());
    info.kernel = std::string("depthwise_conv2d ") +
                  (std::is_same_v<Recipe, bf16> ? "bf16 " : "f32 ") + std::string(L::name) +
                  (chain.empty() ? "" : " [" + cx.chain_text(chain) + "]");
    if constexpr (std::is_same_v<Recipe, bf16> && std::is_same_v<L, nhwc>)
      if (cx.T(s.out).type == dtype::bf16)  // bf16 absorbed: the consumer reads bf16
        return add_kernel_command<K, T, bf16_t>(cx, p, cs, c, info, cmds);
    add_kernel_command<K, T, float>(cx, p, cs, c, info, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
