#pragma once
// Scalar conversions between f32 and the storage types (the exact reference for the vector
// paths, and the path for tails and the generic arch).
#include <bit>
#include <cmath>
#include <cstdint>

#include "kfuse/config/macros.hpp"
#include "kfuse/types/elem.hpp"

KFUSE_BEGIN_NAMESPACE

KFUSE_INLINE float to_float(float x) noexcept { return x; }

KFUSE_INLINE float to_float(bf16_t x) noexcept {
  return std::bit_cast<float>(std::uint32_t(x.bits) << 16);
}

/// Round to nearest even; NaN stays NaN (made quiet, sign kept).
KFUSE_INLINE bf16_t to_bf16(float x) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{std::uint16_t((u >> 16) | 0x0040u)};
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return bf16_t{std::uint16_t(rounded >> 16)};
}

/// Exact binary16 -> binary32 (denormals and Inf included; a NaN comes out quiet).
KFUSE_INLINE float to_float(f16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1fu;
  std::uint32_t mant = h.bits & 0x3ffu;
  // Inf, or NaN made quiet with sign and payload kept (as F16C's vcvtph2ps and NEON's fcvtl do)
  if (exp == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  if (exp == 0) {
    // zero or denormal: mant * 2^-24, exact in f32
    const float v = float(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(v));
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// binary32 -> binary16, round to nearest even, overflow to Inf, NaN kept quiet.
KFUSE_INLINE f16_t to_f16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return f16_t{std::uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};
  if (a >= 0x477ff000u) return f16_t{std::uint16_t(sign | 0x7c00u)};  // rounds to >= 65520: Inf
  if (a < 0x38800000u) {
    // result is a binary16 denormal (or zero): round a * 2^24 to an integer, ties to even
    const float scaled = std::bit_cast<float>(a) * 0x1p24f;
    const float r = std::nearbyint(scaled);  // default rounding mode: nearest even
    return f16_t{std::uint16_t(sign | std::uint16_t(r))};
  }
  const std::uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return f16_t{std::uint16_t(sign | ((rounded - 0x38000000u) >> 13))};
}

/// Round half to even and saturate to [lo, hi]; NaN maps to 0.
KFUSE_INLINE std::int32_t round_saturate(float x, int lo, int hi) noexcept {
  if (std::isnan(x)) return 0;
  const float r = std::nearbyint(x);
  if (r <= float(lo)) return lo;
  if (r >= float(hi)) return hi;
  return std::int32_t(r);
}

/// Converting store of a computed f32 value into a storage type (integers: round + saturate).
template <class T>
KFUSE_INLINE T from_float(float x) noexcept {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, bf16_t>)
    return to_bf16(x);
  else if constexpr (std::is_same_v<T, f16_t>)
    return to_f16(x);
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return std::int8_t(round_saturate(x, -128, 127));
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return std::uint8_t(round_saturate(x, 0, 255));
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return round_saturate(x, INT32_MIN, INT32_MAX);
  else
    static_assert(sizeof(T) == 0, "kfuse::from_float: unsupported storage type");
}

template <class T>
requires std::is_integral_v<T> KFUSE_INLINE float to_float(T x) noexcept { return float(x); }

/// Quantize one value: round_half_even(x / scale) + zero_point, saturated to E's range.
template <class E>
KFUSE_INLINE storage_t<E> quantize_value(float x, float scale, std::int32_t zero_point) noexcept {
  const float q = std::nearbyint(x / scale) + float(zero_point);
  return storage_t<E>(round_saturate(q, elem_traits<E>::min, elem_traits<E>::max));
}

KFUSE_INLINE float dequantize_value(float q, float scale, std::int32_t zero_point) noexcept {
  return (q - float(zero_point)) * scale;
}

KFUSE_END_NAMESPACE
