#pragma once
// Graph adapter of linear / gemm: weights packed at compile time, any fused stage chain in the
// epilogue (bias, activation, residual add, int8 dequantization scales, and a fused quantize of
// the output), threads per node.
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Whether gemm<Recipe> has a kernel on arch A (int8 needs vpdpbusd, or the scalar generic).
template <class Recipe, class A, class B>
constexpr bool gemm_available() {
  if constexpr (std::is_same_v<Recipe, i8>)
    return detail::int8_kernel_available<A, simd::vec_for<A, B>>();
  else
    return true;
}

/// Out: float, or uint8_t when the plan fused the quantization of the output (then `out_q`).
template <class Recipe, class A, class B, class Out = float>
struct linear_params {
  using kernel = gemm<Recipe, A, chain_epilogue_t<Out>, B>;
  typename kernel::weights w;
  chain_list stages;
  index_t M = 0;
  std::int32_t a_zero = 0;  // i8: the activations' zero point
  quant_params out_q{};     // an int8 output's scale and zero point
};

/// out[M, N] = chain(in[0][M, K] . W) (then quantized for an int8 Out); operands of the chain
/// in c.in[1..3].
template <class Recipe, class A, class B, class Out = float>
void linear_cmd(const command& c) {
  using P = linear_params<Recipe, A, B, Out>;
  using K = typename P::kernel;
  const auto& p = *static_cast<const P*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                  static_cast<const float*>(c.in[3])}};
  const auto* a = static_cast<const typename K::a_type*>(c.in[0]);
  K::run(a, p.M, p.w.K(), p.w, static_cast<Out*>(c.out), p.w.N(),
         chain_epilogue<Out>::make(ch, p.out_q), run_options{c.threads}, p.a_zero);
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
