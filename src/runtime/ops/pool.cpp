// kfuse::runtime: the lowerings (kernels) of pool2d and max_pool_indices for this object's arch.
#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/max_pool_indices.hpp"
#include "kfuse/graph/ops/pool2d.hpp"

KFUSE_PREBUILD_LOWERING(pool2d)
KFUSE_PREBUILD_LOWERING(max_pool_indices)
