#pragma once
// kfuse::simd::vec<I>: the one small vector interface kernels and epilogue stages are written
// against. I is an impl (scalar_impl, xsimd_impl<...>, hwy_impl); vec gives it value semantics,
// operators, math functions found by ADL, and converting (partial) loads and stores.
#include <cstring>
#include <string>
#include <type_traits>

#include "kfuse/arch/tags.hpp"
#include "kfuse/simd/backend.hpp"
#include "kfuse/simd/scalar.hpp"

// Highway 1.0.3's NEON target needs the crypto extension; plain armv8-a gets xsimd only.
#ifndef KFUSE_WITH_HWY
#if KFUSE_TIER == KFUSE_TIER_GENERIC || \
    (KFUSE_ARM && !defined(__ARM_FEATURE_AES) && !defined(__ARM_FEATURE_CRYPTO))
#define KFUSE_WITH_HWY 0
#else
#define KFUSE_WITH_HWY 1
#endif
#endif

#if KFUSE_TIER != KFUSE_TIER_GENERIC
#include "kfuse/simd/xsimd.hpp"
#endif
#if KFUSE_WITH_HWY
#include "kfuse/simd/hwy.hpp"
#endif

KFUSE_BEGIN_NAMESPACE
namespace simd {

template <class I>
struct mask {
  typename I::mreg m;
};

template <class I>
struct vec {
  using impl = I;
  using reg = typename I::reg;
  static constexpr int lanes = I::lanes;
  reg r;

  KFUSE_INLINE vec() = default;
  /// Broadcast: lets stages write `x * 0.5f` or `max(x, 0.f)`.
  KFUSE_INLINE vec(float s) : r(I::set1(s)) {}
  static KFUSE_INLINE vec wrap(reg x) {
    vec v;
    v.r = x;
    return v;
  }

