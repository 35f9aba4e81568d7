#pragma once
// How kfuse::pad (kernels/pad.hpp) and the graph's pad op fill new positions (ONNX Pad's modes).
#include <cstdint>

namespace kfuse {

enum class pad_mode : std::uint8_t {
  constant,  // the given value
  reflect,   // x[-i] = x[i], without repeating the edge (needs pads < extent)
  edge,      // x[-i] = x[0]
};

}  // namespace kfuse
