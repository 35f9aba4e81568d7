#pragma once
// What the CPU running this process supports, read once at run time.
#include "kfuse/arch/tags.hpp"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

KFUSE_BEGIN_NAMESPACE

/// True when the CPU (and OS) can execute code built for arch A.
template <class A>
inline bool cpu_supports() noexcept {
  if constexpr (std::is_same_v<A, arch::generic>) {
    return true;
  } else if constexpr (A::is_x86) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    // __builtin_cpu_supports also checks that the OS saves the wider register state (XGETBV).
    __builtin_cpu_init();
    bool ok = __builtin_cpu_supports("sse4.2");
    if constexpr (A::tier >= KFUSE_TIER_AVX2)
      ok = ok && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
    if constexpr (A::tier == KFUSE_TIER_AVX2_VNNI) ok = ok && __builtin_cpu_supports("avxvnni");
    if constexpr (A::tier >= KFUSE_TIER_AVX512)
      ok = ok && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if constexpr (A::tier >= KFUSE_TIER_AVX512_VNNI)
      ok = ok && __builtin_cpu_supports("avx512vnni");
    if constexpr (A::tier >= KFUSE_TIER_AVX512_BF16)
      ok = ok && __builtin_cpu_supports("avx512bf16");
    return ok;
#else
    return false;
#endif
  } else if constexpr (A::is_arm) {
#if defined(__aarch64__) && defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP);
    bool ok = (hw & HWCAP_ASIMD) != 0;
    if constexpr (A::tier >= KFUSE_TIER_NEON_DOTPROD) ok = ok && (hw & HWCAP_ASIMDDP) != 0;
    return ok;
#elif defined(__aarch64__)
    return A::tier == KFUSE_TIER_NEON;
#else
    return false;
#endif
  } else {
    return false;
  }
}

KFUSE_END_NAMESPACE
