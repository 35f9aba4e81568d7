// The importer's op table: each ONNX op type, its import for run-time data and its load-time
// evaluation. A new op is a function in ops/ and one line here.
#include <algorithm>

#include "ops.hpp"

namespace kfuse::onnx::detail {

const std::vector<op_entry>& op_table() {
  static const std::vector<op_entry> table = [] {
    std::vector<op_entry> t = {
        // activations and unary math
        {"Abs", import_activation, fold_unary},
        {"Ceil", import_activation, fold_unary},
        {"Celu", import_activation, fold_unary},
        {"Clip", import_activation, fold_clip},
        {"Dropout", import_activation, fold_identity},
        {"Elu", import_activation, fold_unary},
        {"Erf", import_activation, fold_unary},
        {"Exp", import_activation, fold_unary},
        {"Floor", import_activation, fold_unary},
        {"Gelu", import_activation, nullptr},
        {"HardSigmoid", import_activation, fold_unary},
        {"kfuse.Silu", import_activation, nullptr},      // x * Sigmoid(x), from the pattern pass
        {"kfuse.Attention", import_attention, nullptr},  // the pattern pass's attention
        {"HardSwish", import_activation, fold_unary},
        {"Identity", import_activation, fold_identity},
        {"LeakyRelu", import_activation, fold_unary},
        {"Log", import_activation, fold_unary},
        {"Mish", import_activation, fold_unary},
        {"Neg", import_activation, fold_unary},
        {"PRelu", import_activation, fold_prelu},
        {"Not", import_not, fold_unary},
        {"Reciprocal", import_activation, fold_unary},
        {"Relu", import_activation, fold_unary},
        {"Round", import_activation, fold_unary},
        {"Selu", import_activation, fold_unary},
        {"Sigmoid", import_activation, fold_unary},
        {"Sign", import_activation, fold_unary},
        {"Softplus", import_activation, fold_unary},
        {"Softsign", import_activation, fold_unary},
        {"Sqrt", import_activation, fold_unary},
        {"Tanh", import_activation, fold_unary},
        // binary arithmetic and comparisons (NumPy broadcasting)
        {"Add", import_binary, fold_binary},
        {"And", import_binary, fold_binary},
        {"Div", import_binary, fold_binary},
        {"Equal", import_binary, fold_binary},
        {"Greater", import_binary, fold_binary},
        {"GreaterOrEqual", import_binary, fold_binary},
        {"Less", import_binary, fold_binary},
        {"LessOrEqual", import_binary, fold_binary},
        {"Max", import_binary, fold_binary},
        {"Mean", import_binary, fold_binary},
        {"Min", import_binary, fold_binary},
        {"Mod", nullptr, fold_binary},  // shape arithmetic (Swin's window shifts)
        {"Mul", import_binary, fold_binary},
        {"Or", import_binary, fold_binary},
        {"Pow", import_binary, fold_binary},
        {"Sub", import_binary, fold_binary},
        {"Sum", import_binary, fold_binary},
        {"Where", import_where, fold_where},
        {"Xor", import_binary, fold_binary},
        // compute
        {"ArgMax", import_arg, fold_arg},
        {"ArgMin", import_arg, fold_arg},
        {"AveragePool", import_pool, nullptr},
        {"BatchNormalization", import_batch_norm, nullptr},
        {"Conv", import_conv, nullptr},
        {"ConvTranspose", import_conv_transpose, nullptr},
        {"Gemm", import_gemm, nullptr},
        {"GlobalAveragePool", import_pool, nullptr},
        {"GlobalMaxPool", import_pool, nullptr},
        {"LayerNormalization", import_layer_norm, nullptr},
        {"InstanceNormalization", import_instance_norm, nullptr},
        {"GroupNormalization", import_group_norm, nullptr},
        {"MatMul", import_matmul, fold_matmul},
        {"MaxPool", import_pool, nullptr},
        {"ReduceL1", import_reduce, fold_reduce},
        {"ReduceL2", import_reduce, fold_reduce},
        {"ReduceLogSumExp", import_reduce, fold_reduce},
        {"ReduceMax", import_reduce, fold_reduce},
        {"ReduceMean", import_reduce, fold_reduce},
        {"ReduceMin", import_reduce, fold_reduce},
        {"ReduceProd", import_reduce, fold_reduce},
        {"ReduceSum", import_reduce, fold_reduce},
        {"ReduceSumSquare", import_reduce, fold_reduce},
        {"Softmax", import_softmax, nullptr},
        {"LogSoftmax", import_softmax, nullptr},
        {"Resize", import_resize, nullptr},
        {"Upsample", import_resize, nullptr},
        // shape and data movement
        {"Cast", import_cast, fold_cast},
        {"Concat", import_concat, fold_concat},
        {"Constant", nullptr, fold_constant},
        {"ConstantOfShape", nullptr, fold_constant_of_shape},
        {"Expand", import_expand, fold_expand},
        {"Flatten", import_reshape, fold_reshape},
        {"Gather", import_gather, fold_gather},
        {"Pad", import_pad, fold_pad},
        // quantization (QDQ models)
        {"DequantizeLinear", import_dequantize_linear, fold_dequantize_linear},
        {"DynamicQuantizeLinear", import_dynamic_quantize_linear, nullptr},
        {"QuantizeLinear", import_quantize_linear, fold_quantize_linear},
        {"Range", nullptr, fold_range},
        {"Reshape", import_reshape, fold_reshape},
        {"ScatterND", nullptr, fold_scatter_nd},
        {"Shape", import_shape, fold_shape},
        {"Size", import_shape, fold_shape},
        {"Slice", import_slice, import_slice},
        {"Squeeze", import_reshape, fold_reshape},
        {"Transpose", import_transpose, import_transpose},
        {"Split", import_split, import_split},
        {"Tile", import_tile, import_tile},
        {"DepthToSpace", import_depth_space, import_depth_space},
        {"SpaceToDepth", import_depth_space, import_depth_space},
        {"Unsqueeze", import_reshape, fold_reshape},
    };
    std::sort(t.begin(), t.end(), [](const op_entry& a, const op_entry& b) {
      return std::string_view(a.type) < b.type;
    });
    return t;
  }();
  return table;
}

}  // namespace kfuse::onnx::detail
