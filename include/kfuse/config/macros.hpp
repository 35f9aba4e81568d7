#pragma once
// Compiler detection, inlining macros and the per-ISA inline namespace.
//
// Every piece of kfuse that holds instructions lives in `kfuse::KFUSE_ISA_NS`, an inline namespace
// named after the ISA tier this translation unit is compiled for. Two TUs built with different
// -march flags therefore instantiate differently mangled symbols, and the linker can never keep
// an AVX-512 copy of an inline function for the SSE4 TU (the classic header-only SIMD ODR crash).
// Types without code (tags, storage types, stages, views) stay in `kfuse` so that they can cross
// TU boundaries, e.g. through the runtime dispatcher.

#if defined(__GNUC__) || defined(__clang__)
#define KFUSE_INLINE inline __attribute__((always_inline))
#define KFUSE_INLINE_LAMBDA __attribute__((always_inline))
#define KFUSE_NOINLINE __attribute__((noinline))
#define KFUSE_RESTRICT __restrict__
#else
#define KFUSE_INLINE inline
#define KFUSE_INLINE_LAMBDA
#define KFUSE_NOINLINE
#define KFUSE_RESTRICT
#endif

// ISA tier of this TU. Each tier implies everything kfuse uses from the tiers below it, and
// kfuse code tests only these macros, so two TUs of one tier always compile the same code.
#define KFUSE_TIER_GENERIC 0
#define KFUSE_TIER_SSE4 1
#define KFUSE_TIER_AVX2 2
// AVX2 + AVX-VNNI (VEX vpdpbusd on ymm: Alder Lake, Zen 5 without AVX-512 ...). Not below the
// AVX-512 tiers in features (Ice Lake has AVX512-VNNI but no AVX-VNNI): code that needs the ymm
// dot product tests KFUSE_TIER == KFUSE_TIER_AVX2_VNNI, never ">=".
#define KFUSE_TIER_AVX2_VNNI 3
#define KFUSE_TIER_AVX512 4
#define KFUSE_TIER_AVX512_VNNI 5
#define KFUSE_TIER_AVX512_BF16 6
#define KFUSE_TIER_NEON 10
#define KFUSE_TIER_NEON_DOTPROD 11

#if defined(KFUSE_FORCE_GENERIC)
#define KFUSE_TIER KFUSE_TIER_GENERIC
#define KFUSE_ISA_NS isa_generic
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__) && defined(__F16C__)
#if defined(__AVX512BF16__) && defined(__AVX512VNNI__)
#define KFUSE_TIER KFUSE_TIER_AVX512_BF16
#define KFUSE_ISA_NS isa_avx512_bf16
#elif defined(__AVX512VNNI__)
#define KFUSE_TIER KFUSE_TIER_AVX512_VNNI
#define KFUSE_ISA_NS isa_avx512_vnni
#else
#define KFUSE_TIER KFUSE_TIER_AVX512
#define KFUSE_ISA_NS isa_avx512
#endif
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#if defined(__AVXVNNI__)
#define KFUSE_TIER KFUSE_TIER_AVX2_VNNI
#define KFUSE_ISA_NS isa_avx2_vnni
#else
#define KFUSE_TIER KFUSE_TIER_AVX2
#define KFUSE_ISA_NS isa_avx2
#endif
#elif defined(__SSE4_2__)
#define KFUSE_TIER KFUSE_TIER_SSE4
#define KFUSE_ISA_NS isa_sse4
#elif defined(__aarch64__) && defined(__ARM_NEON)
#if defined(__ARM_FEATURE_DOTPROD)
#define KFUSE_TIER KFUSE_TIER_NEON_DOTPROD
#define KFUSE_ISA_NS isa_neon_dotprod
#else
#define KFUSE_TIER KFUSE_TIER_NEON
#define KFUSE_ISA_NS isa_neon
#endif
#else
#define KFUSE_TIER KFUSE_TIER_GENERIC
#define KFUSE_ISA_NS isa_generic
#endif

