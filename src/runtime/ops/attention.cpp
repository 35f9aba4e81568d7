// kfuse::runtime: the lowerings (kernels) of attention and cached_attention for this object's arch.
#include "kfuse/graph/ops/attention.hpp"

#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/cached_attention.hpp"

KFUSE_PREBUILD_LOWERING(attention)
KFUSE_PREBUILD_LOWERING(cached_attention)
