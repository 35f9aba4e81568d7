#pragma once
// Run-time helpers over the executor's vocabulary: element sizes, names, bindings.
#include <string_view>
#include <type_traits>
#include <vector>

#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

/// Bytes of one element of t.
constexpr std::size_t dtype_size(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
    case dtype::i32:
      return 4;
    case dtype::bf16:
    case dtype::f16:
      return 2;
    case dtype::i8:
    case dtype::u8:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::bf16:
      return "bf16";
    case dtype::f16:
      return "f16";
    case dtype::i8:
      return "i8";
    case dtype::u8:
      return "u8";
    case dtype::i32:
      return "i32";
  }
  return "?";
}

constexpr std::string_view layout_name(tensor_layout l) noexcept {
  switch (l) {
    case tensor_layout::plain:
      return "plain";
    case tensor_layout::nchw:
      return "nchw";
    case tensor_layout::nhwc:
      return "nhwc";
  }
  return "?";
}

constexpr std::string_view op_name(op_kind k) noexcept {
  switch (k) {
    case op_kind::eltwise:
      return "eltwise";
    case op_kind::linear:
      return "linear";
    case op_kind::conv2d:
      return "conv2d";
    case op_kind::pool2d:
      return "pool2d";
    case op_kind::softmax:
      return "softmax";
    case op_kind::layer_norm:
      return "layer_norm";
    case op_kind::rms_norm:
      return "rms_norm";
    case op_kind::batch_norm:
      return "batch_norm";
    case op_kind::reshape:
      return "reshape";
    case op_kind::concat:
      return "concat";
    case op_kind::convert_layout:
      return "convert_layout";
    case op_kind::cast:
      return "cast";
    case op_kind::custom:
      return "custom";
  }
  return "?";
}

/// The element type tag of a storage type as a run-time dtype.
template <class T>
constexpr dtype dtype_of() noexcept {
  using E = elem_of<std::remove_const_t<T>>;
  if constexpr (std::is_same_v<E, f32>)
    return dtype::f32;
  else if constexpr (std::is_same_v<E, bf16>)
    return dtype::bf16;
  else if constexpr (std::is_same_v<E, f16>)
    return dtype::f16;
  else if constexpr (std::is_same_v<E, i8>)
    return dtype::i8;
  else if constexpr (std::is_same_v<E, u8>)
    return dtype::u8;
  else
    return dtype::i32;
}

/// Product of the extents (1 for a scalar shape {}).
inline index_t shape_numel(const std::vector<index_t>& s) noexcept {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}

/// A binding of `count` elements at p (inputs may be const: kfuse never writes them).
template <class T>
binding bind(T* p, std::size_t count) noexcept {
  binding b{const_cast<void*>(static_cast<const void*>(p)), count * sizeof(T)};
  // Raw bytes (std::byte, char) carry no element type; uint8_t / int8_t do (u8 / i8 tensors).
  using U = std::remove_cv_t<T>;
  if constexpr (storage_type<U>) {
    b.typed = true;
    b.type = dtype_of<U>();
  }
  return b;
}
template <class C>
binding bind(C& container) noexcept {
  return bind(container.data(), container.size());
}

KFUSE_END_NAMESPACE
