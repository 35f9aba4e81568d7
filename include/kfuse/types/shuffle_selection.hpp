#pragma once
// What a channel shuffle keeps: the channels in `groups` groups, transposed (ShuffleNet's shuffle;
// 1: none), and the run [first, first + count) of the result. One struct for every level: the
// kernel's problem (channel_shuffle_shape) adds the image's extents to it, and the graph's
// channel_shuffle attributes (channel_shuffle_params) are it.
#include "kfuse/types/elem.hpp"

namespace kfuse {

struct shuffle_selection {
  int groups = 1;
  index_t first = 0;
  index_t count = -1;  // -1: to the last channel

  friend constexpr bool operator==(const shuffle_selection&, const shuffle_selection&) = default;
};

}  // namespace kfuse
