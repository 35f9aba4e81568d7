#pragma once
// The geometry checks every sliding-window image kernel shares (conv2d, depthwise, pool2d): the
// input extents, the window, strides and padding, and the padded extents checked for overflow;
// and valid_taps, the taps of one window position that land inside an extent (depthwise rows,
// the transposed conv's scatter).
// Each throws kfuse::error "<kernel>: ..." naming the first problem.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// A window of R x S taps moved by (stride_h, stride_w) over an input padded by (top, left,
/// bottom, right).
struct window_geometry {
  index_t r, s, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right;
};

/// Positive C, H, W; a batch of 0 is an empty tensor, which the kernels accept as a no-op
/// (docs/robustness.md).
inline void check_image_extents(std::string_view kernel, index_t n, index_t c, index_t h,
                                index_t w) {
  auto num = [](index_t v) { return std::to_string(v); };
  if (n < 0 || c < 1 || h < 1 || w < 1)
    fail(kernel, "input extent must be positive, N may be 0 (N " + num(n) + ", C " + num(c) +
                     ", H " + num(h) + ", W " + num(w) + ")");
}

/// A positive window (`what`: "kernel size", "window size") and strides, non-negative padding;
/// returns the padded height and width, checked.
inline std::pair<index_t, index_t> check_window(std::string_view kernel, std::string_view what,
                                                index_t h, index_t w, const window_geometry& g) {
  auto num = [](index_t v) { return std::to_string(v); };
  if (g.r < 1 || g.s < 1)
    fail(kernel, std::string(what) + " must be positive (R " + num(g.r) + ", S " + num(g.s) + ")");
  if (g.stride_h < 1 || g.stride_w < 1) fail(kernel, "strides must be positive");
  if (g.pad_top < 0 || g.pad_left < 0 || g.pad_bottom < 0 || g.pad_right < 0)
    fail(kernel, "padding must not be negative");
  const index_t ph = checked_add(kernel, "padded height",
                                 checked_add(kernel, "padded height", h, g.pad_top), g.pad_bottom);
  const index_t pw = checked_add(kernel, "padded width",
                                 checked_add(kernel, "padded width", w, g.pad_left), g.pad_right);
  return {ph, pw};
}

/// First tap t in [0, taps) with start + t * dil >= 0, and one past the last with < extent.
inline void valid_taps(index_t start, index_t dil, index_t taps, index_t extent, index_t& t0,
                       index_t& t1) {
  t0 = start >= 0 ? 0 : (-start + dil - 1) / dil;
  const index_t last = extent - 1 - start;  // t * dil <= last
  t1 = last < 0 ? 0 : std::min(taps, last / dil + 1);
  if (t0 > t1) t0 = t1;
}

}  // namespace detail
KFUSE_END_NAMESPACE
