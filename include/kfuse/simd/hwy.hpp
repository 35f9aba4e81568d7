#pragma once
// The Highway impl: the static target of this TU (HWY_STATIC_TARGET), full vectors of float.
// Highway stays behind this header; kernels only see kfuse::simd::vec.
#ifndef HWY_COMPILE_ONLY_STATIC
// kfuse uses static dispatch only; this also avoids Highway 1.0.3's -march=native build error
// on AVX3_DL CPUs ("best baseline should be included in dynamic targets").
#define HWY_COMPILE_ONLY_STATIC 1
#endif
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <limits>

#include "kfuse/arch/tags.hpp"
#include "kfuse/simd/erf.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE
namespace simd {

namespace hn = hwy::HWY_NAMESPACE;

struct hwy_impl {
  using D = hn::ScalableTag<float>;
  using reg = hn::Vec<D>;
  using mreg = hn::Mask<D>;
  static constexpr int lanes = int(HWY_MAX_BYTES / sizeof(float));
  static constexpr int vector_bytes = int(HWY_MAX_BYTES);
  static const char* name() { return hwy::TargetName(HWY_STATIC_TARGET); }

  static KFUSE_INLINE reg set1(float s) { return hn::Set(D(), s); }
  static KFUSE_INLINE reg add(reg a, reg b) { return hn::Add(a, b); }
  static KFUSE_INLINE reg sub(reg a, reg b) { return hn::Sub(a, b); }
  static KFUSE_INLINE reg mul(reg a, reg b) { return hn::Mul(a, b); }
  static KFUSE_INLINE reg div(reg a, reg b) { return hn::Div(a, b); }
  static KFUSE_INLINE reg fma(reg a, reg b, reg c) { return hn::MulAdd(a, b, c); }
#if HWY_ARCH_ARM
  // Highway's NEON Min/Max are vminnm/vmaxnm, which return the number when the other operand is
  // NaN: compare and select instead, for the x86 rule every impl follows (see scalar.hpp).
  static KFUSE_INLINE reg min(reg a, reg b) { return hn::IfThenElse(hn::Lt(a, b), a, b); }
  static KFUSE_INLINE reg max(reg a, reg b) { return hn::IfThenElse(hn::Lt(b, a), a, b); }
#else
  static KFUSE_INLINE reg min(reg a, reg b) { return hn::Min(a, b); }
  static KFUSE_INLINE reg max(reg a, reg b) { return hn::Max(a, b); }
#endif
  static KFUSE_INLINE reg abs(reg a) { return hn::Abs(a); }
  static KFUSE_INLINE reg neg(reg a) { return hn::Neg(a); }
  static KFUSE_INLINE mreg lt(reg a, reg b) { return hn::Lt(a, b); }
  static KFUSE_INLINE mreg le(reg a, reg b) { return hn::Le(a, b); }
  static KFUSE_INLINE reg select(mreg m, reg a, reg b) { return hn::IfThenElse(m, a, b); }
  // Highway's Exp is only specified up to 104 (garbage beyond, not Inf): clamp, then restore Inf.
  static KFUSE_INLINE reg exp(reg a) {
    const reg limit = hn::Set(D(), 88.7f);
    const reg e = hn::Exp(D(), hn::Min(a, limit));
    // Exp turns NaN into a finite value: keep NaN.
    return hn::IfThenElse(hn::Lt(limit, a), hn::Set(D(), HUGE_VALF),
                          hn::IfThenElse(hn::IsNaN(a), a, e));
  }
  static KFUSE_INLINE reg tanh(reg a) { return hn::Tanh(D(), a); }
  static KFUSE_INLINE reg erf(reg a) { return erf_from_exp<hwy_impl>(a); }
  static KFUSE_INLINE reg round_even(reg a) { return hn::Round(a); }
  static KFUSE_INLINE reg floor(reg a) { return hn::Floor(a); }
  static KFUSE_INLINE reg ceil(reg a) { return hn::Ceil(a); }
  static KFUSE_INLINE reg sqrt(reg a) { return hn::Sqrt(a); }
  // Highway's Log is specified on (0, FLT_MAX] only: 0, negatives, Inf and NaN are set here to
  // what std::log gives (-Inf, NaN, Inf, NaN).
  static KFUSE_INLINE reg log(reg a) {
    const D d;
    const reg zero = hn::Zero(d), inf = hn::Set(d, HUGE_VALF);
    const reg l = hn::Log(
        d, hn::IfThenElse(hn::Lt(zero, a), hn::Min(a, hn::Set(d, 3.4e38f)), hn::Set(d, 1.f)));
    const reg pos = hn::IfThenElse(hn::Lt(a, inf), l, inf);  // a > 0 here
    return hn::IfThenElse(hn::Lt(zero, a), pos,
                          hn::IfThenElse(hn::Eq(a, zero), hn::Neg(inf),
                                         hn::Set(d, std::numeric_limits<float>::quiet_NaN())));
  }
  // bf16 pairs (the bf16 GEMM emulation): lanes of 32 raw bits holding two bf16, element 2i in
  // the low half; bf16_even / bf16_odd give the low / high element of each lane as f32.
  static KFUSE_INLINE reg load_bits(const void* p) {
    return hn::LoadU(D(), static_cast<const float*>(p));
  }
  // Stride-2 loads (pooling's stride-2 rows): lane i = p[2i] / p[2i + 1], from 2 * lanes floats.
  static KFUSE_INLINE reg load_even(const float* p) {
    return hn::ConcatEven(D(), hn::LoadU(D(), p + lanes), hn::LoadU(D(), p));
  }
  static KFUSE_INLINE reg load_odd(const float* p) {
    return hn::ConcatOdd(D(), hn::LoadU(D(), p + lanes), hn::LoadU(D(), p));
  }
  static KFUSE_INLINE reg bf16_even(reg pairs) {
    const hn::Rebind<std::uint32_t, D> du;
    return hn::BitCast(D(), hn::ShiftLeft<16>(hn::BitCast(du, pairs)));
  }
  static KFUSE_INLINE reg bf16_odd(reg pairs) {
    const hn::Rebind<std::uint32_t, D> du;
    return hn::BitCast(D(), hn::And(hn::BitCast(du, pairs), hn::Set(du, 0xffff0000u)));
  }

