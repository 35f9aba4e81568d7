#pragma once
// conv_shape: the geometry of one 2-D convolution, shared by conv2d (dense, grouped, 1x1) and the
// depthwise kernel. Weights are given in PyTorch's OIHW order [K, C / groups, R, S] whatever the
// activation layout; kernels pack them once into their own layout.
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/kernels/window_checks.hpp"
#include "kfuse/layout/layout.hpp"
#include "kfuse/types/conv_geometry.hpp"

namespace kfuse {

/// The extents and the window (strides, padding, dilations, groups: conv_geometry, which the
/// graph's conv2d_params also is).
struct conv_shape : conv_geometry {
  index_t n = 1, c = 1, h = 1, w = 1;  // input (logical N, C, H, W)
  index_t k = 1;                       // output channels
  index_t r = 1, s = 1;                // kernel height, width
  // Each group's weights are block-diagonal in this many blocks (output channels [j K/g/d,
  // (j + 1) K/g/d) read only input channels [j C/g/d, (j + 1) C/g/d) of their group): groups
  // merged into one by the caller (graph/ops/conv2d.hpp), whose zero blocks the NHWC f32 tiles
  // skip. 1: dense groups. The weights must hold those zeros either way.
  index_t diagonal = 1;
  // Zero diagonal blocks at the end of the last group (fewer than `diagonal`): an odd group
  // count (RegNet's 25) padded to whole groups of `diagonal` blocks. c and k count them; the
  // tensors do not (in_channels(), out_channels()): their inputs read as zeros, their outputs
  // are not written. NHWC f32 diagonal tiles only.
  index_t phantom_blocks = 0;
  // Each diagonal block (each group when diagonal = 1) is itself block-diagonal in this many
  // groups merged into it (ResNeXt's groups of 4 channels, 4 to a 16-lane block): the NHWC f32
  // tiles that can multiply each lane by its own group's channels only (narrow tiles) do.
  // 1: the blocks are dense. The weights hold the zeros either way.
  index_t block_groups = 1;

  /// Channels of the input and output tensors (c and k without the phantom blocks). The tiles
  /// ask at every store: no division unless there are phantom blocks.
  constexpr index_t in_channels() const noexcept {
    return phantom_blocks == 0 ? c : c - phantom_blocks * (c / groups / diagonal);
  }
  constexpr index_t out_channels() const noexcept {
    return phantom_blocks == 0 ? k : k - phantom_blocks * (k / groups / diagonal);
  }

  constexpr index_t out_h() const noexcept {
    return (h + pad_top + pad_bottom - dilation_h * (r - 1) - 1) / stride_h + 1;
  }
  constexpr index_t out_w() const noexcept {
    return (w + pad_left + pad_right - dilation_w * (s - 1) - 1) / stride_w + 1;
  }
  constexpr dims4 in_dims() const noexcept { return {n, in_channels(), h, w}; }
  constexpr dims4 out_dims() const noexcept { return {n, out_channels(), out_h(), out_w()}; }
  /// Elements of the OIHW weight tensor.
  constexpr index_t weight_count() const noexcept { return k * (c / groups) * r * s; }
  constexpr bool is_depthwise() const noexcept { return groups == c && k == c && groups > 1; }
  /// 1x1, stride 1, unpadded, one group: in NHWC literally a GEMM [N*H*W, C] x [C, K].
  constexpr bool is_pointwise() const noexcept {
    return r == 1 && s == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 && pad_left == 0 &&
           pad_bottom == 0 && pad_right == 0 && groups == 1;
  }
  /// FLOP convention: padded taps counted.
  constexpr double flops() const noexcept {
    return 2.0 * double(n) * double(out_h()) * double(out_w()) * double(k) * double(c / groups) *
           double(r) * double(s);
  }
  friend constexpr bool operator==(const conv_shape&, const conv_shape&) = default;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// Throws kfuse::error "<kernel>: ..." naming the first problem with the geometry.
inline void check_conv_shape(std::string_view kernel, const conv_shape& s) {
  auto num = [](index_t v) { return std::to_string(v); };
  check_image_extents(kernel, s.n, s.c, s.h, s.w);
  if (s.k < 1) fail(kernel, "output channel count K must be positive, not " + num(s.k));
  const auto [ph, pw] = check_window(
      kernel, "kernel size", s.h, s.w,
      {s.r, s.s, s.stride_h, s.stride_w, s.pad_top, s.pad_left, s.pad_bottom, s.pad_right});
  if (s.dilation_h < 1 || s.dilation_w < 1) fail(kernel, "dilations must be positive");
  if (s.groups < 1) fail(kernel, "groups must be positive, not " + num(s.groups));
  if (s.c % s.groups != 0)
    fail(kernel,
         "groups (" + num(s.groups) + ") do not divide the input channels (" + num(s.c) + ")");
  if (s.k % s.groups != 0)
    fail(kernel,
         "groups (" + num(s.groups) + ") do not divide the output channels (" + num(s.k) + ")");
  if (s.diagonal < 1 || (s.c / s.groups) % s.diagonal != 0 || (s.k / s.groups) % s.diagonal != 0)
    fail(kernel, "diagonal blocks (" + num(s.diagonal) + ") do not divide a group's " +
                     num(s.c / s.groups) + " input and " + num(s.k / s.groups) +
                     " output channels");
  if (s.phantom_blocks < 0 || (s.phantom_blocks > 0 && s.phantom_blocks >= s.diagonal))
    fail(kernel, "phantom blocks (" + num(s.phantom_blocks) + ") must be fewer than the " +
                     num(s.diagonal) + " diagonal blocks of a group");
  if (s.block_groups < 1 || (s.c / s.groups / s.diagonal) % s.block_groups != 0 ||
      (s.k / s.groups / s.diagonal) % s.block_groups != 0)
    fail(kernel, "block groups (" + num(s.block_groups) + ") do not divide a diagonal block's " +
                     num(s.c / s.groups / s.diagonal) + " input and " +
                     num(s.k / s.groups / s.diagonal) + " output channels");
  // Every size the kernels compute from the shape, checked once here: padded extents (above),
  // dilated kernel, the input, output and weight counts, and the weights padded to whole
  // register blocks (at most 64 more output channels, 64 more input channels per group) in bytes.
  checked_mul(kernel, "dilated kernel height", s.dilation_h, s.r);
  checked_mul(kernel, "dilated kernel width", s.dilation_w, s.s);
  checked_bytes(kernel, "the input", checked_count(kernel, "the input", {s.n, s.c, ph, pw}), 4);
  checked_bytes(kernel, "the output", checked_count(kernel, "the output", {s.n, s.k, ph, pw}), 4);
  checked_bytes(kernel, "the packed weights",
                checked_count(kernel, "the weight tensor",
                              {s.groups, s.k / s.groups + 64, s.c / s.groups + 64, s.r, s.s}),
                4);
  if (s.h + s.pad_top + s.pad_bottom < s.dilation_h * (s.r - 1) + 1 ||
      s.w + s.pad_left + s.pad_right < s.dilation_w * (s.s - 1) + 1)
    fail(kernel,
         "output size is not positive (padded input " + num(s.h + s.pad_top + s.pad_bottom) + "x" +
             num(s.w + s.pad_left + s.pad_right) + " is smaller than the dilated kernel " +
             num(s.dilation_h * (s.r - 1) + 1) + "x" + num(s.dilation_w * (s.s - 1) + 1) + ")");
}

}  // namespace detail
KFUSE_END_NAMESPACE
