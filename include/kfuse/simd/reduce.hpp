#pragma once
// lane_sum / lane_max: horizontal reductions of a simd::vec, with each impl's own instruction.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/types/elem.hpp"

#if KFUSE_X86
#include <immintrin.h>
#endif

KFUSE_BEGIN_NAMESPACE
namespace detail {

// Horizontal sum / max of a vector's lanes with each impl's own reduction (latency matters: a
// row's next pass waits for it).
template <class I>
struct lane_reduce {  // scalar_impl: one lane
  static KFUSE_INLINE float sum(float v) { return v; }
  static KFUSE_INLINE float max(float v) { return v; }
};
#if KFUSE_TIER != KFUSE_TIER_GENERIC
template <class XA>
struct lane_reduce<simd::xsimd_impl<XA>> {
  using reg = typename simd::xsimd_impl<XA>::reg;
  static KFUSE_INLINE float sum(reg v) { return xsimd::hadd(v); }
  static KFUSE_INLINE float max(reg v) {
#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512
    if constexpr (reg::size == 16) return _mm512_reduce_max_ps(v);  // xsimd 8 has no max reduction
#endif
    alignas(64) float t[reg::size];
    v.store_aligned(t);
    for (std::size_t w = reg::size / 2; w > 0; w /= 2)
      for (std::size_t k = 0; k < w; ++k) t[k] = std::max(t[k], t[k + w]);
    return t[0];
  }
};
#endif
#if KFUSE_WITH_HWY
template <>
struct lane_reduce<simd::hwy_impl> {
  using reg = simd::hwy_impl::reg;
  static KFUSE_INLINE float sum(reg v) {
    return simd::hn::GetLane(simd::hn::SumOfLanes(simd::hwy_impl::D(), v));
  }
  static KFUSE_INLINE float max(reg v) {
    return simd::hn::GetLane(simd::hn::MaxOfLanes(simd::hwy_impl::D(), v));
  }
};
#endif

template <class V>
KFUSE_INLINE float lane_sum(V v) {
  return lane_reduce<typename V::impl>::sum(v.r);
}
template <class V>
KFUSE_INLINE float lane_max(V v) {
  return lane_reduce<typename V::impl>::max(v.r);
}

}  // namespace detail
KFUSE_END_NAMESPACE
