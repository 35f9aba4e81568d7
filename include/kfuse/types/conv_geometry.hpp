#pragma once
// The window geometry of a 2-D convolution (strides, padding, dilations, groups), one struct for
// every level: the kernels' problem (conv_shape, conv_transpose_shape) and the graph's conv2d
// attributes (conv2d_params) are each one, with their own extents or precision on top.
#include "kfuse/types/elem.hpp"

namespace kfuse {

struct conv_geometry {
  index_t stride_h = 1, stride_w = 1;
  index_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  index_t dilation_h = 1, dilation_w = 1;
  index_t groups = 1;

  friend constexpr bool operator==(const conv_geometry&, const conv_geometry&) = default;
};

}  // namespace kfuse
