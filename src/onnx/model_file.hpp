#pragma once
// Reading an ONNX file: bounded in size, parsed with protobuf's recursion and size limits, the
// default domain's opset checked. Shared by the importer and the QDQ export.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "context.hpp"

namespace kfuse::onnx::detail {

/// The file's bytes; refuses files above `max_bytes`.
std::vector<std::byte> read_model_file(const std::filesystem::path& file, std::size_t max_bytes);

/// The model in `bytes`; throws kfuse::error when they do not parse or hold no graph.
::onnx::ModelProto parse_model(std::span<const std::byte> bytes, std::size_t max_bytes);

/// The model's opset of the default domain, checked against what the importer reads.
std::int64_t default_opset(const ::onnx::ModelProto& m);

}  // namespace kfuse::onnx::detail
