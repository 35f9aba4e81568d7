#pragma once
// 03_dispatch: the kernel, declared for every arch kfuse knows on this platform. Each arch's
// instantiation is compiled in its own translation unit (chain_arch.cpp, built once per arch
// with only that arch's -march flags); the caller only sees these declarations.
#include <cstdint>

#include "kfuse/kfuse.hpp"

struct chain_kernel {
  /// y = quantize_i8(gelu_tanh(x * 1.25 + bias[c])) on an NCHW tensor, with arch A.
  template <class A>
  kfuse::run_info operator()(A, const float* x, std::int8_t* y, kfuse::dims4 dims,
                             const float* bias) const;
};

#define EX03_DECLARE(A)                                                                   \
  extern template kfuse::run_info chain_kernel::operator()(A, const float*, std::int8_t*, \
                                                           kfuse::dims4, const float*) const;
EX03_DECLARE(kfuse::arch::generic)
#if defined(__x86_64__)
EX03_DECLARE(kfuse::arch::sse4)
EX03_DECLARE(kfuse::arch::avx2)
EX03_DECLARE(kfuse::arch::avx512)
EX03_DECLARE(kfuse::arch::avx512_vnni)
EX03_DECLARE(kfuse::arch::avx512_bf16)
#elif defined(__aarch64__)
EX03_DECLARE(kfuse::arch::neon)
EX03_DECLARE(kfuse::arch::neon_dotprod)
#endif