#define KFUSE_X86 (KFUSE_TIER >= KFUSE_TIER_SSE4 && KFUSE_TIER <= KFUSE_TIER_AVX512_BF16)
#define KFUSE_ARM (KFUSE_TIER >= KFUSE_TIER_NEON)
// vpdpbusd (u8 x s8 -> s32 dot products of 4): zmm on the AVX-512 VNNI tiers, ymm on AVX2_VNNI.
#define KFUSE_X86_INT8_DOT \
  (KFUSE_X86 && (KFUSE_TIER == KFUSE_TIER_AVX2_VNNI || KFUSE_TIER >= KFUSE_TIER_AVX512_VNNI))
// Without vpdpbusd (the avx2 and avx512 tiers: Zen 2 / 3, Haswell to Skylake) vpmaddubsw +
// vpmaddwd stand in for it: u8 x s8 pairs summed in 16 bits, then in 32. Exact while every
// weight is within [-63, 63] (7-bit weights; the kernels check it, the plans quantize so).
#define KFUSE_X86_INT8_MADD (KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX2 && !KFUSE_X86_INT8_DOT)

// Highway 1.0.3 makes its SSE4 / AVX2 / AVX3 static targets require AES and PCLMUL as well
// (hwy/detect_targets.h), so plain -march=x86-64-v2 / -v3 / -v4, which enable neither, would
// silently get its 128-bit SSSE3 target. kfuse uses no AES or carry-less multiply op: on x86 it
// sets Highway's own switch HWY_DISABLE_PCLMUL_AES before the first Highway include, so the static
// target follows the -march flags alone (SSE4, AVX2, AVX3), the same in every TU of one tier. A TU
// that included Highway before kfuse keeps Highway's choice (docs/toolchain.md).
#if KFUSE_X86 && !defined(HWY_DISABLE_PCLMUL_AES) && !defined(HIGHWAY_HWY_DETECT_TARGETS_H_)
#define HWY_DISABLE_PCLMUL_AES 1
#endif

// KFUSE_SCALAR_FALLBACK is 1 when arch::native is the one-lane generic arch although the build
// did not ask for it (KFUSE_FORCE_GENERIC): the TU was compiled without -march flags for a SIMD
// tier (a plain x86-64 compiler targets SSE2, below kfuse's sse4 tier). Reports say "scalar
// fallback"; defining KFUSE_WARN_SCALAR_FALLBACK (CMake: -DKFUSE_WARN_SCALAR_FALLBACK=ON) turns
// it into one compiler warning per such TU.
#if KFUSE_TIER == KFUSE_TIER_GENERIC && !defined(KFUSE_FORCE_GENERIC)
#define KFUSE_SCALAR_FALLBACK 1
#if defined(KFUSE_WARN_SCALAR_FALLBACK)
#if defined(__GNUC__) || defined(__clang__)
// #warning, not #pragma GCC warning: that one is silent in system headers, and find_package
// consumers include kfuse as one (-isystem).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
// clang-format off
#warning "kfuse: scalar fallback: this translation unit has no -march flags for a SIMD target, so arch::native is generic (one lane). Compile with e.g. -march=native or -march=x86-64-v3, or use kfuse_add_arch_sources; define KFUSE_FORCE_GENERIC if the scalar code is wanted (docs/toolchain.md)"
// clang-format on
#pragma GCC diagnostic pop
#elif defined(_MSC_VER)
#pragma message("warning: kfuse: scalar fallback: no SIMD target flags, arch::native is generic")
#endif
#endif
#else
#define KFUSE_SCALAR_FALLBACK 0
#endif

#define KFUSE_BEGIN_NAMESPACE \
  namespace kfuse {           \
  inline namespace KFUSE_ISA_NS {
#define KFUSE_END_NAMESPACE \
  }                         \
  }
