#pragma once
// What a pooling window computes, for kfuse::pool2d (kernels/pool_shape.hpp) and the graph's
// pool2d op alike; a window over the whole plane is their `global` flag.
#include <cstdint>

namespace kfuse {

enum class pool_kind : std::uint8_t { max, avg };

}  // namespace kfuse
