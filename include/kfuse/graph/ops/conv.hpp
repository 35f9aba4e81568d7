#pragma once
// Graph adapter of depthwise convolutions (groups == C == K) through depthwise_conv2d, with
// weights packed at compile time (batch norm already folded in) and any fused stage chain (bias,
// activation, residual add, a fused quantize of the output) in the epilogue. Dense / grouped
// conv2d: ops/conv_dense.hpp.
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Out: float, or uint8_t when the plan fused the quantization of the output (then `out_q`).
template <class Recipe, class L, class A, class B, class Out = float>
struct depthwise_params {
  using kernel = depthwise_conv2d<Recipe, L, A, chain_epilogue_t<Out>, B>;
  typename kernel::packed w;
  dims4 in{}, out{};
  chain_list stages;
  quant_params out_q{};  // an int8 output's scale and zero point
};

template <class Recipe, class L, class A, class B, class Out = float>
void depthwise_cmd(const command& c) {
  using P = depthwise_params<Recipe, L, A, B, Out>;
  using T = std::conditional_t<std::is_same_v<Recipe, bf16>, bf16_t, float>;
  const auto& p = *static_cast<const P*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                  static_cast<const float*>(c.in[3])}};
  P::kernel::run(tensor_view<const T, L>{static_cast<const T*>(c.in[0]), p.in}, p.w,
                 tensor_view<Out, L>{static_cast<Out*>(c.out), p.out},
                 chain_epilogue<Out>::make(ch, p.out_q), run_options{c.threads});
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
