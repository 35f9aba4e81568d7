#pragma once
// bytes_overlap: whether two byte ranges share a byte. The one overlap test behind the kernels'
// aliasing checks (detail/checks.hpp), the epilogue stages' operand checks (epilogue/stage.hpp)
// and the plan's binding checks (graph/replay.hpp).
#include <cstddef>
#include <cstdint>

#include "kfuse/config/macros.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool bytes_overlap(const void* a, std::size_t a_bytes, const void* b,
                          std::size_t b_bytes) noexcept {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

}  // namespace detail
KFUSE_END_NAMESPACE
