#pragma once
// The pooling kernel's shared pieces (kernels/pool2d.hpp, kernels/pool2d_nchw.hpp): one call's
// geometry, the window's reduction, the input load and the valid window taps.
#include <algorithm>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/kernels/window_geom.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// A pooling call's window and what its reduction needs beside it.
struct pool_geom : window_geom {
  bool is_max;
  float zp;           // average over integers: values enter as q - zp, the result gets + zp
  const float* hcnt;  // average: divisor factor of each output row
  const float* wcnt;  // ... and of each output column (the divisor is their product)
};

/// The window's reduction of two values: max (NaN kept, as PyTorch's max pooling) or sum.
template <bool IsMax, class V>
KFUSE_INLINE V pool_join(V a, V b) {
  if constexpr (IsMax)
    return simd::max_keep_nan(a, b);
  else
    return a + b;
}

/// x[0] (+) ... (+) x[N - 1] as a tree of pairs (short dependency chains). One fixed order, so
/// every path that reduces N values this way rounds alike.
template <bool IsMax, int N, class V>
KFUSE_INLINE V pool_tree(V* x) {
#pragma GCC unroll 8
  for (int w = 1; w < N; w *= 2)
#pragma GCC unroll 8
    for (int i = 0; i + w < N; i += 2 * w) x[i] = pool_join<IsMax>(x[i], x[i + w]);
  return x[0];
}

template <class V, bool Partial, class T>
KFUSE_INLINE V pool_load(const T* p, int n, const pool_geom& g) {
  V x = Partial ? simd::load_partial<V>(p, n) : simd::load<V>(p);
  if constexpr (std::is_integral_v<T>)
    if (!g.is_max) x = x - V(g.zp);
  return x;
}

/// First tap t in [0, taps) with start + t >= 0, and one past the last with start + t < extent.
inline void pool_valid_taps(index_t start, index_t taps, index_t extent, index_t& t0, index_t& t1) {
  t0 = std::max<index_t>(0, -start);
  t1 = std::max(t0, std::min(taps, extent - start));
}

}  // namespace detail

KFUSE_END_NAMESPACE
