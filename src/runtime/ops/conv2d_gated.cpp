// kfuse::runtime: conv2d's gated lowering (its kernels) for this object's arch.
#include "conv2d_parts.hpp"

KFUSE_CONV2D_PART(, gated)
