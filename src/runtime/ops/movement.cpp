// kfuse::runtime: the lowerings (kernels) of the data-movement ops for this object's arch.
#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/broadcast.hpp"
#include "kfuse/graph/ops/channel_shuffle.hpp"
#include "kfuse/graph/ops/concat.hpp"
#include "kfuse/graph/ops/convert_layout.hpp"
#include "kfuse/graph/ops/custom.hpp"
#include "kfuse/graph/ops/gather.hpp"
#include "kfuse/graph/ops/pad.hpp"
#include "kfuse/graph/ops/reshape.hpp"
#include "kfuse/graph/ops/strided_view.hpp"

KFUSE_PREBUILD_LOWERING(reshape)
KFUSE_PREBUILD_LOWERING(concat)
KFUSE_PREBUILD_LOWERING(convert_layout)
KFUSE_PREBUILD_LOWERING(broadcast)
KFUSE_PREBUILD_LOWERING(strided_view)
KFUSE_PREBUILD_LOWERING(gather)
KFUSE_PREBUILD_LOWERING(pad)
KFUSE_PREBUILD_LOWERING(channel_shuffle)
KFUSE_PREBUILD_LOWERING(custom)
