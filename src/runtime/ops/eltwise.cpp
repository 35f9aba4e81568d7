// kfuse::runtime: the lowerings (kernels) of the eltwise and cast ops for this object's arch.
#include "kfuse/graph/ops/eltwise.hpp"

#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/cast.hpp"

KFUSE_PREBUILD_LOWERING(eltwise)
KFUSE_PREBUILD_LOWERING(cast)
