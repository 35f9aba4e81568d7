// kfuse::runtime: conv2d's few_channel lowering (its kernels) for this object's arch.
#include "conv2d_parts.hpp"

KFUSE_CONV2D_PART(, few_channel)
