#pragma once
// The scalar impl: one lane of plain C++. Used by the generic arch with either backend tag.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE
namespace simd {

struct scalar_impl {
  using reg = float;
  using mreg = bool;
  static constexpr int lanes = 1;
  static constexpr std::string_view name() { return "scalar"; }

  static KFUSE_INLINE reg set1(float s) { return s; }
  static KFUSE_INLINE reg add(reg a, reg b) { return a + b; }
  static KFUSE_INLINE reg sub(reg a, reg b) { return a - b; }
  static KFUSE_INLINE reg mul(reg a, reg b) { return a * b; }
  static KFUSE_INLINE reg div(reg a, reg b) { return a / b; }
  static KFUSE_INLINE reg fma(reg a, reg b, reg c) { return std::fma(a, b, c); }
  // x86 minps / maxps semantics (also Highway's and xsimd's on x86): when the operands are
  // unordered (a NaN) the second one is returned, so every x86 impl and this one agree.
  static KFUSE_INLINE reg min(reg a, reg b) { return a < b ? a : b; }
  static KFUSE_INLINE reg max(reg a, reg b) { return a > b ? a : b; }
  static KFUSE_INLINE reg abs(reg a) { return std::fabs(a); }
  static KFUSE_INLINE reg neg(reg a) { return -a; }
  static KFUSE_INLINE mreg lt(reg a, reg b) { return a < b; }
  static KFUSE_INLINE mreg le(reg a, reg b) { return a <= b; }
  static KFUSE_INLINE reg select(mreg m, reg a, reg b) { return m ? a : b; }
  static KFUSE_INLINE reg exp(reg a) { return std::exp(a); }
  static KFUSE_INLINE reg tanh(reg a) { return std::tanh(a); }
  static KFUSE_INLINE reg erf(reg a) { return std::erf(a); }
  static KFUSE_INLINE reg round_even(reg a) { return std::nearbyint(a); }
  static KFUSE_INLINE reg floor(reg a) { return std::floor(a); }
  static KFUSE_INLINE reg ceil(reg a) { return std::ceil(a); }
  static KFUSE_INLINE reg sqrt(reg a) { return std::sqrt(a); }
  static KFUSE_INLINE reg log(reg a) { return std::log(a); }
  // bf16 pairs (the bf16 GEMM emulation): lanes of 32 raw bits holding two bf16, element 2i in
  // the low half; bf16_even / bf16_odd give the low / high element of each lane as f32.
  static KFUSE_INLINE reg load_bits(const void* p) {
    reg v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static KFUSE_INLINE reg bf16_even(reg pairs) {
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(pairs) << 16);
  }
  static KFUSE_INLINE reg bf16_odd(reg pairs) {
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(pairs) & 0xffff0000u);
  }

  // Stride-2 loads (pooling's stride-2 rows): lane i = p[2i] / p[2i + 1].
  static KFUSE_INLINE reg load_even(const float* p) { return p[0]; }
  static KFUSE_INLINE reg load_odd(const float* p) { return p[1]; }

  template <class T>
  static KFUSE_INLINE reg load(const T* p) {
    return to_float(*p);
  }
  template <class T>
  static KFUSE_INLINE void store(T* p, reg v) {
    *p = from_float<T>(v);
  }
};

}  // namespace simd
KFUSE_END_NAMESPACE
