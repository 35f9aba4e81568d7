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
#define KFUSE_NOINLINE __attribute__((noinline))
#define KFUSE_RESTRICT __restrict__
#else
#define KFUSE_INLINE inline
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

#define KFUSE_BEGIN_NAMESPACE \
  namespace kfuse {           \
  inline namespace KFUSE_ISA_NS {
#define KFUSE_END_NAMESPACE \
  }                         \
  }
