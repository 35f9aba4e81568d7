#pragma once
// kfuse: header-only CPU inference kernels with compile-time fused epilogues.
#include "kfuse/arch/dispatch.hpp"
#include "kfuse/config/version.hpp"
#include "kfuse/epilogue.hpp"
#include "kfuse/kernels/eltwise.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/layout/convert.hpp"
#include "kfuse/types/convert.hpp"