  friend KFUSE_INLINE vec operator+(vec a, vec b) { return wrap(I::add(a.r, b.r)); }
  friend KFUSE_INLINE vec operator-(vec a, vec b) { return wrap(I::sub(a.r, b.r)); }
  friend KFUSE_INLINE vec operator*(vec a, vec b) { return wrap(I::mul(a.r, b.r)); }
  friend KFUSE_INLINE vec operator/(vec a, vec b) { return wrap(I::div(a.r, b.r)); }
  friend KFUSE_INLINE vec operator-(vec a) { return wrap(I::neg(a.r)); }
  vec& operator+=(vec b) { return *this = *this + b; }
  vec& operator*=(vec b) { return *this = *this * b; }
  friend KFUSE_INLINE mask<I> operator<(vec a, vec b) { return {I::lt(a.r, b.r)}; }
  friend KFUSE_INLINE mask<I> operator<=(vec a, vec b) { return {I::le(a.r, b.r)}; }
  friend KFUSE_INLINE mask<I> operator>(vec a, vec b) { return {I::lt(b.r, a.r)}; }
  friend KFUSE_INLINE mask<I> operator>=(vec a, vec b) { return {I::le(b.r, a.r)}; }
};

// Math on vec. Free functions (not hidden friends) so that kfuse code can call them qualified,
// e.g. simd::tanh(x), where a stage of the same name (kfuse::tanh) would hide them.

/// a * b + c, fused where the target has FMA.
template <class I>
KFUSE_INLINE vec<I> fma(vec<I> a, vec<I> b, vec<I> c) {
  return vec<I>::wrap(I::fma(a.r, b.r, c.r));
}
/// min / max: with a NaN operand the x86 and scalar impls return b (minps / maxps), NEON
/// returns NaN. Write max(lo, x) where a NaN x must survive, max(x, lo) where it must not:
/// the operand order is free, a NaN check is not (docs/robustness.md, NaN and Inf).
template <class I>
KFUSE_INLINE vec<I> min(vec<I> a, vec<I> b) {
  return vec<I>::wrap(I::min(a.r, b.r));
}
template <class I>
KFUSE_INLINE vec<I> max(vec<I> a, vec<I> b) {
  return vec<I>::wrap(I::max(a.r, b.r));
}
/// min(max(x, lo), hi) with x last in both: clamp(NaN) is NaN, as in PyTorch.
template <class I>
KFUSE_INLINE vec<I> clamp(vec<I> x, vec<I> lo, vec<I> hi) {
  return min(hi, max(lo, x));
}
template <class I>
KFUSE_INLINE vec<I> abs(vec<I> a) {
  return vec<I>::wrap(I::abs(a.r));
}
template <class I>
KFUSE_INLINE vec<I> exp(vec<I> a) {
  return vec<I>::wrap(I::exp(a.r));
}
template <class I>
KFUSE_INLINE vec<I> tanh(vec<I> a) {
  return vec<I>::wrap(I::tanh(a.r));
}
template <class I>
KFUSE_INLINE vec<I> erf(vec<I> a) {
  return vec<I>::wrap(I::erf(a.r));
}
template <class I>
KFUSE_INLINE vec<I> floor(vec<I> a) {
  return vec<I>::wrap(I::floor(a.r));
}
template <class I>
KFUSE_INLINE vec<I> ceil(vec<I> a) {
  return vec<I>::wrap(I::ceil(a.r));
}
template <class I>
KFUSE_INLINE vec<I> sqrt(vec<I> a) {
  return vec<I>::wrap(I::sqrt(a.r));
}
/// Natural log with std::log's special values (0 -> -Inf, x < 0 and NaN -> NaN, Inf -> Inf).
template <class I>
KFUSE_INLINE vec<I> log(vec<I> a) {
  return vec<I>::wrap(I::log(a.r));
}
/// Nearest integer, ties to even.
template <class I>
KFUSE_INLINE vec<I> round_even(vec<I> a) {
  return vec<I>::wrap(I::round_even(a.r));
}
template <class I>
KFUSE_INLINE vec<I> select(mask<I> m, vec<I> a, vec<I> b) {
  return vec<I>::wrap(I::select(m.m, a.r, b.r));
}

/// Loads `vec::lanes` values of storage type T from p, converted to f32.
template <class V, class T>
KFUSE_INLINE V load(const T* p) {
  return V::wrap(V::impl::template load<T>(p));
}

/// Every second float of the 2 * lanes from p: lane i = p[2i] (load_even) or p[2i + 1]
/// (load_odd). Reads exactly p[0 .. 2 * lanes).
template <class V>
KFUSE_INLINE V load_even(const float* p) {
  return V::wrap(V::impl::load_even(p));
}
template <class V>
KFUSE_INLINE V load_odd(const float* p) {
  return V::wrap(V::impl::load_odd(p));
}

/// Whether impl I has masked f32 partial loads and stores (x86 AVX2 / AVX-512 xsimd).
template <class I>
inline constexpr bool has_partial_f32 = false;
template <class I>
requires(I::has_partial_f32) inline constexpr bool has_partial_f32<I> = true;

/// Lane i = p[i] where bit i of `bits` is set, fill's lane i elsewhere: only the set lanes are
/// read (f32; the impls with masked loads, has_partial_f32).
template <class V>
requires(has_partial_f32<typename V::impl>) KFUSE_INLINE V
    load_masked(const float* p, unsigned bits, V fill) {
  return V::wrap(V::impl::load_masked_f32(p, bits, fill.r));
}

/// Every second lane of the 2 * lanes of (a, b): lane i = (a, b)[2i] (even_lanes) or
/// (a, b)[2i + 1] (odd_lanes). The impls with masked loads (x86).
template <class V>
requires(has_partial_f32<typename V::impl>) KFUSE_INLINE V even_lanes(V a, V b) {
  return V::wrap(V::impl::even_lanes(a.r, b.r));
}
template <class V>
requires(has_partial_f32<typename V::impl>) KFUSE_INLINE V odd_lanes(V a, V b) {
  return V::wrap(V::impl::odd_lanes(a.r, b.r));
}

/// Lane i = a[i + 1], the last lane = c[0]: (a, c) slid down by one lane (the third tap of a
/// stride-2 window from its even lanes). The impls with masked loads (x86).
template <class V>
requires(has_partial_f32<typename V::impl>) KFUSE_INLINE V next_lane(V a, V c) {
  return V::wrap(V::impl::next_lane(a.r, c.r));
}

/// max(a, b), NaN when either is NaN (max pooling keeps a NaN once seen, as PyTorch's does).
template <class V>
KFUSE_INLINE V max_keep_nan(V a, V b) {
  return select(a <= a, max(a, b), a);  // a is NaN: a; else max(a, b) returns b when b is NaN
}

/// Loads the first n (< lanes) values; the other lanes are zero. Never reads past p + n.
template <class V, class T>
KFUSE_INLINE V load_partial(const T* p, int n) {
  if constexpr (std::is_same_v<T, float> && has_partial_f32<typename V::impl>) {
    return V::wrap(V::impl::load_partial_f32(p, n));
  } else if constexpr (V::lanes == 1) {
    // An element copy: g++ cannot bound the memcpy below for a one-value buffer and warns
    // about it (-Wstringop-overread) in every kernel of the scalar backend.
    return n > 0 ? load<V>(p) : V(0.f);
  } else {
    alignas(64) T tmp[V::lanes] = {};
    std::memcpy(tmp, p, sizeof(T) * std::size_t(n));
    return load<V>(tmp);
  }
}

/// Stores all lanes to p, converted to T (integers: round half to even, saturate).
template <class T, class V>
KFUSE_INLINE void store(T* p, V v) {
  V::impl::template store<T>(p, v.r);
}

/// Stores the first n lanes. Never writes past p + n.
template <class T, class V>
KFUSE_INLINE void store_partial(T* p, V v, int n) {
  if constexpr (std::is_same_v<T, float> && has_partial_f32<typename V::impl>) {
    V::impl::store_partial_f32(p, v.r, n);
  } else if constexpr (V::lanes == 1) {  // an element copy, as in load_partial
    if (n > 0) store(p, v);
  } else {
    alignas(64) T tmp[V::lanes];
    store(tmp, v);
    std::memcpy(p, tmp, sizeof(T) * std::size_t(n));
  }
}

/// Stores all lanes to p as T for a dot-product operand (a bf16 GEMM panel, attention's bf16
/// probabilities) or a kernel's activation output (register_tile.hpp's store_each): like store,
/// except that where the arch converts f32 -> bf16 in hardware (AVX512-BF16: vcvtneps2bf16)
/// that instruction is used, and it flushes denormals to zero, as vdpbf16ps does with its inputs
/// anyway. One instruction instead of the ~6 of the bit-exact rounding; where a denormal must
/// survive (a conversion the user asked for), use store.
template <class T, class V>
KFUSE_INLINE void store_dot(T* p, V v) {
  if constexpr (requires { V::impl::store_dot(p, v.r); })
    V::impl::store_dot(p, v.r);
  else
    store(p, v);
}

/// Stores 2 * lanes values as T, interleaved: p[2i] = even's lane i, p[2i + 1] = odd's lane i
/// (the k pairs of a bf16 GEMM panel, G = 2); converted as store_dot converts.
template <class T, class V>
KFUSE_INLINE void store_dot_pairs(T* p, V even, V odd) {
  if constexpr (requires { V::impl::store_dot_pairs(p, even.r, odd.r); }) {
    V::impl::store_dot_pairs(p, even.r, odd.r);
  } else {
    alignas(64) T e[V::lanes], o[V::lanes];
    store_dot(e, even);
    store_dot(o, odd);
    for (int i = 0; i < V::lanes; ++i) {
      p[2 * i] = e[i];
      p[2 * i + 1] = o[i];
    }
  }
}

/// Rounds every lane to the precision of storage type T and back (cast<bf16> and friends).
template <class T, class V>
KFUSE_INLINE V round_to(V v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    alignas(64) T tmp[V::lanes];
    store(tmp, v);
    return load<V>(tmp);
  }
}

