#pragma once
// Arch tags: empty structs whose inheritance means "extends" (every avx512 CPU runs avx2 code).
// They carry only constants, so they are the same type in every translation unit and can name a
// kernel instantiation across TUs (see arch/dispatch.hpp). Generated from arch_table.def, the one
// table of archs that CMake reads too (cmake/kfuse_arch.cmake).
#include <string_view>
#include <type_traits>

#include "kfuse/config/macros.hpp"

namespace kfuse::arch {

/// Arch lists for the dispatcher, best first.
template <class... A>
struct list {};

namespace detail {
enum class family { none, x86, arm };
}  // namespace detail

// The tag structs, one per row of arch_table.def (which documents each arch): the root row
// (generic) has no base, every other row derives from its parent.
#define KFUSE_ARCH_MEMBERS(name_, tier_, bytes_, bf16_dot_, int8_dot_, family_)  \
  static constexpr std::string_view name{#name_};                                \
  static constexpr int tier = tier_;                                             \
  static constexpr int vector_bytes = bytes_;                                    \
  static constexpr bool native_bf16_dot = bf16_dot_; /* vdpbf16ps / bfdot */     \
  static constexpr bool native_int8_dot = int8_dot_; /* vpdpbusd / sdot */       \
  static constexpr bool is_x86 = detail::family::family_ == detail::family::x86; \
  static constexpr bool is_arm = detail::family::family_ == detail::family::arm;
#define KFUSE_ARCH_ROOT(name_, parent_, tier_, bytes_, bf16_dot_, int8_dot_, family_, flags_, \
                        sets_)                                                                \
  struct name_ {                                                                              \
    KFUSE_ARCH_MEMBERS(name_, tier_, bytes_, bf16_dot_, int8_dot_, family_)                   \
  };
#define KFUSE_ARCH(name_, parent_, tier_, bytes_, bf16_dot_, int8_dot_, family_, flags_, sets_) \
  struct name_ : parent_ {                                                                      \
    KFUSE_ARCH_MEMBERS(name_, tier_, bytes_, bf16_dot_, int8_dot_, family_)                     \
  };                                                                                            \
  static_assert(name_::tier > parent_::tier, "arch_table.def: a tier below its parent's");
#include "kfuse/arch/arch_table.def"
#undef KFUSE_ARCH_MEMBERS

template <class A>
concept tag = std::is_base_of_v<generic, A> && requires {
  A::name;
  A::tier;
};

namespace detail {

// Every row, in table order (the root row comes first).
#define KFUSE_ARCH_ROOT(name_, ...) name_
#define KFUSE_ARCH(name_, ...) , name_
using table = list<
#include "kfuse/arch/arch_table.def"
    >;

template <class A>
inline constexpr family family_of = A::is_x86 ? family::x86
                                              : (A::is_arm ? family::arm : family::none);

// The arch of `List` with tier `Tier` (void if none).
template <int Tier, class List>
struct with_tier {
  using type = void;
};
template <int Tier, class A, class... Rest>
struct with_tier<Tier, list<A, Rest...>> {
  using type =
      std::conditional_t<A::tier == Tier, A, typename with_tier<Tier, list<Rest...>>::type>;
};

// The archs of `In` that run on family F (its own and the family-less ones), reversed onto
// `Out`: the table lists each family best last, arch::all best first.
template <family F, class Out, class In>
struct best_first {
  using type = Out;
};
template <family F, class... Out, class A, class... Rest>
struct best_first<F, list<Out...>, list<A, Rest...>> {
  static constexpr bool runs = family_of<A> == F || family_of<A> == family::none;
  using type = typename best_first<F, std::conditional_t<runs, list<A, Out...>, list<Out...>>,
                                   list<Rest...>>::type;
};

template <int Tier, class... A>
constexpr int count_tier(list<A...>) {
  return ((A::tier == Tier ? 1 : 0) + ...);
}
template <class... A>
constexpr bool tiers_unique(list<A...> l) {
  return ((count_tier<A::tier>(l) == 1) && ...);
}
static_assert(tiers_unique(table{}), "arch_table.def: two rows with one tier");

}  // namespace detail

/// The best arch the compile flags of this translation unit allow: the row whose tier
/// config/macros.hpp detected (KFUSE_TIER).
using native = detail::with_tier<KFUSE_TIER, detail::table>::type;
static_assert(!std::is_void_v<native>,
              "KFUSE_TIER (config/macros.hpp) names no arch_table.def row");

/// Every arch this target can run, best first.
#if KFUSE_X86 || (!KFUSE_ARM && (defined(__x86_64__) || defined(_M_X64)))
using all = detail::best_first<detail::family::x86, list<>, detail::table>::type;
#else
using all = detail::best_first<detail::family::arm, list<>, detail::table>::type;
#endif

// config/macros.hpp detects the tier with #if on the compiler's predefined macros, so its tier
// numbers and derived macros are written by hand: they must agree with the table.
static_assert(generic::tier == KFUSE_TIER_GENERIC && sse4::tier == KFUSE_TIER_SSE4 &&
                  avx2::tier == KFUSE_TIER_AVX2 && avx2_vnni::tier == KFUSE_TIER_AVX2_VNNI &&
                  avx512::tier == KFUSE_TIER_AVX512 &&
                  avx512_vnni::tier == KFUSE_TIER_AVX512_VNNI &&
                  avx512_bf16::tier == KFUSE_TIER_AVX512_BF16 && neon::tier == KFUSE_TIER_NEON &&
                  neon_dotprod::tier == KFUSE_TIER_NEON_DOTPROD,
              "config/macros.hpp: a KFUSE_TIER_* number differs from arch_table.def");
static_assert(KFUSE_X86 == native::is_x86 && KFUSE_ARM == native::is_arm,
              "config/macros.hpp: KFUSE_X86 / KFUSE_ARM disagree with arch_table.def");
static_assert(KFUSE_X86_INT8_DOT == (native::is_x86 && native::native_int8_dot),
              "config/macros.hpp: KFUSE_X86_INT8_DOT disagrees with arch_table.def");
// The per-ISA namespace is named after the arch (checked on a string literal, not a variable:
// kfuse::arch is shared by the TUs of every tier).
#define KFUSE_DETAIL_STR(x) #x
#define KFUSE_DETAIL_XSTR(x) KFUSE_DETAIL_STR(x)
static_assert(std::string_view{KFUSE_DETAIL_XSTR(KFUSE_ISA_NS)}.substr(0, 4) == "isa_" &&
                  std::string_view{KFUSE_DETAIL_XSTR(KFUSE_ISA_NS)}.substr(4) == native::name,
              "config/macros.hpp: KFUSE_ISA_NS is not isa_<arch::native::name>");
#undef KFUSE_DETAIL_XSTR
#undef KFUSE_DETAIL_STR

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
