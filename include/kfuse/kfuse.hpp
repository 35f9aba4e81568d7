#pragma once
// kfuse: header-only CPU inference kernels with compile-time fused epilogues.
// The executor is separate: kfuse/graph/graph.hpp (building graphs) and kfuse/graph/compile.hpp
// (the one TU that compiles plans: it instantiates every op's kernels).
#include "kfuse/arch/dispatch.hpp"
#include "kfuse/config/version.hpp"
#include "kfuse/epilogue.hpp"
#include "kfuse/kernels/arg_reduce.hpp"
#include "kfuse/kernels/batch_norm.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"
#include "kfuse/kernels/conv/fold_batch_norm.hpp"
#include "kfuse/kernels/eltwise.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/layout_convert.hpp"
#include "kfuse/kernels/norm.hpp"
#include "kfuse/kernels/pad.hpp"
#include "kfuse/kernels/pool2d.hpp"
#include "kfuse/kernels/reduce.hpp"
#include "kfuse/kernels/softmax.hpp"
#include "kfuse/types/convert.hpp"
