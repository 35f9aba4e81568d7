#pragma once
// target_of<A, B>(): what kernels instantiated for arch A and backend B in this translation unit
// run on, with the scalar-fallback flag (kfuse/arch/target_info.hpp).
//
//   std::printf("arch: %s\n", kfuse::target_of().text().c_str());
//   // "arch: avx512_bf16 (xsimd:avx512bw)", or without -march flags:
//   // "arch: generic (scalar) -- scalar fallback: compiled without -march flags ..."
#include "kfuse/arch/target_info.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

template <class A = arch::native, class B = backend::xsimd>
target_info target_of() {
  return make_target_info<A>(simd::impl_name<A, B>());
}

KFUSE_END_NAMESPACE
