#pragma once
// copy_short: a copy of a few dozen to a few hundred bytes without a library call.
#include <cstddef>
#include <cstring>

#include "kfuse/config/macros.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Copies n bytes (tens to hundreds: a kernel row of an im2col block, a pixel's channels in a
/// concat) with fixed-size, overlapping moves. A `memcpy` call per such row (GCC turns an element
/// loop into one) cost more than the im2col block's GEMM, and a channel concat of a 64x64 map
/// made 4096 of them per input.
KFUSE_INLINE void copy_short(void* KFUSE_RESTRICT dst, const void* KFUSE_RESTRICT src,
                             std::size_t n) {
  auto* o = static_cast<unsigned char*>(dst);
  const auto* i = static_cast<const unsigned char*>(src);
  if (n >= 32) {
    for (std::size_t k = 0; k + 32 <= n; k += 32) std::memcpy(o + k, i + k, 32);
    std::memcpy(o + n - 32, i + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(o, i, 16);
    std::memcpy(o + n - 16, i + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(o, i, 8);
    std::memcpy(o + n - 8, i + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(o, i, 4);
    std::memcpy(o + n - 4, i + n - 4, 4);
  } else {
    for (std::size_t k = 0; k < n; ++k) o[k] = i[k];
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
