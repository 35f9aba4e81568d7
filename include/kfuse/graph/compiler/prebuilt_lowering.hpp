#pragma once
// The definition of lower_prebuilt (declared in graph/passes/lower.hpp): kfuse::runtime's
// src/runtime/ops/*.cpp include it with their op's rule and instantiate it for the arch they are
// compiled for, so that each op family's kernels build in a translation unit of their own.
#include <vector>

#include "kfuse/graph/passes/lower.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

template <class Rule, class A, class B>
void lower_prebuilt(compile_context& cx, const step& s, const node_desc& n, step_info& info,
                    std::vector<plan_command>& cmds) {
  lower_in_set<Rule, A, B, runtime_ops>(cx, s, n, info, cmds);
}

}  // namespace detail
KFUSE_END_NAMESPACE

/// Instantiates kfuse::runtime's lowering of graph_ops::<op>_rule for this TU's arch.
#define KFUSE_PREBUILD_LOWERING(op)                                                         \
  KFUSE_BEGIN_NAMESPACE                                                                     \
  template void detail::lower_prebuilt<graph_ops::op##_rule, arch::native, backend::xsimd>( \
      detail::compile_context&, const detail::step&, const node_desc&, step_info&,          \
      std::vector<plan_command>&);                                                          \
  KFUSE_END_NAMESPACE
