#pragma once
// Arch tags: empty structs whose inheritance means "extends" (every avx512 CPU runs avx2 code).
// They carry only constants, so they are the same type in every translation unit and can name a
// kernel instantiation across TUs (see arch/dispatch.hpp).
#include <string_view>
#include <type_traits>

#include "kfuse/config/macros.hpp"

namespace kfuse::arch {

/// Plain C++ with no vector registers: the reference target every SIMD target is tested against.
struct generic {
  static constexpr std::string_view name{"generic"};
  static constexpr int tier = KFUSE_TIER_GENERIC;
  static constexpr int vector_bytes = 4;
  static constexpr bool native_bf16_dot = false;  // vdpbf16ps / bfdot
  static constexpr bool native_int8_dot = false;  // vpdpbusd / sdot
  static constexpr bool is_x86 = false;
  static constexpr bool is_arm = false;
};

/// x86-64-v2: SSE4.2, 128-bit.
struct sse4 : generic {
  static constexpr std::string_view name{"sse4"};
  static constexpr int tier = KFUSE_TIER_SSE4;
  static constexpr int vector_bytes = 16;
  static constexpr bool is_x86 = true;
};

/// x86-64-v3: AVX2 + FMA + F16C, 256-bit.
struct avx2 : sse4 {
  static constexpr std::string_view name{"avx2"};
  static constexpr int tier = KFUSE_TIER_AVX2;
  static constexpr int vector_bytes = 32;
};

/// avx2 + AVX-VNNI (VEX vpdpbusd on 256-bit registers): the int8 dot product without AVX-512.
/// It extends avx2 only: an AVX-512 VNNI CPU need not have the VEX form (Ice Lake has not).
struct avx2_vnni : avx2 {
  static constexpr std::string_view name{"avx2_vnni"};
  static constexpr int tier = KFUSE_TIER_AVX2_VNNI;
  static constexpr bool native_int8_dot = true;
};

/// x86-64-v4: AVX-512 F/BW/DQ/VL/CD, 512-bit.
struct avx512 : avx2 {
  static constexpr std::string_view name{"avx512"};
  static constexpr int tier = KFUSE_TIER_AVX512;
  static constexpr int vector_bytes = 64;
};

/// avx512 + VNNI (vpdpbusd: u8 x s8 -> s32 dot products).
struct avx512_vnni : avx512 {
  static constexpr std::string_view name{"avx512_vnni"};
  static constexpr int tier = KFUSE_TIER_AVX512_VNNI;
  static constexpr bool native_int8_dot = true;
};

/// avx512_vnni + BF16 (vdpbf16ps). Every CPU with AVX512-BF16 also has VNNI.
struct avx512_bf16 : avx512_vnni {
  static constexpr std::string_view name{"avx512_bf16"};
  static constexpr int tier = KFUSE_TIER_AVX512_BF16;
  static constexpr bool native_bf16_dot = true;
};

/// AArch64 Advanced SIMD, 128-bit.
struct neon : generic {
  static constexpr std::string_view name{"neon"};
  static constexpr int tier = KFUSE_TIER_NEON;
  static constexpr int vector_bytes = 16;
  static constexpr bool is_arm = true;
};

/// neon + the dot-product extension (sdot/udot).
struct neon_dotprod : neon {
  static constexpr std::string_view name{"neon_dotprod"};
  static constexpr int tier = KFUSE_TIER_NEON_DOTPROD;
  static constexpr bool native_int8_dot = true;
};

template <class A>
concept tag = std::is_base_of_v<generic, A> && requires {
  A::name;
  A::tier;
};

/// The best arch the compile flags of this translation unit allow.
#if KFUSE_TIER == KFUSE_TIER_AVX512_BF16
using native = avx512_bf16;
#elif KFUSE_TIER == KFUSE_TIER_AVX512_VNNI
using native = avx512_vnni;
#elif KFUSE_TIER == KFUSE_TIER_AVX512
using native = avx512;
#elif KFUSE_TIER == KFUSE_TIER_AVX2_VNNI
using native = avx2_vnni;
#elif KFUSE_TIER == KFUSE_TIER_AVX2
using native = avx2;
#elif KFUSE_TIER == KFUSE_TIER_SSE4
using native = sse4;
#elif KFUSE_TIER == KFUSE_TIER_NEON_DOTPROD
using native = neon_dotprod;
#elif KFUSE_TIER == KFUSE_TIER_NEON
using native = neon;
#else
using native = generic;
#endif

/// Arch lists for the dispatcher, best first.
template <class... A>
struct list {};

#if KFUSE_X86 || (!KFUSE_ARM && (defined(__x86_64__) || defined(_M_X64)))
using all = list<avx512_bf16, avx512_vnni, avx512, avx2_vnni, avx2, sse4, generic>;
#else
using all = list<neon_dotprod, neon, generic>;
#endif

}  // namespace kfuse::arch

KFUSE_BEGIN_NAMESPACE

/// True when code for arch A can be compiled in this translation unit: A is the TU's own tier,
/// or generic (plain C++ runs anywhere). Per-ISA, so it may differ between TUs.
template <class A>
inline constexpr bool compiled_here =
    std::is_same_v<A, arch::generic> || std::is_same_v<A, arch::native>;

/// The name of the arch this translation unit is compiled for (arch::native::name). It lives in
/// the per-ISA namespace, so every TU calls its own copy and reports its own -march flags even
/// when linked with TUs built for other archs (tests/odr checks exactly that).
constexpr std::string_view compiled_arch() noexcept { return arch::native::name; }

KFUSE_END_NAMESPACE
