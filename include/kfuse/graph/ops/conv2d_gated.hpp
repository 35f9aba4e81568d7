#pragma once
// conv2d lowered with a channel gate (passes/channel_gate.hpp): the squeeze-excite multiply
// fused into the pointwise NHWC conv after it, kfuse::conv2d::run_gated.
#include "kfuse/graph/ops/conv2d_common.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// A gated conv's parameters: the kernel's, the gate's stride between samples and (int8) the
/// quantization of the gated input.
template <class K>
struct gated_conv_params : kernel_params<K> {
  index_t gate_stride = 0;
  float in_scale = 1.f;
  std::vector<float> dequant;  // int8: per output channel (a stage of its own, not an operand)
};

/// The epilogue of a gated conv writing Out: the chain (f32, bf16); int8 dequantizes first,
/// with the scales in its parameters, so that the gate, a bias and a residual keep the three
/// operand slots; a u8 output quantizes last.
template <class Recipe, class Out>
using gated_epilogue_t = std::conditional_t<
    !std::is_same_v<Recipe, i8>, chain_epilogue_t<Out>,
    std::conditional_t<std::is_same_v<Out, std::uint8_t>, epilogue<dequantize, chain, quantize<u8>>,
                       epilogue<dequantize, chain>>>;

/// The replay command of a gated conv: K::run_gated with the gate in c.in[3] (the chain's
/// operands, at most two, before it). int8 reads f32 and quantizes it as it loads.
template <class K, class TX, class Out>
void gated_conv_cmd(const command& c) {
  const auto& p = *static_cast<const gated_conv_params<K>*>(c.params);
  const auto* gate = static_cast<const float*>(c.in[chain_max_operands]);
  const auto x = view<nhwc>(static_cast<const TX*>(c.in[0]), p.in);
  const auto y = view<nhwc>(static_cast<Out*>(c.out), p.out);
  const chain ch = command_chain(c, p.stages);
  if constexpr (K::integer) {
    const dequantize dq{quant_params{1.f, 0, p.dequant, {}}};
    using Ep = typename K::epilogue_type;
    const Ep ep = [&] {
      if constexpr (std::is_same_v<Out, std::uint8_t>)
        return Ep{dq, ch, quantize<u8>{p.out_q}};
      else
        return Ep{dq, ch};
    }();
    K::run_gated(x, gate, p.gate_stride, p.in_scale, p.in_zero_point, p.packed, y, ep,
                 command_workspace(c), run_options{c.threads});
  } else {
    K::run_gated(x, gate, p.gate_stride, p.packed, y, epilogue<chain>{ch}, command_workspace(c),
                 run_options{c.threads});
  }
}

struct conv2d_gated_lowering : conv2d_common {
  /// A pointwise NHWC conv with a channel gate (passes/channel_gate.hpp): the gate in the
  /// command's last input slot, the chain's operands before it. bf16 reads bf16 (an f32 input
  /// converted first) and writes f32; int8 reads the f32 input, quantizing the gated values with
  /// the quant params of the multiply's output (s.gated_in) as it loads them, and writes f32 or
  /// u8.
  template <class Recipe, class A, class B, class Out = float>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds, const conv_shape& cs,
                    const char* recipe) {
    if constexpr (!gemm_available<Recipe, A, B>()) {
      cx.fail_node(n, gemm_missing<Recipe, A>(recipe, "conv2d"));
    } else {
      using K = conv2d<Recipe, nhwc, A, gated_epilogue_t<Recipe, Out>, B>;
      constexpr bool int8 = std::is_same_v<Recipe, i8>;
      auto p = std::make_shared<gated_conv_params<K>>();
      std::vector<detail::op_stage> chain;
      const std::vector<float> w = weights(cx, s, cs, chain);
      detail::plan_command c;
      c.in[0] = s.x;
      if constexpr (int8) {
        const tensor_quant q = int8_input_quant(cx, n, cx.T(s.gated_in));
        p->dequant = pack_int8<K>(cx, n, w, cs, q, p->packed);
        p->in_scale = q.scale;
        p->in_zero_point = q.zero_point;
        p->out_q = cx.out_quant_params(s);
      } else {
        p->packed = K::pack(w.data(), cs);
        if (std::is_same_v<Recipe, bf16> && cx.T(s.x).type != dtype::bf16)
          c.in[0] = convert_input<A, B>(cx, s, n, dtype::bf16, {}, cmds);
      }
      if (detail::operand_count(chain) > chain_max_operands - 1)
        cx.fail_node(n, "too many fused operands next to a channel gate");
      p->in = cs.in_dims();
      p->out = cs.out_dims();
      c.out = s.out;
      p->stages = cx.make_chain(chain, c, 1);
      c.in[chain_max_operands] = s.gate;
      p->gate_stride = shape_numel(cx.T(s.gate).shape) == cs.c ? 0 : cs.c;
      info.flops = cs.flops();
      info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) +
                   double(sizeof(typename K::weight_storage)) * double(w.size());
      info.kernel = "conv2d " + std::string(recipe) + " nhwc gated" + cx.chain_suffix(s, chain);
      c.fn = &gated_conv_cmd<K, std::conditional_t<int8, float, conv_input_t<Recipe>>, Out>;
      c.threads = cx.threads_for(info.bytes, info.flops);
      c.workspace_bytes = K::gated_workspace_size(p->packed, c.threads);
      c.params = cx.own(p);
      cmds.push_back(c);
    }
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
