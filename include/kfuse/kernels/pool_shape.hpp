#pragma once
// pool_shape: one 2-D pooling problem (max, average, global): its window and input extents, with
// PyTorch's output-size rule for ceil mode and its checks.
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/kernels/window_checks.hpp"
#include "kfuse/layout/layout.hpp"
#include "kfuse/types/pool_window.hpp"

namespace kfuse {

/// A pooling problem: the window (pool_window) over an input of extents n, c, h, w.
///   auto ps = kfuse::pool_shape::of({1, 64, 56, 56}, {.kind = kfuse::pool_kind::max, .r = 3,
///                                                     .s = 3, .stride_h = 2, .stride_w = 2});
struct pool_shape : pool_window {
  index_t n = 1, c = 1, h = 1, w = 1;  // input (logical N, C, H, W)

  static constexpr pool_shape of(const dims4& in, const pool_window& window) noexcept {
    pool_shape ps;
    static_cast<pool_window&>(ps) = window;
    ps.n = in.n;
    ps.c = in.c;
    ps.h = in.h;
    ps.w = in.w;
    return ps;
  }

  /// Output extent along one axis (PyTorch pooling_output_shape); 0 or less when the window
  /// does not fit the padded input.
  static constexpr index_t out_extent(index_t in, index_t k, index_t stride, index_t lo, index_t hi,
                                      bool ceil) noexcept {
    const index_t span = in + lo + hi - k;
    if (span < 0 || stride < 1) return 0;
    index_t o = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil && (o - 1) * stride >= in + lo) --o;
    return o;
  }
  constexpr index_t out_h() const noexcept {
    return global ? 1 : out_extent(h, r, stride_h, pad_top, pad_bottom, ceil_mode);
  }
  constexpr index_t out_w() const noexcept {
    return global ? 1 : out_extent(w, s, stride_w, pad_left, pad_right, ceil_mode);
  }
  constexpr dims4 in_dims() const noexcept { return {n, c, h, w}; }
  constexpr dims4 out_dims() const noexcept { return {n, c, out_h(), out_w()}; }
  friend constexpr bool operator==(const pool_shape&, const pool_shape&) = default;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// Throws kfuse::error "<kernel>: ..." naming the first problem with the geometry.
inline void check_pool_shape(std::string_view kernel, const pool_shape& s) {
  auto num = [](index_t v) { return std::to_string(v); };
  check_image_extents(kernel, s.n, s.c, s.h, s.w);
  // The input count (and so the output's) in bytes, checked once for every size computed later.
  checked_bytes(kernel, "the input", checked_count(kernel, "the input", {s.n, s.c, s.h, s.w}), 4);
  if (s.global) {
    if (s.pad_top || s.pad_left || s.pad_bottom || s.pad_right)
      fail(kernel, "global pooling takes no padding");
    return;
  }
  check_window(
      kernel, "window size", s.h, s.w,
      {s.r, s.s, s.stride_h, s.stride_w, s.pad_top, s.pad_left, s.pad_bottom, s.pad_right});
  if (s.pad_top > s.r / 2 || s.pad_bottom > s.r / 2 || s.pad_left > s.s / 2 ||
      s.pad_right > s.s / 2)
    fail(kernel, "padding (top " + num(s.pad_top) + ", left " + num(s.pad_left) + ", bottom " +
                     num(s.pad_bottom) + ", right " + num(s.pad_right) +
                     ") must be at most half the window (" + num(s.r) + "x" + num(s.s) + ")");
  if (s.out_h() < 1 || s.out_w() < 1)
    fail(kernel, "output size is not positive: the window " + num(s.r) + "x" + num(s.s) +
                     " is larger than the padded input " + num(s.h + s.pad_top + s.pad_bottom) +
                     "x" + num(s.w + s.pad_left + s.pad_right));
}

}  // namespace detail
KFUSE_END_NAMESPACE
