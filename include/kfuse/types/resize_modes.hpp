#pragma once
// The resampling modes of kfuse::resize (kernels/resize.hpp) and the graph's resize op, as ONNX's
// Resize names them.
#include <cstdint>

namespace kfuse {

/// nearest: a gather; linear: 2 taps per axis; cubic: 4 taps per axis (Keys' kernel with
/// coefficient a, edge-replicated input, optionally without the taps outside the input).
enum class resize_mode : std::uint8_t { nearest, linear, cubic };

/// Where output index o samples the input (ONNX's coordinate_transformation_mode).
enum class resize_coords : std::uint8_t {
  half_pixel,            // (o + 0.5) / scale - 0.5
  pytorch_half_pixel,    // as half_pixel, 0 when the output extent is 1
  align_corners,         // o * (in - 1) / (in * scale - 1)
  asymmetric,            // o / scale
  tf_half_pixel_for_nn,  // (o + 0.5) / scale
  // start * (in - 1) + o * (end - start) * (in - 1) / (out - 1) for a region of interest
  // [start, end] (fractions of the input); outside [0, in - 1] the output is a fixed value
  tf_crop_and_resize
};

/// How nearest mode rounds the source coordinate (ONNX's nearest_mode).
enum class resize_rounding : std::uint8_t { round_prefer_floor, round_prefer_ceil, floor, ceil };

}  // namespace kfuse
