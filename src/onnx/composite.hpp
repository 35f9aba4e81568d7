#pragma once
// ONNX's integer-arithmetic ops written as the float ops they equal (composite.cpp), before the
// walk: QLinearConv / QLinearMatMul -> DequantizeLinear, Conv / MatMul, QuantizeLinear (a QDQ
// group, which an int8 plan runs in int8 with the model's scales); MatMulInteger / ConvInteger
// -> the zero points subtracted by DequantizeLinear (scale 1), Conv / MatMul, Cast to int32.
#include <string>
#include <vector>

#include "context.hpp"

namespace kfuse::onnx::detail {

/// The op types expand_composites rewrites.
inline const std::vector<std::string>& composite_ops() {
  static const std::vector<std::string> ops = {"ConvInteger", "MatMulInteger", "QLinearConv",
                                               "QLinearMatMul"};
  return ops;
}

/// Replaces each composite node of `nodes` by its expansion (in place, order kept).
void expand_composites(std::vector<node_proto>& nodes);

}  // namespace kfuse::onnx::detail
