// kfuse::runtime: the matmul op's lowering (its kernels) for this object's arch.
#include "kfuse/graph/ops/matmul.hpp"

#include "kfuse/graph/compiler/prebuilt_lowering.hpp"

KFUSE_PREBUILD_LOWERING(matmul)
