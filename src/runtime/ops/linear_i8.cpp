// kfuse::runtime: the i8 linear lowering (its kernels) for this object's arch.
#include "linear_parts.hpp"

KFUSE_LINEAR_PART(, i8)
