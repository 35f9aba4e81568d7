#pragma once
// Graph adapter of depthwise convolutions (groups == C == K) through depthwise_conv2d, with
// weights packed at compile time (batch norm already folded in) and any fused stage chain (bias,
// activation, residual add) in the epilogue. Dense / grouped conv2d: ops/conv_dense.hpp.
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

template <class Recipe, class L, class A, class B>
struct depthwise_params {
  using kernel = depthwise_conv2d<Recipe, L, A, epilogue<chain>, B>;
  typename kernel::packed w;
  dims4 in{}, out{};
  chain_list stages;
};

template <class Recipe, class L, class A, class B>
void depthwise_cmd(const command& c) {
  using P = depthwise_params<Recipe, L, A, B>;
  using T = std::conditional_t<std::is_same_v<Recipe, bf16>, bf16_t, float>;
  const auto& p = *static_cast<const P*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                  static_cast<const float*>(c.in[3])}};
  P::kernel::run(tensor_view<const T, L>{static_cast<const T*>(c.in[0]), p.in}, p.w,
                 tensor_view<float, L>{static_cast<float*>(c.out), p.out}, epilogue<chain>{ch},
                 run_options{c.threads});
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
