#pragma once
// op_rule: what the plan compiler knows of one graph op, in one place. Each graph/ops/<op>.hpp
// defines a rule (a struct deriving from op_rule) next to its replay command, and
// graph/ops/registry.hpp lists the rules. A rule has:
//
//   static constexpr op_kind kind;                                      the node kind it handles
//   static void infer(compile_context&, const node_desc&);              validate inputs and
//                                                                       attributes, set the output
//   template <class A, class B>
//   static void lower(compile_context&, const step&, const node_desc&,  replay commands for a
//                     step_info&, std::vector<plan_command>&);          live step of this op
//
// and may override the hooks below (the defaults suit an op that absorbs nothing). A rule whose
// kernels differ by precision (by_precision) takes a third template argument, the op set whose
// precisions it may instantiate (graph/compiler/op_set.hpp), defaulting to every precision.
#include <cstddef>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/compiler/op_set.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct op_rule {
  /// lower<A, B, Set> instantiates only the precisions Set runs in (Set::runs_in).
  static constexpr bool by_precision = false;

  /// Input slots that may be left empty (tensor_id{}): a bias, a norm's gamma / beta.
  static bool optional_slot(std::size_t) { return false; }

  /// The step of node n before fusion: its data input, other inputs and chain. Default: input 0
  /// is the data, the rest are other inputs.
  static void build_step(detail::compile_context&, const node_desc& n, detail::step& s) {
    for (std::size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i].index >= 0) s.others.push_back(n.inputs[i].index);
  }

  /// Fusion: the op's kernel takes a stage chain in its epilogue, so a following eltwise step
  /// can be absorbed (passes/fusion.hpp).
  static constexpr bool absorbs_chain = false;
  /// Fusion: how many of the chain's operands the op's command has room for (a command has
  /// four input pointers; ops that read several inputs leave fewer for the chain).
  static constexpr int chain_operand_slots = chain_max_operands;
  /// Fusion: a following batch norm folds into the op's weights (conv2d).
  static constexpr bool folds_batch_norm = false;

  /// Quantize absorption (passes/quantize_absorption.hpp): the step can write its f32 output
  /// quantized to `to` (u8 / i8) from its epilogue on this target.
  static bool writes_quantized(const detail::compile_context&, const detail::step&, dtype) {
    return false;
  }
  /// Quantize absorption: the step reads its input as u8 with the input's quant params (int8
  /// linear / conv), so the producer may write it quantized.
  static bool reads_quantized(const detail::compile_context&, const detail::step&) { return false; }
  /// bf16 absorption (the same pass): the step's kernel reads its input as bf16 (a bf16 linear /
  /// conv, which would convert an f32 input), so the producer may write bf16.
  static bool reads_bf16(const detail::compile_context&, const detail::step&) { return false; }
};

/// Whether set Set's plans hold bf16 tensors: bf16 plans, and int8 plans (an int8 conv writes
/// bf16 for the depthwise conv it feeds, conv2d_rule::int8_bf16_nhwc).
template <class Set>
constexpr bool bf16_tensors() {
  return Set::runs_in(precision::bf16) || Set::runs_in(precision::int8);
}

/// Node n runs in precision p, which the selective set Set leaves out.
template <class Set>
[[noreturn]] void fail_precision(const detail::compile_context& cx, const node_desc& n,
                                 precision p) {
  const std::string name(precision_name(p));
  if constexpr (std::is_same_v<Set, detail::runtime_ops>)
    cx.fail_node(n, "runs in " + name +
                        ", which this kfuse::runtime was built without (CMake "
                        "KFUSE_RUNTIME_PRECISIONS): build it with " +
                        name +
                        ", compile in a precision it has, or compile header-only "
                        "(kfuse/graph/compile.hpp)");
  std::string how = "this plan compiler";
  if constexpr (detail::is_selective_op_set<Set>) how += " (" + detail::op_set_call(Set{}) + ")";
  cx.fail_node(n, "runs in " + name + ", which " + how +
                      " was not built for: add precision::" + name +
                      " to the set's in<...>, compile in a precision it has, or link "
                      "kfuse::runtime and call kfuse::compile from kfuse/runtime.hpp");
}

/// Node n needs family f's kernels, which this kfuse::runtime was built without.
[[noreturn]] inline void fail_runtime_family(const detail::compile_context& cx, const node_desc& n,
                                             detail::runtime_family f) {
  const std::string name(detail::runtime_family_name(f));
  cx.fail_node(n, "needs kfuse::runtime's op family " + name +
                      ", which this kfuse::runtime was built without (CMake KFUSE_RUNTIME_OPS): "
                      "add " +
                      name + " to it, or compile header-only (kfuse/graph/compile.hpp)");
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
