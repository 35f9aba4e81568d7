// kfuse::runtime: the lowerings (kernels) of reduce and arg_reduce for this object's arch.
#include "kfuse/graph/ops/reduce.hpp"

#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/arg_reduce.hpp"

KFUSE_PREBUILD_LOWERING(reduce)
KFUSE_PREBUILD_LOWERING(arg_reduce)
