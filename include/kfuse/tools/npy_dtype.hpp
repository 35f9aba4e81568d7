#pragma once
// The element types of .npy files (numpy's float32, float64, float16, int64, int32, int8,
// uint8, bool_): their sizes, names, numpy descrs and the C++ types that hold them.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/types/convert.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {

/// The element types of .npy files kfuse reads and writes (numpy's float32, float64, float16,
/// int64, int32, int8, uint8, bool_).
enum class npy_dtype : std::uint8_t { f32, f64, f16, i64, i32, i8, u8, boolean };

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Bytes of one element.
constexpr std::size_t npy_dtype_size(npy_dtype t) noexcept {
  switch (t) {
    case npy_dtype::f64:
    case npy_dtype::i64:
      return 8;
    case npy_dtype::f32:
    case npy_dtype::i32:
      return 4;
    case npy_dtype::f16:
      return 2;
    case npy_dtype::i8:
    case npy_dtype::u8:
    case npy_dtype::boolean:
      return 1;
  }
  return 0;
}

/// "f32", "f64", "f16", "i64", "i32", "i8", "u8", "bool".
constexpr std::string_view npy_dtype_name(npy_dtype t) noexcept {
  switch (t) {
    case npy_dtype::f32:
      return "f32";
    case npy_dtype::f64:
      return "f64";
    case npy_dtype::f16:
      return "f16";
    case npy_dtype::i64:
      return "i64";
    case npy_dtype::i32:
      return "i32";
    case npy_dtype::i8:
      return "i8";
    case npy_dtype::u8:
      return "u8";
    case npy_dtype::boolean:
      return "bool";
  }
  return "?";
}

/// numpy's descr of the type in the machine's byte order ("<f4" on little-endian machines).
constexpr std::string_view npy_descr(npy_dtype t) noexcept {
  constexpr bool le = std::endian::native == std::endian::little;
  switch (t) {
    case npy_dtype::f32:
      return le ? "<f4" : ">f4";
    case npy_dtype::f64:
      return le ? "<f8" : ">f8";
    case npy_dtype::f16:
      return le ? "<f2" : ">f2";
    case npy_dtype::i64:
      return le ? "<i8" : ">i8";
    case npy_dtype::i32:
      return le ? "<i4" : ">i4";
    case npy_dtype::i8:
      return "|i1";
    case npy_dtype::u8:
      return "|u1";
    case npy_dtype::boolean:
      return "|b1";
  }
  return "?";
}

/// The npy_dtype of a C++ element type (float, double, f16_t, int64_t, int32_t, int8_t, uint8_t,
/// bool).
template <class T>
constexpr npy_dtype npy_dtype_of() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return npy_dtype::f32;
  else if constexpr (std::is_same_v<U, double>)
    return npy_dtype::f64;
  else if constexpr (std::is_same_v<U, f16_t>)
    return npy_dtype::f16;
  else if constexpr (std::is_same_v<U, std::int64_t>)
    return npy_dtype::i64;
  else if constexpr (std::is_same_v<U, std::int32_t>)
    return npy_dtype::i32;
  else if constexpr (std::is_same_v<U, std::int8_t>)
    return npy_dtype::i8;
  else if constexpr (std::is_same_v<U, std::uint8_t>)
    return npy_dtype::u8;
  else if constexpr (std::is_same_v<U, bool>)
    return npy_dtype::boolean;
  else
    static_assert(sizeof(U) == 0,
                  "npy: element type must be float, double, f16_t, int64_t, int32_t, int8_t, "
                  "uint8_t or bool");
}

KFUSE_END_NAMESPACE
