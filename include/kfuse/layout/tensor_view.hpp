#pragma once
// Non-owning views: a dense 4-D tensor with a compile-time layout, a row-major matrix, and a
// flat run of elements (the kernels' argument types; graph/ops/kernel_command.hpp builds them).
#include "kfuse/layout/layout.hpp"

namespace kfuse {

/// T is the storage type (float, bf16_t, int8_t ...); const T for inputs.
template <class T, layout_tag L>
struct tensor_view {
  using value_type = T;
  using layout = L;
  T* data = nullptr;
  dims4 dims{};

  operator tensor_view<const T, L>() const noexcept { return {data, dims}; }
};

template <layout_tag L, class T>
constexpr tensor_view<T, L> view(T* data, dims4 dims) noexcept {
  return {data, dims};
}

/// A row-major matrix's extents: rows x cols, `ld` elements from one row to the next (0: cols).
struct matrix_extents {
  index_t rows = 0, cols = 0, ld = 0;
  constexpr index_t stride() const noexcept { return ld ? ld : cols; }
};
/// A row-major matrix in memory.
template <class T>
struct matrix_view {
  T* data = nullptr;
  matrix_extents dims{};
};

/// `count` contiguous elements (a tensor whose shape the kernel holds).
template <class T>
struct flat_view {
  T* data = nullptr;
  index_t count = 0;
};

}  // namespace kfuse
