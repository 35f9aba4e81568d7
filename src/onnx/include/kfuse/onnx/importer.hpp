#pragma once
// kfuse::onnx: ONNX models -> kfuse::graph. A compiled component beside the header-only core
// (the core never includes it). CMake: find_package(kfuse CONFIG COMPONENTS onnx), link
// kfuse::onnx.
//
//   kfuse::onnx::import_options opt;
//   opt.dims["batch"] = 8;                         // a dynamic dimension, by its name
//   opt.shapes["x"] = {8, 3, 224, 224};            // or a whole input shape
//   kfuse::onnx::model m = kfuse::onnx::load("mobilenet.onnx", opt);
//   kfuse::plan p = kfuse::compile(m.graph, {.threads = 2});   // as for any graph
//
// The graph's inputs and outputs are the model's, in the model's order, with the model's shapes
// (4-D activations in NCHW memory order whatever the internal layout). Opsets 9 to 18 of the
// default domain. Everything that is wrong with a file (unsupported op, attribute or dtype,
// truncated or hostile bytes, unbound dimensions) throws kfuse::error naming the node, its op
// type and the problem.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kfuse/graph/graph.hpp"

namespace kfuse::onnx {

struct import_options {
  /// Values of symbolic dimensions ("batch", "seq"), by name.
  std::map<std::string, index_t> dims;
  /// Whole input shapes by input name; they override the model's (their static dims must agree).
  std::map<std::string, std::vector<index_t>> shapes;
  /// Memory order of 4-D activations inside the graph. nchw: as the model; nhwc: the importer
  /// converts at the edges and runs convolutions and pooling in NHWC. Inputs and outputs stay
  /// NCHW either way.
  tensor_layout layout = tensor_layout::nchw;
  /// Pattern fusion at load time (GELU, HardSwish, LayerNorm, MatMul + Add, ...).
  bool fuse_patterns = true;
  /// Refuse files, tensors and external data larger than this (hostile inputs).
  std::size_t max_bytes = std::size_t(4) << 30;
};

/// One input or output of the model as imported.
struct value_info {
  std::string name;
  std::vector<index_t> shape;  // NCHW for 4-D activations
  dtype type = dtype::f32;
  tensor_id id;                // the graph's tensor
  std::int32_t onnx_type = 1;  // the model's TensorProto.DataType (9: bool, bound as u8 0 / 1)
};

struct model {
  kfuse::graph graph;
  std::vector<value_info> inputs;   // in graph-input (binding) order
  std::vector<value_info> outputs;  // in graph-output (binding) order
  std::int64_t opset = 0;
  std::string producer;  // producer_name and version, as written in the file
  /// What the importer rewrote: one line each (folded constants, fused patterns, dropped nodes).
  std::vector<std::string> rewrites;
  /// The graph tensor that holds each run-time value of the model, by its ONNX name (a value the
  /// importer folded into a fused node's output maps to that output; constants are absent). An
  /// NHWC import may hold an image value in NHWC memory order.
  std::map<std::string, tensor_id> values;
};

/// Loads an ONNX file. External data is read from next to the file (never outside its folder).
model load(const std::filesystem::path& file, const import_options& options = {});

/// Loads a model from memory. External data, if any, is looked up under `base_dir` (empty: none
/// allowed).
model load_bytes(std::span<const std::byte> bytes, const import_options& options = {},
                 const std::filesystem::path& base_dir = {});

/// A serialized ONNX TensorProto (the .pb files of ONNX's test data, kfuse-run --input) read
/// into memory: float types as float32 in `f`, integer and bool types in `i`.
struct tensor_data {
  std::string name;
  std::vector<index_t> shape;
  std::int32_t onnx_type = 1;  // TensorProto.DataType (1 float, 7 int64, 9 bool, ...)
  bool is_float = true;
  std::vector<float> f;
  std::vector<std::int64_t> i;
};
tensor_data read_tensor(std::span<const std::byte> bytes, std::size_t max_bytes = std::size_t(1)
                                                                                  << 30);
tensor_data read_tensor(const std::filesystem::path& file);

/// The ONNX op types (default domain) the importer maps, sorted.
std::vector<std::string> supported_ops();

}  // namespace kfuse::onnx
