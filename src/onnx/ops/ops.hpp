#pragma once
// The importer's op functions (one family per file of ops/) and the helpers they share.
#include <utility>

#include "../context.hpp"

namespace kfuse::onnx::detail {

// ---- constants ---------------------------------------------------------------------------------
/// A zero-filled constant of element type elem.
const_value make_const(std::int32_t elem, std::vector<index_t> shape);
/// c[k] = v, converted to c's element type (integers saturate).
void store(const_value& c, index_t k, double v);
std::int64_t saturate_i64(double v);
/// A float vector of `count` copies of v.
const_value scalar_vector(index_t count, float v);
/// Channels of a run-time value as the eltwise stages see them (C of an image, else last axis).
index_t channels(const run_value& x);
std::pair<float, float> clip_bounds(const context& cx, const node_proto& n);
/// The integer values of uint8 / int8 data x (input k of n) as f32: a dequantize with the grid
/// {1, 0}; data quantized with other params is refused (its values are not its integers).
run_value integers_as_f32(context& cx, const node_proto& n, int k, const run_value& x,
                          const std::string& name);

// ---- elementwise.cpp ---------------------------------------------------------------------------
void import_activation(context& cx, const node_proto& n);
void import_binary(context& cx, const node_proto& n);  // also comparisons and logic (bool out)
void import_not(context& cx, const node_proto& n);
void import_where(context& cx, const node_proto& n);
void fold_unary(context& cx, const node_proto& n);
void fold_binary(context& cx, const node_proto& n);
void fold_where(context& cx, const node_proto& n);
void fold_clip(context& cx, const node_proto& n);
void fold_prelu(context& cx, const node_proto& n);

// ---- reduce.cpp --------------------------------------------------------------------------------
void import_reduce(context& cx, const node_proto& n);  // ReduceMean / Max over H, W: global pool
void fold_reduce(context& cx, const node_proto& n);

// ---- conv.cpp ----------------------------------------------------------------------------------
void import_conv(context& cx, const node_proto& n);
void import_conv_transpose(context& cx, const node_proto& n);

// ---- gemm.cpp ----------------------------------------------------------------------------------
void import_gemm(context& cx, const node_proto& n);
void import_matmul(context& cx, const node_proto& n);
void fold_matmul(context& cx, const node_proto& n);

// ---- pool.cpp ----------------------------------------------------------------------------------
void import_pool(context& cx, const node_proto& n);

// ---- movement.cpp (run-time data and constants alike) -----------------------------------------
void import_transpose(context& cx, const node_proto& n);
void import_slice(context& cx, const node_proto& n);
void import_pad(context& cx, const node_proto& n);
void import_arg(context& cx, const node_proto& n);
void fold_arg(context& cx, const node_proto& n);
void import_quantize_linear(context& cx, const node_proto& n);
void import_dequantize_linear(context& cx, const node_proto& n);
void import_dynamic_quantize_linear(context& cx, const node_proto& n);
void fold_quantize_linear(context& cx, const node_proto& n);
void fold_dequantize_linear(context& cx, const node_proto& n);
void fold_pad(context& cx, const node_proto& n);
void import_split(context& cx, const node_proto& n);
void import_tile(context& cx, const node_proto& n);
void import_depth_space(context& cx, const node_proto& n);  // DepthToSpace and SpaceToDepth

// ---- resize.cpp --------------------------------------------------------------------------------
void import_resize(context& cx, const node_proto& n);  // Resize and Upsample

// ---- norm.cpp ----------------------------------------------------------------------------------
void import_batch_norm(context& cx, const node_proto& n);
void import_layer_norm(context& cx, const node_proto& n);
void import_instance_norm(context& cx, const node_proto& n);
void import_group_norm(context& cx, const node_proto& n);
void import_softmax(context& cx, const node_proto& n);

// ---- shape.cpp ---------------------------------------------------------------------------------
void import_reshape(context& cx, const node_proto& n);  // Reshape Flatten Squeeze Unsqueeze
void import_concat(context& cx, const node_proto& n);
void import_cast(context& cx, const node_proto& n);
void import_shape(context& cx, const node_proto& n);  // Shape and Size of run-time data
void import_expand(context& cx, const node_proto& n);
void fold_reshape(context& cx, const node_proto& n);
void fold_concat(context& cx, const node_proto& n);
void fold_cast(context& cx, const node_proto& n);
void fold_shape(context& cx, const node_proto& n);
void fold_constant(context& cx, const node_proto& n);
void fold_constant_of_shape(context& cx, const node_proto& n);
void import_gather(context& cx, const node_proto& n);
void import_attention(context& cx, const node_proto& n);
void fold_gather(context& cx, const node_proto& n);
void fold_range(context& cx, const node_proto& n);
void fold_scatter_nd(context& cx, const node_proto& n);
void fold_expand(context& cx, const node_proto& n);
void fold_identity(context& cx, const node_proto& n);

/// ONNX's reshape target: 0 copies the input extent (unless allowzero), one -1 is inferred.
std::vector<index_t> reshape_target(const context& cx, const node_proto& n,
                                    const std::vector<index_t>& in,
                                    const std::vector<std::int64_t>& target, bool allowzero);
/// Squeeze / Unsqueeze / Flatten output shapes.
std::vector<index_t> reshaped_shape(const context& cx, const node_proto& n,
                                    const std::vector<index_t>& in);

}  // namespace kfuse::onnx::detail
