#pragma once
// erf for impls whose library has none (Highway 1.0.3), written on the impl's own ops.
//
// |x| < 0.5: the Maclaurin series to x^15 (truncation < 1e-9 relative).
// |x| >= 0.5: erf = 1 - t*exp(-x^2 + P(t)), t = 1/(1 + |x|/2), with the published Chebyshev
// fit for erfc (W. H. Press et al., Numerical Recipes, 6.2: fractional error < 1.2e-7).
// Measured against std::erf in double over [-6, 6], step 1e-5 (tests/simd/vec_test.cpp): max abs
// error 1.6e-7 with FMA (Highway AVX2 / AVX3), 1.8e-7 without (SSE4); the test asserts < 3e-7.
KFUSE_BEGIN_NAMESPACE
namespace simd {

template <class I>
KFUSE_INLINE typename I::reg erf_from_exp(typename I::reg x) {
  using reg = typename I::reg;
  const reg ax = I::abs(x);
  // Series: erf(x) = 2/sqrt(pi) * x * sum_n (-1)^n x^(2n) / (n! (2n+1))
  const reg x2 = I::mul(x, x);
  reg s = I::set1(-1.0f / 75600.0f);  // n = 7: 1/(7! * 15)
  s = I::fma(s, x2, I::set1(1.0f / 9360.0f));
  s = I::fma(s, x2, I::set1(-1.0f / 1320.0f));
  s = I::fma(s, x2, I::set1(1.0f / 216.0f));
  s = I::fma(s, x2, I::set1(-1.0f / 42.0f));
  s = I::fma(s, x2, I::set1(1.0f / 10.0f));
  s = I::fma(s, x2, I::set1(-1.0f / 3.0f));
  s = I::fma(s, x2, I::set1(1.0f));
  const reg small = I::mul(I::mul(s, x), I::set1(1.1283791670955126f));

  const reg t = I::div(I::set1(1.0f), I::fma(ax, I::set1(0.5f), I::set1(1.0f)));
  reg p = I::set1(0.17087277f);
  p = I::fma(p, t, I::set1(-0.82215223f));
  p = I::fma(p, t, I::set1(1.48851587f));
  p = I::fma(p, t, I::set1(-1.13520398f));
  p = I::fma(p, t, I::set1(0.27886807f));
  p = I::fma(p, t, I::set1(-0.18628806f));
  p = I::fma(p, t, I::set1(0.09678418f));
  p = I::fma(p, t, I::set1(0.37409196f));
  p = I::fma(p, t, I::set1(1.00002368f));
  p = I::fma(p, t, I::set1(-1.26551223f));
  const reg erfc = I::mul(t, I::exp(I::sub(p, x2)));
  const reg big_abs = I::sub(I::set1(1.0f), erfc);
  const reg big = I::select(I::lt(x, I::set1(0.0f)), I::neg(big_abs), big_abs);
  return I::select(I::lt(ax, I::set1(0.5f)), small, big);
}

}  // namespace simd
KFUSE_END_NAMESPACE
