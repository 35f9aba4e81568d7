// kfuse::runtime: conv2d's dense_f32_nchw lowering (its kernels) for this object's arch.
#include "conv2d_parts.hpp"

KFUSE_CONV2D_PART(, dense_f32_nchw)
