#pragma once
// linear's lowering per recipe (graph_ops::linear_rule::lower_precision) for this object's arch:
// linear.cpp declares them, linear_<recipe>.cpp each define one, so that their kernels compile
// in parallel.
#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/linear.hpp"

#define KFUSE_LINEAR_PART(extern_, recipe)                                         \
  KFUSE_BEGIN_NAMESPACE                                                            \
  extern_ template void graph_ops::linear_rule::lower_precision<                   \
      recipe, arch::native, backend::xsimd, detail::runtime_ops>(                  \
      detail::compile_context&, const detail::step&, const node_desc&, step_info&, \
      std::vector<detail::plan_command>&);                                         \
  KFUSE_END_NAMESPACE
