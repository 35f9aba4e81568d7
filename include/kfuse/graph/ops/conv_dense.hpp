#pragma once
// Graph adapter of conv2d (dense, grouped, 1x1 through GEMM): weights packed at compile time
// (batch norm already folded in), any fused stage chain (bias, activation, residual add, int8
// dequantization scales, and a fused quantize of the output) in the epilogue.
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Out: float, or uint8_t when the plan fused the quantization of the output (then `out_q`).
template <class Recipe, class L, class A, class B, class Out = float>
struct conv_params {
  using kernel = conv2d<Recipe, L, A, chain_epilogue_t<Out>, B>;
  typename kernel::weights w;
  dims4 in{}, out{};
  chain_list stages;
  std::int32_t x_zero = 0;  // i8: the activations' zero point
  quant_params out_q{};     // an int8 output's scale and zero point
};

/// The activations' storage type of a conv recipe (int8 plans feed u8).
template <class Recipe>
using conv_input_t =
    std::conditional_t<std::is_same_v<Recipe, i8>, std::uint8_t, storage_t<Recipe>>;

template <class Recipe, class L, class A, class B, class Out = float>
void conv_cmd(const command& c) {
  using P = conv_params<Recipe, L, A, B, Out>;
  using T = conv_input_t<Recipe>;
  const auto& p = *static_cast<const P*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                  static_cast<const float*>(c.in[3])}};
  P::kernel::run(tensor_view<const T, L>{static_cast<const T*>(c.in[0]), p.in}, p.w,
                 tensor_view<Out, L>{static_cast<Out*>(c.out), p.out},
                 chain_epilogue<Out>::make(ch, p.out_q), run_options{c.threads}, p.x_zero);
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
