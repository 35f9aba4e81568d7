#pragma once
// conv2d's lowering parts (graph_ops::conv2d_rule::part) for this object's arch: conv2d.cpp
// declares them, conv2d_<part>.cpp each define one, so that the parts' kernels compile in
// parallel.
#include "kfuse/graph/compiler/prebuilt_lowering.hpp"
#include "kfuse/graph/ops/conv2d.hpp"

#define KFUSE_CONV2D_PART(extern_, name)                                                      \
  KFUSE_BEGIN_NAMESPACE                                                                       \
  extern_ template void graph_ops::conv2d_rule::lower_part<                                   \
      graph_ops::conv2d_rule::part::name, arch::native, backend::xsimd, detail::runtime_ops>( \
      detail::compile_context&, const detail::step&, const node_desc&, step_info&,            \
      std::vector<detail::plan_command>&);                                                    \
  KFUSE_END_NAMESPACE