/// The impl that runs arch A with backend B in this translation unit.
template <class A, class B>
struct impl_for {
  static_assert(compiled_here<A>,
                "kfuse: code for this arch must be compiled in a translation unit built for it "
                "(its -march flags; CMake: kfuse_add_arch_sources). Only arch::native (the TU's "
                "own arch) and arch::generic can be instantiated here.");
  using type = scalar_impl;
};

#if KFUSE_TIER != KFUSE_TIER_GENERIC
template <class B>
struct impl_for<arch::native, B> {
  static_assert(std::is_same_v<B, backend::xsimd> || std::is_same_v<B, backend::hwy>,
                "kfuse: unknown backend tag (use kfuse::backend::xsimd or kfuse::backend::hwy)");
#if KFUSE_WITH_HWY
  static constexpr bool hwy_width_ok = hwy_impl::vector_bytes == arch::native::vector_bytes;
  static_assert(!std::is_same_v<B, backend::hwy> || hwy_width_ok ||
                    std::is_same_v<arch::native, arch::sse4>,
                "kfuse: Highway's static target in this TU is narrower than the arch (Highway "
                "1.0.3's AVX2/AVX3 need -maes -mpclmul when Highway is included before kfuse; "
                "see docs/toolchain.md)");
  using type = std::conditional_t<std::is_same_v<B, backend::hwy>, hwy_impl,
                                  xsimd_impl<typename xsimd_arch_for<arch::native>::type>>;
#else
  static_assert(!std::is_same_v<B, backend::hwy>,
                "kfuse: the Highway backend is not available in this TU (Highway 1.0.3's NEON "
                "target needs +crypto, see docs/toolchain.md); use kfuse::backend::xsimd");
  using type = xsimd_impl<typename xsimd_arch_for<arch::native>::type>;
#endif
};
#endif

/// True when backend B can run arch A in this TU (for tests that loop over backends).
template <class A, class B>
inline constexpr bool backend_available = compiled_here<A> &&
                                          (std::is_same_v<B, backend::xsimd> || KFUSE_WITH_HWY ||
                                           std::is_same_v<A, arch::generic>);

template <class A, class B>
using vec_for = vec<typename impl_for<A, B>::type>;

/// "xsimd:avx512bw", "hwy:AVX3_DL", "scalar": what a kernel instantiated for (A, B) runs on.
template <class A, class B>
inline const char* impl_name() {
  if constexpr (std::is_same_v<typename impl_for<A, B>::type, scalar_impl>) {
    return "scalar";
  } else if constexpr (std::is_same_v<B, backend::hwy>) {
    // Named through impl_for (a dependent name): hwy_impl does not exist in generic TUs.
    static const std::string name = std::string("hwy:") + std::string(impl_for<A, B>::type::name());
    return name.c_str();
  } else {
    static const std::string name =
        std::string("xsimd:") + std::string(impl_for<A, B>::type::name());
    return name.c_str();
  }
}

}  // namespace simd
KFUSE_END_NAMESPACE
