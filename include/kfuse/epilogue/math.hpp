#pragma once
// Math stages: the unary functions and the binary operators of a second tensor that ONNX models
// apply elementwise (Exp, Log, Sqrt, Elu, Pow, Div, Max, PRelu...). They live in kfuse::math so
// that their names (exp, log, max, pow...) never hide std:: or simd:: functions of the same name
// in kfuse code or in a user's `using namespace kfuse`.
//
// Special values follow std:: / IEEE (log(0) = -Inf, sqrt(-1) = NaN, pow(-8, 1/3) = NaN) and a
// NaN input gives NaN, except where the standard says otherwise (pow(x, 0) = pow(1, y) = 1).
#include <limits>

#include "kfuse/epilogue/affine.hpp"

namespace kfuse::math {

namespace detail {
inline constexpr float inf_f = std::numeric_limits<float>::infinity();

/// exp(x) - 1 without the cancellation of the difference near 0 (Kahan: (u - 1) * x / log(u),
/// u = exp(x), is exact to a few ulp where u - 1 is not); for the negative branches of elu,
/// celu and selu, so x <= 0 is what matters: u = 0 gives -1, u = 1 gives x.
template <class V>
KFUSE_INLINE V expm1(V x) {
  const V u = simd::exp(x);
  const V r = (u - V(1.f)) * (x / simd::log(u));
  // Below e^-23 the result is -1 in float (and a denormal u has no accurate log).
  return simd::select(u < V(1.f), simd::select(V(1e-10f) < u, r, V(-1.f)),
                      simd::select(V(1.f) < u, simd::select(u < V(inf_f), r, u), x));
}

/// log(1 + e) for e >= 0 without losing a tiny e (Goldberg: log(u) * e / (u - 1), u = 1 + e).
template <class V>
KFUSE_INLINE V log1p_pos(V e) {
  const V u = V(1.f) + e;
  const V d = u - V(1.f);
  return simd::select(V(0.f) < d, simd::log(u) * (e / d), e);
}

/// a == b as a mask-free select (simd::vec has only ordered compares).
template <class V>
KFUSE_INLINE V select_eq(V a, V b, V if_eq, V otherwise) {
  return simd::select(a <= b, simd::select(b <= a, if_eq, otherwise), otherwise);
}

/// x^y for every x and y with std::pow's special values: exp(y log|x|), the sign of x kept for
/// an odd integer y, NaN for x < 0 and a non-integer y. Relative error about |y log x| 2^-23.
template <class V>
KFUSE_INLINE V pow(V x, V y) {
  const V l = simd::log(simd::abs(x));
  // |x| = 1: 1 even for y = +-Inf (where y * 0 is NaN).
  const V t = select_eq(l, V(0.f), V(0.f), y * l);
  const V r = simd::exp(t);
  const V half = y * V(0.5f);
  const V odd_signed = simd::select(simd::floor(half) < half, -r, r);  // y is an odd integer
  const V nan = V(std::numeric_limits<float>::quiet_NaN());
  // A non-integer y: NaN for a finite x < 0; r for -Inf and -0 (their C results).
  const V not_int = simd::select(x < V(-3.4028235e38f), r, simd::select(x < V(0.f), nan, r));
  const V negative = simd::select(y <= simd::floor(y), odd_signed, not_int);
  const V v =  // 1 / x < 0 catches -0
      simd::select(x < V(0.f), negative, simd::select(V(1.f) / x < V(0.f), negative, r));
  return select_eq(y, V(0.f), V(1.f), select_eq(x, V(1.f), V(1.f), select_eq(y, V(1.f), x, v)));
}
}  // namespace detail

/// y = e^x
struct exp {
  static constexpr std::string_view name{"exp"};
  static constexpr int cost = 8;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::exp(x);
  }
};

/// y = ln(x)
struct log {
  static constexpr std::string_view name{"log"};
  static constexpr int cost = 8;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::log(x);
  }
};

/// y = sqrt(x)
struct sqrt {
  static constexpr std::string_view name{"sqrt"};
  static constexpr int cost = 4;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::sqrt(x);
  }
};

/// y = 1 / x
struct reciprocal {
  static constexpr std::string_view name{"reciprocal"};
  static constexpr int cost = 4;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return V(1.f) / x;
  }
};

/// y = |x|
struct abs {
  static constexpr std::string_view name{"abs"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::abs(x);
  }
};

