#pragma once
// The functor the dispatch test runs: a fused chain with a user stage, for one arch A.
//
// Its operator()<A> is defined in dispatch_chain_impl.hpp and explicitly instantiated in one
// translation unit per arch, each built with that arch's flags (kfuse_add_arch_sources). Every
// other TU sees only this declaration and the extern templates below, as with xsimd::dispatch.
#include <cstdint>

#include "kfuse/arch/tags.hpp"
#include "kfuse/kernels/run_info.hpp"

namespace dt {

/// A user stage: y = x / (1 + |x|) (softsign), written once on kfuse::simd vectors.
struct softsign {
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const;
};

struct chain_io {
  const float* in = nullptr;
  long n = 0;
  float scale = 1.f;
  float* out_f = nullptr;        // scale -> softsign -> gelu_tanh
  std::int8_t* out_q = nullptr;  // scale -> softsign -> silu -> quantize<i8>
  float* out_hwy = nullptr;      // the float chain through the Highway backend
};

struct chain_result {
  kfuse::run_info xsimd_f, xsimd_q, hwy_f;
  const char* compiled_arch = "";  // kfuse::compiled_arch() of the TU that ran
};

struct run_chain {
  template <class A>
  chain_result operator()(A, const chain_io& io) const;
};

}  // namespace dt

#define DT_DECLARE(A) \
  extern template dt::chain_result dt::run_chain::operator()(A, const dt::chain_io&) const;
#if defined(__x86_64__) || defined(_M_X64)
DT_DECLARE(kfuse::arch::generic)
DT_DECLARE(kfuse::arch::sse4)
DT_DECLARE(kfuse::arch::avx2)
DT_DECLARE(kfuse::arch::avx2_vnni)
DT_DECLARE(kfuse::arch::avx512)
DT_DECLARE(kfuse::arch::avx512_vnni)
DT_DECLARE(kfuse::arch::avx512_bf16)
#endif
#undef DT_DECLARE
