// kfuse::runtime: the lowerings (kernels) of the normalizations and softmax for this object's arch.
#include "kfuse/graph/ops/norm.hpp"

#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/batch_norm.hpp"
#include "kfuse/graph/ops/softmax.hpp"

KFUSE_PREBUILD_LOWERING(softmax)
KFUSE_PREBUILD_LOWERING(layer_norm)
KFUSE_PREBUILD_LOWERING(rms_norm)
KFUSE_PREBUILD_LOWERING(batch_norm)
