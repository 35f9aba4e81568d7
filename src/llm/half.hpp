#pragma once
// Scalar f16 / bf16 conversions (exact; the kernels convert 16 at a time with F16C / shifts).
#include <bit>
#include <cstdint>
#include <cstring>

namespace kfuse::llm::detail {

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400) == 0);
      bits = sign | std::uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  return std::bit_cast<float>(bits);
}

/// Round to nearest even.
inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000;
  const std::uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return std::uint16_t(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
  if (ax >= 0x477ff000) return std::uint16_t(sign | 0x7c00);  // overflow to inf
  if (ax < 0x38800000) {                                      // subnormal or zero in f16
    const float v = std::bit_cast<float>(ax) * 16777216.f;    // * 2^24: units of the f16 subnormal
    const auto m = std::uint32_t(__builtin_nearbyintf(v));
    return std::uint16_t(sign | m);
  }
  const std::uint32_t rounded = ax + 0xfff + ((ax >> 13) & 1);
  return std::uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

/// The f16 at p (any alignment) as f32.
inline float f16_at(const void* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline float bf16_to_f32(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return std::uint16_t((x >> 16) | 0x40);  // quiet NaN
  return std::uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace kfuse::llm::detail
