// 03_dispatch: compiled once per arch, each time with only that arch's flags
// (kfuse_arch_flags), so arch::native is that arch here.
#include <span>

#include "chain.hpp"

template <class A>
kfuse::run_info chain_kernel::operator()(A, const float* x, std::int8_t* y, kfuse::dims4 dims,
                                         const float* bias) const {
  const kfuse::epilogue<kfuse::scale, kfuse::bias, kfuse::gelu_tanh, kfuse::quantize<kfuse::i8>> ep{
      {1.25f}, {std::span<const float>(bias, std::size_t(dims.c))}, {}, {{0.025f, -20}}};
  return kfuse::eltwise<A>(kfuse::view<kfuse::nchw>(x, dims), kfuse::view<kfuse::nchw>(y, dims),
                           ep);
}

template kfuse::run_info chain_kernel::operator()(kfuse::arch::native, const float*, std::int8_t*,
                                                  kfuse::dims4, const float*) const;
