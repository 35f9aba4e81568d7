#pragma once
// The geometry of a sliding-window kernel's call (depthwise convolution, pooling), resolved from
// its shape: one type, so the two read their windows with the same names.
#include "kfuse/config/macros.hpp"
#include "kfuse/types/elem.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

struct window_geom {
  index_t n, c, h, w;      // input
  index_t oh, ow;          // output
  index_t r, s;            // window
  index_t sh, sw;          // strides
  index_t pt, pl;          // top and left padding
  index_t dh = 1, dw = 1;  // dilations (pooling: 1)
};

}  // namespace detail

KFUSE_END_NAMESPACE
