#pragma once
// prefetch_lines: software prefetch of a short run of memory, for strided rows the hardware
// prefetchers do not follow.
#include <cstddef>
#include <cstdint>

#include "kfuse/config/macros.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Asks for the cache lines under [p, p + bytes) (a hint: never faults, costs no wait). For the
/// 128-byte slices of a head that attention reads out of each 4.6 KB row of a batch's Q / K / V
/// buffer: at batch 8 (a 4.7 MB buffer, past L2) the first load of each query tile waited on
/// memory for 17% of the tile's time.
/// Locality 3 asks for L1, 2 for L2 (data that will be read soon, but not next).
template <int Locality = 3>
KFUSE_INLINE void prefetch_lines(const void* p, std::size_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t(63);
  const auto end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  for (std::uintptr_t a = first; a < end; a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, Locality);
#else
  (void)p;
  (void)bytes;
#endif
}

/// Part `part` of `parts` of [p, p + bytes) asked into L2 (locality 2): a block of weights the
/// next pass reads, spread over the tiles of the current one so that its stream from memory
/// overlaps their arithmetic (gemm.hpp, winograd.hpp).
KFUSE_INLINE void prefetch_part(const void* p, std::size_t bytes, std::size_t part,
                                std::size_t parts) {
  const std::size_t from = bytes * part / parts, to = bytes * (part + 1) / parts;
  prefetch_lines<2>(static_cast<const unsigned char*>(p) + from, to - from);
}

}  // namespace detail

KFUSE_END_NAMESPACE
