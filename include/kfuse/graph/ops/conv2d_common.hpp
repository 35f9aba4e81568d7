#pragma once
// What conv2d's lowerings share (graph/ops/conv2d.hpp dispatches to one per algorithm:
// conv2d_dense.hpp, conv2d_depthwise.hpp, conv2d_gated.hpp, conv2d_stem.hpp): the kernel's shape
// of a step, its f32 weights with a following batch norm folded in, int8 weights per output
// channel.
#include "kfuse/graph/ops/cast.hpp"
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/linear.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/conv/fold_batch_norm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// The activations' storage type of a conv recipe (int8 plans feed u8).
template <class Recipe>
using conv_input_t =
    std::conditional_t<std::is_same_v<Recipe, i8>, std::uint8_t, storage_t<Recipe>>;

struct conv2d_common {
  static conv_shape shape_of(const plan_tensor& x, const plan_tensor& w, const conv2d_params& p) {
    conv_shape cs;
    cs.n = x.shape[0];
    cs.c = x.shape[1];
    cs.h = x.shape[2];
    cs.w = x.shape[3];
    cs.k = w.shape[0];
    cs.r = w.shape[2];
    cs.s = w.shape[3];
    static_cast<conv_geometry&>(cs) = p;  // the window, as the node holds it
    return cs;
  }
  static conv_shape shape_of(const detail::compile_context& cx, const detail::step& s) {
    return shape_of(cx.T(s.x), cx.T(s.others[0]), cx.node_of(s).attr<conv2d_params>());
  }

  /// f32 OIHW weights of a conv step and its chain, with a folded batch norm applied: the
  /// chain's leading bias stage (when it came before the batch norm) becomes the folded bias.
  static std::vector<float> weights(detail::compile_context& cx, const detail::step& s,
                                    const conv_shape& cs, std::vector<detail::op_stage>& chain) {
    std::vector<float> w = cx.constant_f32(s.others[0]);
    chain = s.chain;
    if (s.folded_bn < 0) return w;
    const node_desc& bn = cx.g.nodes()[std::size_t(s.folded_bn)];
    const auto mean = cx.constant_f32(bn.inputs[1].index),
               var = cx.constant_f32(bn.inputs[2].index),
               gamma = cx.constant_f32(bn.inputs[3].index),
               beta = cx.constant_f32(bn.inputs[4].index);
    // Only a bias that came before the batch norm is folded through it; a bias fused after it
    // stays in the chain, after the folded one.
    std::vector<float> b = s.bn_after_bias ? cx.constant_f32(chain[0].operand)
                                           : std::vector<float>(std::size_t(cs.k), 0.f);
    cx.for_node(bn, [&] {
      fold_batch_norm(cs, w, b, {mean, var, gamma, beta, bn.attr<norm_params>().eps});
    });
    const detail::op_stage folded{
        stage_kind::bias, 0, 0,
        cx.new_constant(cx.node_of(s).name + ".folded_bias", {cs.k}, std::move(b)), true};
    if (s.bn_after_bias)
      chain[0] = folded;
    else
      chain.insert(chain.begin(), folded);
    return w;
  }

  /// int8 weights of conv kernel K: quantized per output channel into `packed`; returns the
  /// dequantization scales (weight scale x the input's scale) per output channel.
  template <class K>
  static std::vector<float> pack_int8(detail::compile_context& cx, const node_desc& n,
                                      const std::vector<float>& w, const conv_shape& cs,
                                      const tensor_quant& q, typename K::weights& packed) {
    const int8_weights wq = cx.for_node(
        n, [&] { return quantize_weights_per_row(w, cs.k, std::min(127, K::int8_weight_limit)); });
    std::vector<float> deq(wq.scales);
    for (float& d : deq) d *= q.scale;
    packed = K::initialize(cs, wq.values.data());
    return deq;
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
