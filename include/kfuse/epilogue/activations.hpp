#pragma once
// Activation stages. Each formula is in the comment above the stage; every body is written once
// on simd::vec and serves every arch and backend.
#include "kfuse/epilogue/stage.hpp"
#include "kfuse/simd/fast_math.hpp"

namespace kfuse {

/// y = max(x, 0); relu(NaN) = NaN (max(0, x): the x86 max returns its second operand on NaN)
struct relu {
  static constexpr std::string_view name{"relu"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::max(V(0.f), x);
  }
};

/// y = x > 0 ? x : alpha * x
struct leaky_relu {
  static constexpr std::string_view name{"leaky_relu"};
  float alpha = 0.01f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::select(x > V(0.f), x, x * V(alpha));
  }
};

/// y = min(max(x, lo), hi); relu6 is clamp{0, 6}; clamp(NaN) = NaN (simd::clamp)
struct clamp {
  static constexpr std::string_view name{"clamp"};
  float lo = 0.f;
  float hi = 6.f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::clamp(x, V(lo), V(hi));
  }
  template <class Check>
  void validate(const Check& c) const {
    if (!(lo <= hi)) c.fail("lo must not exceed hi");
  }
};

namespace detail {
/// 1 / (1 + exp(-x)) as 1 / (1 + 2^s), s = -x log2(e), with the bounded exp2 of
/// simd/fast_math.hpp (relative error < 3e-7; xsimd's full-range exp made a SiLU epilogue 7x
/// the cost of the 3x3 depthwise conv it ended). s is clamped to [-126, 126] with the NaN kept
/// (max(lo, s)); beyond 126 (x < -87.3, where the result is below 2^-126) the result is 0.
template <class V>
KFUSE_INLINE V fast_sigmoid(V x) {
  const V s = x * V(-1.4426950408889634f);
  const V e = simd::exp2_bounded(simd::min(V(126.f), simd::max(V(-126.f), s)));
  return simd::select(s > V(126.f), V(0.f), V(1.f) / (V(1.f) + e));
}

/// x * sigmoid(x) as x / (1 + 2^s): one rounding and one multiply fewer than x * fast_sigmoid(x)
/// (the FMA pipes bound a SiLU epilogue: 13% less time per vector with the scale and bias,
/// Zen 5). Beyond s = 126 it is x - x: 0, and NaN for -inf as x * 0 was. Coarse: exp2_coarse
/// (8e-5 relative), for values rounded to bf16 or int8 next: 12% less again.
template <bool Coarse = false, class V>
KFUSE_INLINE V fast_silu(V x) {
  const V s = x * V(-1.4426950408889634f);
  const V c = simd::min(V(126.f), simd::max(V(-126.f), s));
  const V e = Coarse ? simd::exp2_coarse(c) : simd::exp2_bounded(c);
  return simd::select(s > V(126.f), x - x, x / (V(1.f) + e));
}
}  // namespace detail

/// y = 1 / (1 + exp(-x))
struct sigmoid {
  static constexpr std::string_view name{"sigmoid"};
  static constexpr int cost = 6;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return detail::fast_sigmoid(x);
  }
};

/// y = x * sigmoid(x)  (swish); silu(-inf) = -inf * 0 = NaN, as in PyTorch
struct silu {
  static constexpr std::string_view name{"silu"};
  static constexpr int cost = 6;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return detail::fast_silu(x);
  }
};

/// y = tanh(x)
struct tanh {
  static constexpr std::string_view name{"tanh"};
  static constexpr int cost = 10;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::tanh(x);
  }
};

/// y = x/2 * (1 + erf(x / sqrt(2)))  (exact GELU), erf as one rational function
/// (simd::erf_fast: absolute error < 4e-7, so y is within 2e-7 |x| of exact)
struct gelu_erf {
  static constexpr std::string_view name{"gelu_erf"};
  static constexpr int cost = 8;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    const V half_x = x * V(0.5f);
    return simd::fma(half_x, simd::erf_fast(x * V(0.70710678118654752f)), half_x);
  }
};

/// y = x/2 * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 x^3)
/// computed as x / (1 + 2^s), s = -2u log2(e): the same function with one exp2 and no tanh
/// (simd/fast_math.hpp: a degree-5 polynomial and vscalefps on AVX-512). x is clamped at -9
/// first, where |gelu| < 2e-28 (so s stays below 96 and 2^s finite for any x; gelu(-inf) is a
/// tiny negative number instead of NaN), and s at -126 (x -> +inf).
struct gelu_tanh {
  static constexpr std::string_view name{"gelu_tanh"};
  static constexpr int cost = 6;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    constexpr float k = -2.f * 0.7978845608028654f * 1.4426950408889634f;  // -2 sqrt(2/pi) log2(e)
    const V xc = simd::max(V(-9.f), x);  // max(lo, x): a NaN x survives
    const V s = simd::max(V(-126.f), xc * simd::fma(xc * xc, V(k * 0.044715f), V(k)));
    return xc / (V(1.f) + simd::exp2_bounded(s));
  }
};

/// y = x * clamp(x + 3, 0, 6) / 6, the gate scaled first so that x * gate cannot overflow
/// (hardswish(FLT_MAX) = FLT_MAX; PyTorch's x * relu6(x + 3) / 6 gives inf there)
struct hardswish {
  static constexpr std::string_view name{"hardswish"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return x * (simd::clamp(x + V(3.f), V(0.f), V(6.f)) * V(1.f / 6.f));
  }
};

/// y = clamp(x / 6 + 1/2, 0, 1)  (PyTorch's definition)
struct hardsigmoid {
  static constexpr std::string_view name{"hardsigmoid"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::clamp(simd::fma(x, V(1.f / 6.f), V(0.5f)), V(0.f), V(1.f));
  }
};

}  // namespace kfuse
