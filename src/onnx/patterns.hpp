#pragma once
// Load-time pattern fusion over the ONNX nodes (patterns.cpp).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "context.hpp"

namespace kfuse::onnx::detail {

/// Rewrites the decomposed GELU / HardSwish / SiLU forms in `nodes` into one node each; one
/// line per rewrite in `report`. `values`: the initializers (and inputs); `outputs`: the model's
/// outputs (never fused away).
void fuse_patterns(std::vector<node_proto>& nodes,
                   const std::unordered_map<std::string, value>& values,
                   const std::set<std::string>& outputs, std::vector<std::string>& report);

}  // namespace kfuse::onnx::detail
