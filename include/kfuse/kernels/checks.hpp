#pragma once
// Argument checks shared by kernels: pointers, alignment, overlap. Each throws kfuse::error
// naming the kernel and the argument.
#include <cstdint>
#include <string>
#include <string_view>

#include "kfuse/config/macros.hpp"
#include "kfuse/error.hpp"
#include "kfuse/types/elem.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

[[noreturn]] inline void fail(std::string_view kernel, const std::string& what) {
  throw error(std::string(kernel) + ": " + what);
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

/// In and out may be the same buffer (same start, same element size) but must not partly overlap.
template <class In, class Out>
void check_overlap(std::string_view kernel, const In* in, index_t n_in, const Out* out,
                   index_t n_out) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(in), a1 = a0 + sizeof(In) * std::size_t(n_in);
  const auto b0 = reinterpret_cast<std::uintptr_t>(out), b1 = b0 + sizeof(Out) * std::size_t(n_out);
  if (n_in == 0 || n_out == 0 || a1 <= b0 || b1 <= a0) return;
  if (a0 == b0 && sizeof(In) == sizeof(Out)) return;
  fail(kernel,
       "input and output overlap (only the exact same buffer, same element size, can be "
       "used in place)");
}

}  // namespace detail
KFUSE_END_NAMESPACE
