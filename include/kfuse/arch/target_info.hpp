#pragma once
// target_info: the arch and vector implementation code was compiled for, as the fusion report,
// the profiler table and the demo print it ("avx512_bf16 (xsimd:avx512bw)"), and whether that arch
// is the scalar fallback: arch::native resolved to generic because the translation unit had no
// -march flags for a SIMD tier (KFUSE_SCALAR_FALLBACK in config/macros.hpp).
//
//   kfuse::target_of<kfuse::arch::native, kfuse::backend::hwy>().text()   // kfuse/simd/target.hpp
//
// This header is light (no SIMD library); kfuse/simd/target.hpp adds target_of<A, B>().
#include <string>
#include <type_traits>
#include <utility>

#include "kfuse/arch/tags.hpp"

KFUSE_BEGIN_NAMESPACE

struct target_info {
  std::string arch;              // the kfuse arch tag: "avx512_bf16", "sse4", "generic"
  std::string impl;              // the vector impl: "xsimd:avx512bw", "hwy:AVX3_DL", "scalar"
  bool scalar_fallback = false;  // generic because the TU had no SIMD -march flags
  std::string dispatch;          // why kfuse::runtime picked this arch at run time (else empty)

  bool known() const noexcept { return !arch.empty(); }
  /// "avx512_bf16 (xsimd:avx512bw)", "generic (scalar)", or for the fallback
  /// "generic (scalar) -- scalar fallback: ..." with what to do about it.
  std::string text() const {
    if (!known()) return "unknown";
    std::string s = arch + " (" + impl + ")";
    if (scalar_fallback)
      s += " -- scalar fallback: compiled without -march flags for a SIMD target; build with "
           "-march=native (or e.g. -march=x86-64-v3) or kfuse_add_arch_sources, see "
           "docs/toolchain.md";
    return s;
  }
};

/// The target of code instantiated for arch A in this translation unit, running `impl`
/// (simd::impl_name<A, B>()). Generic is the scalar fallback unless the build asked for it
/// (KFUSE_FORCE_GENERIC) or the TU has a SIMD tier and A = arch::generic was named explicitly.
template <class A>
target_info make_target_info(std::string impl) {
  return target_info{std::string(A::name), std::move(impl),
                     std::is_same_v<A, arch::generic> && KFUSE_SCALAR_FALLBACK != 0};
}

KFUSE_END_NAMESPACE
