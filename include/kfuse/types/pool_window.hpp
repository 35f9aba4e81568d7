#pragma once
// The window of a 2-D pooling (kind, size, strides, padding, PyTorch's ceil mode and divisor
// rule), one struct for every level: the kernels' problem (pool_shape) adds the input's extents
// to it, and the graph's pool2d attributes (pool2d_params) are it.
#include "kfuse/types/elem.hpp"
#include "kfuse/types/pool_kind.hpp"

namespace kfuse {

struct pool_window {
  pool_kind kind = pool_kind::max;
  index_t r = 1, s = 1;  // window height, width (ignored when global)
  index_t stride_h = 1, stride_w = 1;
  index_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  /// Output size rounds up (PyTorch ceil_mode); a last window that would start past the input
  /// and its left / top padding is dropped.
  bool ceil_mode = false;
  /// Average: padded positions count in the divisor (PyTorch's default), else only the input's
  /// (ONNX's default: the importer sets it). Positions past the bottom / right padding (ceil
  /// mode) never count.
  bool count_include_pad = true;
  /// One window over the whole plane: output N x C x 1 x 1 (window, strides, pads unused).
  bool global = false;

  friend constexpr bool operator==(const pool_window&, const pool_window&) = default;
};

}  // namespace kfuse
