// kfuse::runtime: the lowerings (kernels) of resize and conv_transpose2d for this object's arch.
#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/conv_transpose2d.hpp"
#include "kfuse/graph/ops/resize.hpp"

KFUSE_PREBUILD_LOWERING(resize)
KFUSE_PREBUILD_LOWERING(conv_transpose2d)
