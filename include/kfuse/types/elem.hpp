#pragma once
// Element types: tags (f32, f16, bf16, i8, u8, i32), their storage types and traits.
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace kfuse {

/// IEEE binary16, stored as its bits. Convert with kfuse::to_float / kfuse::from_float.
struct f16_t {
  std::uint16_t bits;
};
/// bfloat16 (the upper half of a binary32), stored as its bits.
struct bf16_t {
  std::uint16_t bits;
};

using index_t = std::int64_t;

struct f32 {
  using storage = float;
  static constexpr std::string_view name{"f32"};
};
struct f16 {
  using storage = f16_t;
  static constexpr std::string_view name{"f16"};
};
struct bf16 {
  using storage = bf16_t;
  static constexpr std::string_view name{"bf16"};
};
struct i8 {
  using storage = std::int8_t;
  static constexpr std::string_view name{"i8"};
};
struct u8 {
  using storage = std::uint8_t;
  static constexpr std::string_view name{"u8"};
};
struct i32 {
  using storage = std::int32_t;
  static constexpr std::string_view name{"i32"};
};

/// Traits of an element tag: storage type, the type kernels compute in, the accumulator type.
template <class E>
struct elem_traits;

template <>
struct elem_traits<f32> {
  using storage = float;
  using compute = float;
  using accumulator = float;
  static constexpr bool is_float = true;
  static constexpr bool is_quantized = false;
};
template <>
struct elem_traits<f16> : elem_traits<f32> {
  using storage = f16_t;
};
template <>
struct elem_traits<bf16> : elem_traits<f32> {
  using storage = bf16_t;
};
template <>
struct elem_traits<i8> {
  using storage = std::int8_t;
  using compute = float;
  using accumulator = std::int32_t;
  static constexpr bool is_float = false;
  static constexpr bool is_quantized = true;
  static constexpr int min = -128;
  static constexpr int max = 127;
};
template <>
struct elem_traits<u8> : elem_traits<i8> {
  using storage = std::uint8_t;
  static constexpr int min = 0;
  static constexpr int max = 255;
};
template <>
struct elem_traits<i32> {
  using storage = std::int32_t;
  using compute = float;
  using accumulator = std::int32_t;
  static constexpr bool is_float = false;
  static constexpr bool is_quantized = false;
};

template <class E>
concept elem_tag = requires {
  typename elem_traits<E>::storage;
};

template <elem_tag E>
using storage_t = typename elem_traits<E>::storage;

/// The tag of a storage type: elem_of<bf16_t> is bf16.
template <class T>
struct elem_of_t;
template <>
struct elem_of_t<float> {
  using type = f32;
};
template <>
struct elem_of_t<f16_t> {
  using type = f16;
};
template <>
struct elem_of_t<bf16_t> {
  using type = bf16;
};
template <>
struct elem_of_t<std::int8_t> {
  using type = i8;
};
template <>
struct elem_of_t<std::uint8_t> {
  using type = u8;
};
template <>
struct elem_of_t<std::int32_t> {
  using type = i32;
};
template <class T>
using elem_of = typename elem_of_t<std::remove_cv_t<T>>::type;

template <class T>
concept storage_type = requires {
  typename elem_of_t<std::remove_cv_t<T>>::type;
};

}  // namespace kfuse
