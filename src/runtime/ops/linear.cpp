// kfuse::runtime: the linear op's lowering for this object's arch; each recipe's kernels are in
// linear_<recipe>.cpp.
#include "linear_parts.hpp"

KFUSE_LINEAR_PART(extern, f32)
KFUSE_LINEAR_PART(extern, bf16)
KFUSE_LINEAR_PART(extern, i8)
KFUSE_PREBUILD_LOWERING(linear)
