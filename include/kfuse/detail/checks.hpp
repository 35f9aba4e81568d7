#pragma once
// Argument checks shared by kernels, the plan compiler and the tools: pointers, alignment,
// overlap, sizes. Each throws kfuse::error naming the kernel (or op) and the argument.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/bytes_overlap.hpp"
#include "kfuse/error.hpp"
#include "kfuse/types/elem.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

[[noreturn]] inline void fail(std::string_view kernel, const std::string& what) {
  throw error(std::string(kernel) + ": " + what);
}

/// a * b for sizes (>= 0): a product that leaves index_t is an error naming the operation and
/// the operands, before anything is allocated or written (a silent wrap would turn into a
/// short allocation and an out-of-bounds write, or a no-op).
inline index_t checked_mul(std::string_view kernel, std::string_view what, index_t a, index_t b) {
  index_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    fail(kernel, std::string(what) + " overflows: " + std::to_string(a) + " x " +
                     std::to_string(b) + " is not a valid size");
  return r;
}
inline index_t checked_add(std::string_view kernel, std::string_view what, index_t a, index_t b) {
  index_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    fail(kernel, std::string(what) + " overflows: " + std::to_string(a) + " + " +
                     std::to_string(b) + " is not a valid size");
  return r;
}
/// The product of extents (the element count of a tensor), each >= 0, checked.
template <class Range>
index_t checked_count(std::string_view kernel, std::string_view what, const Range& extents) {
  // The extents as text, built only for the error (kernels call this on every run: no
  // allocation on the good path).
  auto dims = [&] {
    std::string d;
    for (index_t e : extents) d += (d.empty() ? "" : " x ") + std::to_string(e);
    return d;
  };
  for (index_t e : extents)
    if (e < 0) fail(kernel, std::string(what) + " has a negative extent (" + dims() + ")");
  index_t n = 1;
  for (index_t e : extents)
    if (__builtin_mul_overflow(n, e, &n))
      fail(kernel,
           std::string(what) + " has too many elements (" + dims() + " overflows a 64-bit count)");
  return n;
}
inline index_t checked_count(std::string_view kernel, std::string_view what,
                             std::initializer_list<index_t> extents) {
  return checked_count<std::initializer_list<index_t>>(kernel, what, extents);
}
/// count elements of elem_size bytes, checked against the address space.
inline std::size_t checked_bytes(std::string_view kernel, std::string_view what, index_t count,
                                 std::size_t elem_size) {
  std::size_t r = 0;
  if (count < 0 || __builtin_mul_overflow(std::size_t(count), elem_size, &r) ||
      r > std::size_t(std::numeric_limits<index_t>::max()))
    fail(kernel, std::string(what) + " overflows: " + std::to_string(count) + " elements of " +
                     std::to_string(elem_size) + " bytes");
  return r;
}

/// A buffer of n elements: non-null when n > 0, aligned to its element size.
template <class T>
void check_buffer(std::string_view kernel, std::string_view arg, const T* p, index_t n) {
  if (n < 0) fail(kernel, std::string(arg) + " has a negative size");
  if (n == 0) return;
  if (p == nullptr)
    fail(kernel, std::string(arg) + " is null but has " + std::to_string(n) + " elements");
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
    fail(kernel, std::string(arg) + " is not aligned to its element size (" +
                     std::to_string(alignof(T)) + " bytes)");
}

/// For element-wise kernels: in and out may be the same buffer (same start, same element size)
/// but must not partly overlap.
template <class In, class Out>
void check_overlap(std::string_view kernel, const In* in, index_t n_in, const Out* out,
                   index_t n_out, std::string_view in_name = "input") {
  if (!bytes_overlap(in, sizeof(In) * std::size_t(n_in), out, sizeof(Out) * std::size_t(n_out)))
    return;
  if (static_cast<const void*>(in) == static_cast<const void*>(out) && sizeof(In) == sizeof(Out) &&
      n_in == n_out)
    return;
  fail(kernel, std::string(in_name) +
                   " and output overlap (only the exact same buffer, same element size, can be "
                   "used in place)");
}

/// For kernels that read a neighbourhood of each output (gemm, conv, pool, depthwise): the
/// output must not share a byte with an input, not even in place.
template <class In, class Out>
void check_disjoint(std::string_view kernel, std::string_view in_name, const In* in, index_t n_in,
                    const Out* out, index_t n_out) {
  if (bytes_overlap(in, sizeof(In) * std::size_t(n_in), out, sizeof(Out) * std::size_t(n_out)))
    fail(kernel, std::string(in_name) +
                     " and output overlap: this kernel cannot run in place (each output "
                     "reads several inputs); use a separate output buffer");
}

}  // namespace detail
KFUSE_END_NAMESPACE