/// y = the largest integer <= x
struct floor {
  static constexpr std::string_view name{"floor"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::floor(x);
  }
};

/// y = the smallest integer >= x
struct ceil {
  static constexpr std::string_view name{"ceil"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::ceil(x);
  }
};

/// y = the nearest integer, ties to even (ONNX Round)
struct round {
  static constexpr std::string_view name{"round"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::round_even(x);
  }
};

/// y = 1 for x > 0, -1 for x < 0, x for 0 and NaN
struct sign {
  static constexpr std::string_view name{"sign"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::select(V(0.f) < x, V(1.f), simd::select(x < V(0.f), V(-1.f), x));
  }
};

/// y = erf(x)
struct erf {
  static constexpr std::string_view name{"erf"};
  static constexpr int cost = 10;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::erf(x);
  }
};

/// y = ln(1 + e^x), as max(x, 0) + ln(1 + e^-|x|): no overflow, no loss for very negative x
struct softplus {
  static constexpr std::string_view name{"softplus"};
  static constexpr int cost = 16;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::max(V(0.f), x) + detail::log1p_pos(simd::exp(-simd::abs(x)));
  }
};

/// y = x / (1 + |x|)
struct softsign {
  static constexpr std::string_view name{"softsign"};
  static constexpr int cost = 4;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return x / (V(1.f) + simd::abs(x));
  }
};

/// y = x * tanh(softplus(x))
struct mish {
  static constexpr std::string_view name{"mish"};
  static constexpr int cost = 24;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& c) const {
    return x * simd::tanh(softplus{}(x, c));
  }
};

/// y = x > 0 ? x : alpha * (e^x - 1)
struct elu {
  static constexpr std::string_view name{"elu"};
  static constexpr int cost = 12;
  float alpha = 1.f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::select(V(0.f) < x, x, V(alpha) * detail::expm1(simd::min(V(0.f), x)));
  }
};

/// y = max(0, x) + min(0, alpha * (e^(x / alpha) - 1))
struct celu {
  static constexpr std::string_view name{"celu"};
  static constexpr int cost = 12;
  float alpha = 1.f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    const V neg = V(alpha) * detail::expm1(simd::min(V(0.f), x / V(alpha)));
    return simd::select(V(0.f) < x, x, neg);
  }
  template <class Check>
  void validate(const Check& c) const {
    if (!(alpha != 0.f)) c.fail("alpha must not be 0");
  }
};

/// y = gamma * (x > 0 ? x : alpha * (e^x - 1))
struct selu {
  static constexpr std::string_view name{"selu"};
  static constexpr int cost = 12;
  float alpha = 1.67326319217681884765625f;
  float gamma = 1.05070102214813232421875f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return V(gamma) * simd::select(V(0.f) < x, x, V(alpha) * detail::expm1(simd::min(V(0.f), x)));
  }
};

/// y = x^exponent for a constant exponent (2, 3, 0.5, 1, -1 exactly; others through exp / log)
struct power {
  static constexpr std::string_view name{"power"};
  static constexpr int cost = 16;
  float exponent = 2.f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    if (exponent == 2.f) return x * x;
    if (exponent == 1.f) return x;
    if (exponent == 3.f) return x * x * x;
    if (exponent == 0.5f)  // pow's values at -Inf (+Inf) and -0 (+0), not sqrt's
      return simd::select(x < V(-3.4028235e38f), V(detail::inf_f), simd::sqrt(x) + V(0.f));
    if (exponent == -1.f) return V(1.f) / x;
    return detail::pow(x, V(exponent));
  }
};

// ---- binary: x (op) a second tensor (same shape as the output, or one value per channel) ------

namespace detail {
/// The body of every binary stage: Op::apply(x, the operand at the lanes' positions).
template <class Op, class E>
struct binary_stage : kfuse::stage_detail::second_tensor<E> {
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return Op::apply(x, this->template operand<V>(ctx));
  }
};
}  // namespace detail

/// y = x / other
template <class E = f32>
struct div : detail::binary_stage<div<E>, E> {
  static constexpr std::string_view name{"div"};
  static constexpr int cost = 4;
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return x / y;
  }
};

/// y = max(x, other); NaN if either is NaN (NumPy's maximum, ONNX Max)
template <class E = f32>
struct max : detail::binary_stage<max<E>, E> {
  static constexpr std::string_view name{"max"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return simd::select(y <= y, simd::max(y, x), y);  // max(y, x) keeps a NaN x
  }
};

