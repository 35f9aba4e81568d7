#pragma once
// Building blocks for cheap transcendental stages on simd::vec: p * 2^n and 2^s on a bounded
// range. Each impl gets its best instructions: on AVX-512 (xsimd avx512bw or Highway AVX3 /
// AVX3_DL) vscalefps replaces the integer exponent arithmetic.
//
// Accuracy (float32):
//   pow2_scale    exact (a power-of-two scaling), for integral n in [-126, 127]
//   exp2_bounded  relative error < 3e-7 for s in [-126, 126] (degree-5 minimax fit of 2^f,
//                 |f| <= 1/2, max relative error 7.5e-8 in exact arithmetic)
//   exp2_coarse   relative error < 8e-5, the same on degree 3 (values bound for bf16)
//   erf_fast      absolute error < 4e-7 (measured 3.1e-7 Highway AVX3, 3.7e-7 xsimd avx512bw;
//                 simd::erf: 9e-8 to 1.8e-7) at half simd::erf's cost (xsimd avx512bw),
//                 x P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) is 1 in float32)
//
// Not here on purpose: a vrcp14ps + Newton-step reciprocal. On the Zen 5 this was tuned on it
// is slower than vdivps (gelu_tanh on L2-resident data: 10.4 vs 8.4 cycles per vector).
#include <cmath>
#include <type_traits>

#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE
namespace simd {

namespace fast_math_detail {

template <class I>
struct ops;  // pow2_scale(p, n) on impl registers

template <>
struct ops<scalar_impl> {
  static KFUSE_INLINE float pow2_scale(float p, float n) { return std::ldexp(p, int(n)); }
};

#if KFUSE_TIER != KFUSE_TIER_GENERIC
template <class XA>
struct ops<xsimd_impl<XA>> {
  using I = xsimd_impl<XA>;
  using reg = typename I::reg;
  static KFUSE_INLINE reg pow2_scale(reg p, reg n) {
#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512
    if constexpr (I::lanes == 16) return reg(_mm512_scalef_ps(p, n));
#endif
    using ireg = typename I::ireg;
    const ireg e = (xsimd::to_int(n) + ireg(127)) << 23;
    return p * xsimd::bitwise_cast<reg>(e);
  }
};
#endif

#if KFUSE_WITH_HWY
template <>
struct ops<hwy_impl> {
  using reg = hwy_impl::reg;
  using D = hwy_impl::D;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  static KFUSE_INLINE reg pow2_scale(reg p, reg n) { return reg{_mm512_scalef_ps(p.raw, n.raw)}; }
#else
  static KFUSE_INLINE reg pow2_scale(reg p, reg n) {
    const hn::Rebind<std::int32_t, D> di;
    const auto e = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
    return hn::Mul(p, hn::BitCast(D(), e));
  }
#endif
};
#endif

}  // namespace fast_math_detail

/// p * 2^n for n holding integral values in [-126, 127].
template <class I>
KFUSE_INLINE vec<I> pow2_scale(vec<I> p, vec<I> n) {
  return vec<I>::wrap(fast_math_detail::ops<I>::pow2_scale(p.r, n.r));
}

namespace fast_math_detail {
/// 2^n * poly(s - n), n = round(s): the fraction f = s - n is exact, |f| <= 1/2.
template <class I, class Poly>
KFUSE_INLINE vec<I> exp2_by(vec<I> s, Poly poly) {
  const vec<I> n = simd::round_even(s);
  return pow2_scale(poly(s - n), n);
}
}  // namespace fast_math_detail

/// 2^s for s in [-126, 126] (callers clamp; NaN stays NaN): 2^n * P(s - n), n = round(s).
template <class I>
KFUSE_INLINE vec<I> exp2_bounded(vec<I> s) {
  using V = vec<I>;
  return fast_math_detail::exp2_by(s, [](V f) KFUSE_INLINE_LAMBDA {
    V p = V(1.3276472167819944e-3f);
    p = simd::fma(p, f, V(9.675541331021392e-3f));
    p = simd::fma(p, f, V(5.550713272875391e-2f));
    p = simd::fma(p, f, V(2.402211972396918e-1f));
    p = simd::fma(p, f, V(6.931469670652649e-1f));
    return simd::fma(p, f, V(1.0000000716546416f));
  });
}

/// 2^s for s in [-126, 126] to a relative error < 8e-5 (degree-3 minimax fit of 2^f, |f| <= 1/2,
/// 7.5e-5 in exact arithmetic): for values rounded to bf16 next (2^-9 relative), two FMAs fewer
/// than exp2_bounded.
template <class I>
KFUSE_INLINE vec<I> exp2_coarse(vec<I> s) {
  using V = vec<I>;
  return fast_math_detail::exp2_by(s, [](V f) KFUSE_INLINE_LAMBDA {
    V p = V(5.517161265e-02f);
    p = simd::fma(p, f, V(2.426111698e-01f));
    p = simd::fma(p, f, V(6.932610273e-01f));
    return simd::fma(p, f, V(9.999280572e-01f));
  });
}

/// erf(x) as one rational function: no branches, no exp (GELU's erf: the epilogue of an FFN
/// linear, where xsimd's erf cost as much as a third of the GEMM). Degree 5 over 5 in x^2,
/// fitted to erf on [0, 4] for the least maximum error (Lawson's iteration, 4000 Chebyshev
/// points: 5.4e-8 in exact arithmetic with these float coefficients; the float evaluation adds
/// the rest). NaN propagates: min / max return their second operand when either is NaN.
template <class I>
KFUSE_INLINE vec<I> erf_fast(vec<I> x) {
  using V = vec<I>;
  if constexpr (std::is_same_v<I, scalar_impl>) {
    return simd::erf(x);  // the generic arch keeps std::erf
  } else {
    const V xc = simd::max(V(-4.f), simd::min(V(4.f), x));
    const V t = xc * xc;
    V p = V(2.055637424e-06f);
    p = simd::fma(p, t, V(2.819708316e-04f));
    p = simd::fma(p, t, V(3.664940828e-03f));
    p = simd::fma(p, t, V(5.242048204e-02f));
    p = simd::fma(p, t, V(1.881304830e-01f));
    p = simd::fma(p, t, V(1.128379107e+00f));
    V q = V(3.800523700e-05f);
    q = simd::fma(q, t, V(1.137286075e-03f));
    q = simd::fma(q, t, V(1.476249937e-02f));
    q = simd::fma(q, t, V(1.131446958e-01f));
    q = simd::fma(q, t, V(5.000593066e-01f));
    q = simd::fma(q, t, V(1.f));
    return simd::max(V(-1.f), simd::min(V(1.f), (xc * p) / q));
  }
}

}  // namespace simd
KFUSE_END_NAMESPACE
