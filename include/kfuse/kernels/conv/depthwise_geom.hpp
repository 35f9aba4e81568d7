#pragma once
// The depthwise kernel's shared pieces (kernels/conv/depthwise.hpp): one call's geometry, the
// activation load (minus the zero point for integer inputs) and a register hint for reused loads.
#include <cstring>

#include "kfuse/config/macros.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/window_geom.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {
/// The geometry of one depthwise call, resolved.
inline window_geom window_geom_of(const conv_shape& s) {
  return {s.n, s.c,        s.h,        s.w,       s.out_h(),  s.out_w(),    s.r,
          s.s, s.stride_h, s.stride_w, s.pad_top, s.pad_left, s.dilation_h, s.dilation_w};
}

/// Loads a vector of activations (n lanes when Partial) as f32, minus the zero point for
/// integer activations.
template <class V, bool Partial, class T>
KFUSE_INLINE V dw_load(const T* p, int n, float zp) {
  V x = Partial ? simd::load_partial<V>(p, n) : simd::load<V>(p);
  if constexpr (std::is_integral_v<T>) x = x - V(zp);
  return x;
}

/// Keeps x in a register: without it GCC folds the load into each of the (up to) three FMAs
/// that use it, tripling the loads of the 3x3 tiles (they are load-bound on AVX-512).
template <class V>
KFUSE_INLINE void dw_in_register(V& x) {
#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX2 && defined(__GNUC__)
  if constexpr (sizeof(V) == 64 && V::lanes == 16) {
    __m512 r;
    std::memcpy(&r, &x, 64);
    asm("" : "+v"(r));
    std::memcpy(&x, &r, 64);
  } else if constexpr (sizeof(V) == 32 && V::lanes == 8) {
    __m256 r;
    std::memcpy(&r, &x, 32);
    asm("" : "+v"(r));
    std::memcpy(&x, &r, 32);
  }
#else
  (void)x;
#endif
}

}  // namespace detail

KFUSE_END_NAMESPACE