/// y = min(x, other); NaN if either is NaN
template <class E = f32>
struct min : detail::binary_stage<min<E>, E> {
  static constexpr std::string_view name{"min"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return simd::select(y <= y, simd::min(y, x), y);
  }
};

/// y = x^other (std::pow's special values)
template <class E = f32>
struct pow : detail::binary_stage<pow<E>, E> {
  static constexpr std::string_view name{"pow"};
  static constexpr int cost = 20;
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return detail::pow(x, y);
  }
};

/// y = x < 0 ? x * slope : x, the slope from the second tensor (ONNX PRelu: usually per channel)
template <class E = f32>
struct prelu : detail::binary_stage<prelu<E>, E> {
  static constexpr std::string_view name{"prelu"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V slope) {
    return simd::select(x < V(0.f), x * slope, x);
  }
};

// ---- comparisons and logic: 1.0 for true, 0.0 for false (a bool tensor as f32) ---------------

namespace detail {
template <class V>
KFUSE_INLINE V truth(decltype(V(0.f) < V(0.f)) m) {
  return simd::select(m, V(1.f), V(0.f));
}
/// 1 where x != 0 (NaN included, as C's truth), else 0
template <class V>
KFUSE_INLINE V nonzero(V x) {
  return simd::select(x <= V(0.f), simd::select(V(0.f) <= x, V(0.f), V(1.f)), V(1.f));
}
}  // namespace detail

/// y = x == other (false where either is NaN)
template <class E = f32>
struct equal : detail::binary_stage<equal<E>, E> {
  static constexpr std::string_view name{"equal"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return simd::select(x <= y, detail::truth<V>(y <= x), V(0.f));
  }
};

/// y = x < other
template <class E = f32>
struct less : detail::binary_stage<less<E>, E> {
  static constexpr std::string_view name{"less"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return detail::truth<V>(x < y);
  }
};

/// y = x <= other
template <class E = f32>
struct less_equal : detail::binary_stage<less_equal<E>, E> {
  static constexpr std::string_view name{"less_equal"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return detail::truth<V>(x <= y);
  }
};

/// y = x > other
template <class E = f32>
struct greater : detail::binary_stage<greater<E>, E> {
  static constexpr std::string_view name{"greater"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return detail::truth<V>(y < x);
  }
};

/// y = x >= other
template <class E = f32>
struct greater_equal : detail::binary_stage<greater_equal<E>, E> {
  static constexpr std::string_view name{"greater_equal"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return detail::truth<V>(y <= x);
  }
};

/// y = x && other (each true where != 0)
template <class E = f32>
struct logical_and : detail::binary_stage<logical_and<E>, E> {
  static constexpr std::string_view name{"logical_and"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return detail::nonzero(x) * detail::nonzero(y);
  }
};

/// y = x || other
template <class E = f32>
struct logical_or : detail::binary_stage<logical_or<E>, E> {
  static constexpr std::string_view name{"logical_or"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return simd::max(detail::nonzero(x), detail::nonzero(y));
  }
};

/// y = x != other as truth values
template <class E = f32>
struct logical_xor : detail::binary_stage<logical_xor<E>, E> {
  static constexpr std::string_view name{"logical_xor"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V y) {
    return simd::abs(detail::nonzero(x) - detail::nonzero(y));
  }
};

/// y = !x (1 where x == 0)
struct logical_not {
  static constexpr std::string_view name{"logical_not"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return V(1.f) - detail::nonzero(x);
  }
};

/// y = other != 0 ? x : 0 (with keep_unless and an add: ONNX Where(c, a, b) exactly, Inf and
/// NaN included, as keep_if(a, c) + keep_unless(b, c))
template <class E = f32>
struct keep_if : detail::binary_stage<keep_if<E>, E> {
  static constexpr std::string_view name{"keep_if"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V c) {
    return simd::select(detail::nonzero(c) < V(0.5f), V(0.f), x);
  }
};

/// y = other == 0 ? x : 0
template <class E = f32>
struct keep_unless : detail::binary_stage<keep_unless<E>, E> {
  static constexpr std::string_view name{"keep_unless"};
  template <class V>
  static KFUSE_INLINE V apply(V x, V c) {
    return simd::select(detail::nonzero(c) < V(0.5f), x, V(0.f));
  }
};

}  // namespace kfuse::math