  template <class T>
  static KFUSE_INLINE reg load(const T* p) {
    const D d;
    if constexpr (std::is_same_v<T, float>) {
      return hn::LoadU(d, p);
    } else if constexpr (std::is_same_v<T, bf16_t>) {
      const hn::Rebind<std::uint32_t, D> du32;
      const hn::Rebind<std::uint16_t, D> du16;
      const auto wide =
          hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const std::uint16_t*>(p)));
      return hn::BitCast(d, hn::ShiftLeft<16>(wide));
    } else if constexpr (std::is_same_v<T, f16_t>) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || \
    HWY_TARGET == HWY_SCALAR
      // Without F16C this Highway emulates the promotion and turns Inf / NaN into 65536 and up:
      // use the exact software conversion instead.
      alignas(64) float tmp[lanes];
      for (int i = 0; i < lanes; ++i) tmp[i] = to_float(p[i]);
      return hn::Load(d, tmp);
#else
      const hn::Rebind<hwy::float16_t, D> df16;
      return hn::PromoteTo(d, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
#endif
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
      return hn::ConvertTo(d, hn::LoadU(hn::Rebind<std::int32_t, D>(), p));
    } else {
      const hn::Rebind<std::int32_t, D> di32;
      const hn::Rebind<T, D> d8;
      return hn::ConvertTo(d, hn::PromoteTo(di32, hn::LoadU(d8, p)));
    }
  }

  template <class T>
  static KFUSE_INLINE void store(T* p, reg v) {
    const D d;
    if constexpr (std::is_same_v<T, float>) {
      hn::StoreU(v, d, p);
    } else if constexpr (std::is_same_v<T, bf16_t>) {
      const hn::Rebind<std::uint32_t, D> du32;
      const hn::Rebind<std::int32_t, D> di32;
      const auto u = hn::BitCast(du32, v);
      const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
      const auto rounded = hn::Add(hn::Add(u, hn::Set(du32, 0x7fffu)), lsb);
      const auto quiet = hn::Or(u, hn::Set(du32, 0x00400000u));
      // IsNaN, not Ne(v, v): Highway's Ne is an ordered compare (NEQ_OQ) on AVX2 / AVX3.
      const auto nan = hn::RebindMask(du32, hn::IsNaN(v));
      const auto bits = hn::ShiftRight<16>(hn::IfThenElse(nan, quiet, rounded));
      const hn::Rebind<std::uint16_t, D> du16;
      hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, bits)), du16,
                 reinterpret_cast<std::uint16_t*>(p));
    } else if constexpr (std::is_same_v<T, f16_t>) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || \
    HWY_TARGET == HWY_SCALAR
      // Without F16C this Highway emulates the demotion without round-to-nearest-even: use
      // the exact software conversion instead.
      alignas(64) float tmp[lanes];
      hn::Store(v, d, tmp);
      for (int i = 0; i < lanes; ++i) p[i] = to_f16(tmp[i]);
#else
      const hn::Rebind<hwy::float16_t, D> df16;
      hn::StoreU(hn::DemoteTo(df16, v), df16, reinterpret_cast<hwy::float16_t*>(p));
#endif
    } else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) {
      constexpr float lo = std::is_signed_v<T> ? -128.f : 0.f;
      constexpr float hi = std::is_signed_v<T> ? 127.f : 255.f;
      const reg finite = hn::IfThenZeroElse(hn::IsNaN(v), v);  // NaN -> 0, as in from_float
      const auto q = hn::NearestInt(min(max(finite, hn::Set(d, lo)), hn::Set(d, hi)));
      const hn::Rebind<T, D> d8;
      hn::StoreU(hn::DemoteTo(d8, q), d8, p);
    } else {
      static_assert(sizeof(T) == 0, "kfuse: no vector store to this storage type");
    }
  }
};

}  // namespace simd
KFUSE_END_NAMESPACE
