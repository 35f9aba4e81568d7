// kfuse::runtime: the conv2d op's lowering for this object's arch; its parts' kernels are in
// conv2d_<part>.cpp.
#include "conv2d_parts.hpp"

KFUSE_CONV2D_PART(extern, depthwise)
KFUSE_CONV2D_PART(extern, gated)
KFUSE_CONV2D_PART(extern, few_channel)
KFUSE_CONV2D_PART(extern, dense_f32)
KFUSE_CONV2D_PART(extern, dense_f32_nchw)
KFUSE_CONV2D_PART(extern, dense_bf16)
KFUSE_CONV2D_PART(extern, dense_bf16_to_bf16)
KFUSE_CONV2D_PART(extern, dense_bf16_nchw)
KFUSE_CONV2D_PART(extern, dense_i8)
KFUSE_CONV2D_PART(extern, dense_i8_to_u8)
KFUSE_CONV2D_PART(extern, dense_i8_to_bf16)
KFUSE_CONV2D_PART(extern, dense_i8_nchw)
KFUSE_PREBUILD_LOWERING(conv2d)
