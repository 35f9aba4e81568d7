#pragma once
// Type-changing stages: cast, quantize, dequantize, requantize. A stage with `output_elem`
// decides the storage type the kernel writes (the last such stage of an epilogue wins).
#include <cmath>

#include "kfuse/epilogue/stage.hpp"
#include "kfuse/types/quant_params.hpp"

namespace kfuse {

namespace stage_detail {
/// Zero points must lie in [lo, hi]: the range of the integer type they belong to.
template <class Check>
void validate_zero_point(const Check& c, std::int32_t z, std::int32_t lo, std::int32_t hi) {
  if (z < lo || z > hi)
    c.fail("zero point " + std::to_string(z) + " is outside the integer type's range [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]");
}
template <class Check>
void validate_quant(const Check& c, const quant_params& q, std::int32_t zlo, std::int32_t zhi) {
  if (q.scales.empty()) {
    if (!(q.scale > 0.f) || !std::isfinite(q.scale)) c.fail("scale must be positive and finite");
    validate_zero_point(c, q.zero_point, zlo, zhi);
    return;
  }
  c.expect_data(q.scales.data(), q.scales.size(), "scales");
  c.expect_data(q.zero_points.data(), q.zero_points.size(), "zero points");
  c.expect_per_channel(index_t(q.scales.size()), "scales");
  if (!q.zero_points.empty() && q.zero_points.size() != q.scales.size())
    c.fail(std::to_string(q.zero_points.size()) + " zero points for " +
           std::to_string(q.scales.size()) + " scales");
  for (float s : q.scales)
    if (!(s > 0.f) || !std::isfinite(s)) c.fail("every scale must be positive and finite");
  for (std::int32_t z : q.zero_points) validate_zero_point(c, z, zlo, zhi);
  if (q.zero_points.empty()) validate_zero_point(c, q.zero_point, zlo, zhi);
}
template <class E, class Check>
void validate_quant(const Check& c, const quant_params& q) {
  validate_quant(c, q, std::int32_t(elem_traits<E>::min), std::int32_t(elem_traits<E>::max));
}

template <class V, class Ctx>
KFUSE_INLINE V quant_scale(const quant_params& q, const Ctx& ctx) {
  return q.scales.empty() ? V(q.scale) : ctx.channel_param(q.scales.data());
}
template <class V, class Ctx>
KFUSE_INLINE V quant_zero_point(const quant_params& q, const Ctx& ctx) {
  if (q.scales.empty() || q.zero_points.empty()) return V(float(q.zero_point));
  return ctx.channel_param(q.zero_points.data());
}
/// Clamps to E's range. A NaN stays NaN on every impl (r is the second operand: minps / maxps
/// return it when unordered), so the integer store maps it to 0 as from_float does.
template <class E, class V>
KFUSE_INLINE V saturate(V r) {
  return simd::min(V(float(elem_traits<E>::max)), simd::max(V(float(elem_traits<E>::min)), r));
}
}  // namespace stage_detail

/// Rounds to E's precision (ties to even) and makes E the output type. Float types only.
template <class E>
struct cast {
  static_assert(elem_traits<E>::is_float,
                "kfuse::cast<E> is for float types (f32, f16, bf16); use quantize<E> or "
                "requantize<E> to produce integers");
  static constexpr std::string_view name{"cast"};
  using output_elem = E;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return simd::round_to<storage_t<E>>(x);
  }
};

/// q = clamp(round_half_even(x / scale) + zero_point, E's range); output type E.
template <class E>
struct quantize {
  static_assert(elem_traits<E>::is_quantized, "kfuse::quantize<E> needs E = i8 or u8");
  static constexpr std::string_view name{"quantize"};
  static constexpr int cost = 4;
  using output_elem = E;
  quant_params q;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    const V r = simd::round_even(x / stage_detail::quant_scale<V>(q, ctx)) +
                stage_detail::quant_zero_point<V>(q, ctx);
    return stage_detail::saturate<E>(r);
  }
  template <class Check>
  void validate(const Check& c) const {
    stage_detail::validate_quant<E>(c, q);
  }
};

/// y = (x - zero_point) * scale; integer inputs enter an epilogue as their integer values.
struct dequantize {
  static constexpr std::string_view name{"dequantize"};
  using output_elem = f32;
  quant_params q;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return (x - stage_detail::quant_zero_point<V>(q, ctx)) * stage_detail::quant_scale<V>(q, ctx);
  }
  template <class Check>
  void validate(const Check& c) const {
    // The input's integer type is not known here: a zero point of u8 or i8 passes.
    stage_detail::validate_quant(c, q, -128, 255);
  }
};

/// q = clamp(round_half_even(x * multiplier) + zero_point, E's range): int32 accumulators to
/// int8 (multiplier = in_scale * weight_scale / out_scale, per tensor or per channel).
template <class E>
struct requantize {
  static_assert(elem_traits<E>::is_quantized, "kfuse::requantize<E> needs E = i8 or u8");
  static constexpr std::string_view name{"requantize"};
  static constexpr int cost = 4;
  using output_elem = E;
  float multiplier = 1.f;
  std::int32_t zero_point = 0;
  std::span<const float> multipliers{};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    const V m = multipliers.empty() ? V(multiplier) : ctx.channel_param(multipliers.data());
    const V r = simd::round_even(x * m) + V(float(zero_point));
    return stage_detail::saturate<E>(r);
  }
  template <class Check>
  void validate(const Check& c) const {
    stage_detail::validate_zero_point(c, zero_point, std::int32_t(elem_traits<E>::min),
                                      std::int32_t(elem_traits<E>::max));
    if (multipliers.empty()) {
      if (!(multiplier > 0.f) || !std::isfinite(multiplier))
        c.fail("multiplier must be positive and finite");
      return;
    }
    c.expect_data(multipliers.data(), multipliers.size(), "multipliers");
    c.expect_per_channel(index_t(multipliers.size()), "multipliers");
    for (float m : multipliers)
      if (!(m > 0.f) || !std::isfinite(m)) c.fail("every multiplier must be positive and finite");
  }
};

}  // namespace kfuse
