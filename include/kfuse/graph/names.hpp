#pragma once
// Run-time helpers over the executor's vocabulary: element sizes, names, bindings.
//
// The names of enum values are function objects, not functions: argument-dependent lookup does
// not find objects, so a user's own layout_name(kfuse::tensor_layout) stays unambiguous.
#include <string_view>
#include <type_traits>
#include <vector>

#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {
struct dtype_size_fn {
  constexpr std::size_t operator()(dtype t) const noexcept {
    switch (t) {
      case dtype::i64:
        return 8;
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
};
}  // namespace detail
/// Bytes of one element of t.
inline constexpr detail::dtype_size_fn dtype_size{};

namespace detail {
struct precision_name_fn {
  constexpr std::string_view operator()(precision p) const noexcept {
    switch (p) {
      case precision::inherit:
        return "inherit";
      case precision::f32:
        return "f32";
      case precision::bf16:
        return "bf16";
      case precision::int8:
        return "int8";
    }
    return "?";
  }
};
}  // namespace detail
/// "f32", "bf16", "int8" ("inherit": the plan's).
inline constexpr detail::precision_name_fn precision_name{};

namespace detail {
struct dtype_name_fn {
  constexpr std::string_view operator()(dtype t) const noexcept {
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
      case dtype::i64:
        return "i64";
    }
    return "?";
  }
};
}  // namespace detail
inline constexpr detail::dtype_name_fn dtype_name{};

namespace detail {
struct layout_name_fn {
  constexpr std::string_view operator()(tensor_layout l) const noexcept {
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
};
}  // namespace detail
inline constexpr detail::layout_name_fn layout_name{};

namespace detail {
struct op_name_fn {
  constexpr std::string_view operator()(op_kind k) const noexcept {
    switch (k) {
#define KFUSE_OP_NAME(name, nhwc) \
  case op_kind::name:             \
    return #name;
      KFUSE_GRAPH_OPS(KFUSE_OP_NAME)
#undef KFUSE_OP_NAME
    }
    return "?";
  }
};
}  // namespace detail
inline constexpr detail::op_name_fn op_name{};

namespace detail {
struct stage_name_fn {
  constexpr std::string_view operator()(stage_kind k) const noexcept {
    switch (k) {
#define KFUSE_STAGE_NAME(name, form) \
  case stage_kind::name:             \
    return #name;
      KFUSE_BUILTIN_STAGES(KFUSE_STAGE_NAME)
#undef KFUSE_STAGE_NAME
    }
    return "?";
  }
};
}  // namespace detail
/// "relu", "add", ... (the stage type's own name).
inline constexpr detail::stage_name_fn stage_name{};

/// The element type tag of a storage type as a run-time dtype.
template <class T>
constexpr dtype dtype_of() noexcept {
  using S = std::remove_const_t<T>;
  if constexpr (std::is_same_v<S, std::int64_t>) {
    return dtype::i64;
  } else {
    using E = elem_of<S>;
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
}

/// Product of the extents (1 for a scalar shape {}).
inline index_t shape_numel(const std::vector<index_t>& s) noexcept {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}

namespace detail {
struct bind_fn {
  template <class T>
  binding operator()(T* p, std::size_t count) const noexcept {
    binding b{const_cast<void*>(static_cast<const void*>(p)), count * sizeof(T)};
    b.read_only = std::is_const_v<T>;
    // Raw bytes (std::byte, char) carry no element type; uint8_t / int8_t do (u8 / i8 tensors).
    using U = std::remove_cv_t<T>;
    if constexpr (storage_type<U> || std::is_same_v<U, std::int64_t>) {
      b.typed = true;
      b.type = dtype_of<U>();
    }
    return b;
  }
  template <class C>
  binding operator()(C& container) const noexcept {
    return (*this)(container.data(), container.size());
  }
};
}  // namespace detail
/// bind(p, count): a binding of `count` elements at p (inputs may be const: kfuse never writes
/// them); bind(container): of its data() and size(). An object, like the names above: an
/// unqualified bind(buf) never competes with std::bind or a user's own bind.
inline constexpr detail::bind_fn bind{};

KFUSE_END_NAMESPACE
