#pragma once
// Building blocks for cheap transcendental stages on simd::vec: p * 2^n and 2^s on a bounded
// range. Each impl gets its best instructions: on AVX-512 (xsimd avx512bw or Highway AVX3 /
// AVX3_DL) vscalefps replaces the integer exponent arithmetic.
//
// Accuracy (float32):
//   pow2_scale    exact (a power-of-two scaling), for integral n in [-126, 127]
//   exp2_bounded  relative error < 3e-7 for s in [-126, 126] (degree-5 minimax fit of 2^f,
//                 |f| <= 1/2, max relative error 7.5e-8 in exact arithmetic)
//
// Not here on purpose: a vrcp14ps + Newton-step reciprocal. On the Zen 5 this was tuned on it
// is slower than vdivps (gelu_tanh on L2-resident data: 10.4 vs 8.4 cycles per vector).
#include <cmath>

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

/// 2^s for s in [-126, 126] (callers clamp; NaN stays NaN): 2^n * P(s - n), n = round(s).
template <class I>
KFUSE_INLINE vec<I> exp2_bounded(vec<I> s) {
  using V = vec<I>;
  const V n = simd::round_even(s);
  const V f = s - n;  // exact, |f| <= 1/2
  V p = V(1.3276472167819944e-3f);
  p = simd::fma(p, f, V(9.675541331021392e-3f));
  p = simd::fma(p, f, V(5.550713272875391e-2f));
  p = simd::fma(p, f, V(2.402211972396918e-1f));
  p = simd::fma(p, f, V(6.931469670652649e-1f));
  p = simd::fma(p, f, V(1.0000000716546416f));
  return pow2_scale(p, n);
}

}  // namespace simd
KFUSE_END_NAMESPACE
