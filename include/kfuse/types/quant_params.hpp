#pragma once
// Affine quantization: real = scale * (q - zero_point), per tensor or per channel.
#include <cstdint>
#include <span>

namespace kfuse {

/// Per-tensor when `scales` is empty, else per channel (one scale and zero point per channel;
/// `zero_points` may be empty, meaning every channel uses `zero_point`).
struct quant_params {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
  std::span<const float> scales{};
  std::span<const std::int32_t> zero_points{};
};

}  // namespace kfuse
