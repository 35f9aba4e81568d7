#pragma once
// Graph adapter of pooling: max / average / global through pool2d, any fused stage chain in the
// epilogue (f32), integer tensors pooled with their zero point (quant params pass through).
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/pool2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct pool_params {
  pool_shape shape;
  chain_list stages;
  std::int32_t zero_point = 0;
};

template <class Elem, class L, class A, class B>
void pool_cmd(const command& c) {
  using T = storage_t<Elem>;
  const auto& p = *static_cast<const pool_params*>(c.params);
  const tensor_view<const T, L> in{static_cast<const T*>(c.in[0]), p.shape.in_dims()};
  const tensor_view<T, L> out{static_cast<T*>(c.out), p.shape.out_dims()};
  if constexpr (std::is_same_v<Elem, f32>) {
    const chain ch{&p.stages,
                   {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                    static_cast<const float*>(c.in[3])}};
    pool2d<Elem, L, A, epilogue<chain>, B>::run(in, p.shape, out, epilogue<chain>{ch},
                                                run_options{c.threads});
  } else {
    pool2d<Elem, L, A, epilogue<>, B>::run(in, p.shape, out, epilogue<>{}, run_options{c.threads},
                                           p.zero_point);
  }
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
