#pragma once
// The NHWC implicit-GEMM path's geometry for one conv shape: which input rows are copied (and
// padded), how many values a pixel of those rows holds, how many output rows a tile can touch and
// in which chunks of input channels the weight block is reduced. conv2d sizes its per-thread
// slots and runs its tiles (conv2d_tiles_nhwc.hpp) by it.
#include <algorithm>

#include "kfuse/kernels/conv/conv_shape.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

struct nhwc_geometry {
  index_t k_group;       // the micro-kernel's k group (1 f32, 2 bf16, 4 int8)
  index_t nr;            // the weight block's width
  index_t mr;            // pixels per tile
  index_t weight_bytes;  // bytes per packed weight
  bool integer;          // int8: the zero point's rows are read, never skipped

  /// The group's channels rounded up to the k group (the packed weights' cgp).
  index_t padded_channels(const conv_shape& s) const {
    return (s.c / s.groups + k_group - 1) / k_group * k_group;
  }
  /// Chunks of input channels: a weight block larger than ~half of L2 (e.g. 3x3 x 512 channels
  /// x NR) is used in chunks that stay in L2 while every tile of a band of rows passes, with the
  /// partial sums of the band kept in the thread's slot.
  index_t chunk_channels(const conv_shape& s) const {
    const index_t cgp = padded_channels(s), rs = s.r * s.s;
    return rs * cgp * nr * weight_bytes <= 512 * 1024
               ? cgp
               : std::max<index_t>(
                     k_group, index_t(384 * 1024) / (rs * nr * weight_bytes) / k_group * k_group);
  }
  /// Rows with padding are read from padded copies; int8 never skips an all-padding row (its
  /// taps must add the zero point's share, which the weight sums take back). A channel count
  /// that is not a multiple of the k group is copied too, each pixel padded to the packed
  /// weights' cgp channels (zero weights): every reduction is then whole k groups, and a row's S
  /// taps one run (an int8 RGB stem: 7 calls of 7 quads per tile, not 49 of a partial quad).
  /// Phantom blocks (conv_shape) are copied too: the copy reads them as zeros.
  bool copy_rows(const conv_shape& s) const {
    return s.pad_left > 0 || s.pad_right > 0 || s.pad_top > 0 || s.pad_bottom > 0 || integer ||
           (s.c / s.groups) % k_group != 0 || s.phantom_blocks > 0;
  }
  /// The values per pixel of the rows the tiles read: the group's channels padded to the k
  /// group in a copied row, all channels of the input otherwise.
  index_t pixel_values(const conv_shape& s) const {
    return copy_rows(s) ? padded_channels(s) : s.c;
  }
  /// The output rows a tile of at most MR consecutive pixels can touch.
  index_t span(const conv_shape& s) const {
    return std::min(s.out_h(), (s.out_w() + mr - 2) / s.out_w() + 1);
  }
};

}  // namespace detail
KFUSE_END_NAMESPACE
