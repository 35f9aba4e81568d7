#pragma once
// A non-owning view of a dense 4-D tensor with a compile-time layout.
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

}  // namespace kfuse
