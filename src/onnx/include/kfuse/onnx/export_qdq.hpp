#pragma once
// An ONNX model rewritten in QDQ form (QuantizeLinear -> DequantizeLinear pairs) with
// quantization parameters chosen by kfuse's calibration, so that another runtime (ONNX
// Runtime's int8 kernels) runs the same quantization as a kfuse int8 plan.
//
//   std::vector<std::string> names = kfuse::onnx::qdq_activation_names("net.onnx");
//   // ... calibrate those tensors of the imported graph (kfuse::calibrate_graph) ...
//   kfuse::onnx::export_qdq("net.onnx", "net.qdq.onnx", activations);
//
// What is quantized, as kfuse's int8 plans do it:
// - Conv, Gemm and MatMul nodes whose weight is a float initializer and whose activation input
//   has parameters: weights symmetric int8 per output channel, q = round(w / s), s = max |w| /
//   127 (kfuse::quantize_weights_per_row), zero point 0; a bias initializer as int32 at the
//   input's scale x the weight's; activations u8, affine, per tensor.
// - A Q -> DQ pair follows each activation given, and every node that read it reads the DQ's
//   output (a graph output stays the float tensor). qdq_activation_names lists, for each such
//   node, its input and its output, taken after a Relu or Clip that only the node feeds, so that
//   runtimes which fuse DQ -> op -> Q into one int8 op (ONNX Runtime's QLinearConv) find it.
// The output needs opset 13 or later (per-channel DequantizeLinear).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace kfuse::onnx {

/// The u8 quantization parameters of one activation, by its ONNX tensor name.
struct qdq_activation {
  std::string name;
  float scale = 1.f;
  std::int32_t zero_point = 0;  // in [0, 255]
};

struct qdq_export_report {
  std::vector<std::string> quantized;   // "name (Conv)" of every node with int8 weights
  std::vector<std::string> kept_float;  // "name (MatMul): why" of the candidates left as they are
  std::size_t activations = 0;          // Q -> DQ pairs inserted
};

/// The activations a QDQ export of `model` quantizes: the input and the (post-activation) output
/// of each Conv, Gemm and MatMul with an initializer weight, in node order, each once.
std::vector<std::string> qdq_activation_names(const std::filesystem::path& model);

/// Writes `model` to `out` in QDQ form with the given activation parameters; a node whose input
/// has none stays in float. Throws kfuse::error on an unreadable model, an opset below 13, a
/// zero point outside [0, 255] or a scale that is not positive and finite (naming the tensor).
qdq_export_report export_qdq(const std::filesystem::path& model, const std::filesystem::path& out,
                             std::span<const qdq_activation> activations);

}  // namespace kfuse::onnx
