#pragma once
// The graph ops the plan compiler knows: one rule per op of KFUSE_GRAPH_OPS (graph/types.hpp),
// graph_ops::<op>_rule in graph/ops/<op>.hpp (graph/ops/op_rule.hpp says what a rule has).
// Adding an op: docs/executor.md, "Adding an op".
#include "kfuse/graph/ops/arg_reduce.hpp"
#include "kfuse/graph/ops/attention.hpp"
#include "kfuse/graph/ops/batch_norm.hpp"
#include "kfuse/graph/ops/broadcast.hpp"
#include "kfuse/graph/ops/cached_attention.hpp"
#include "kfuse/graph/ops/cast.hpp"
#include "kfuse/graph/ops/channel_shuffle.hpp"
#include "kfuse/graph/ops/concat.hpp"
#include "kfuse/graph/ops/conv2d.hpp"
#include "kfuse/graph/ops/conv_transpose2d.hpp"
#include "kfuse/graph/ops/convert_layout.hpp"
#include "kfuse/graph/ops/custom.hpp"
#include "kfuse/graph/ops/eltwise.hpp"
#include "kfuse/graph/ops/gather.hpp"
#include "kfuse/graph/ops/linear.hpp"
#include "kfuse/graph/ops/matmul.hpp"
#include "kfuse/graph/ops/max_pool_indices.hpp"
#include "kfuse/graph/ops/norm.hpp"
#include "kfuse/graph/ops/pad.hpp"
#include "kfuse/graph/ops/pool2d.hpp"
#include "kfuse/graph/ops/reduce.hpp"
#include "kfuse/graph/ops/reshape.hpp"
#include "kfuse/graph/ops/resize.hpp"
#include "kfuse/graph/ops/softmax.hpp"
#include "kfuse/graph/ops/strided_view.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Calls f(Rule{}) with the rule of op kind k: graph_ops::<op>_rule for each op of
/// KFUSE_GRAPH_OPS (graph/types.hpp).
template <class F>
void with_rule(op_kind k, F&& f) {
  switch (k) {
#define KFUSE_OP_RULE(name, nhwc) \
  case op_kind::name:             \
    return f(name##_rule{});
    KFUSE_GRAPH_OPS(KFUSE_OP_RULE)
#undef KFUSE_OP_RULE
  }
  detail::fail("graph", "no rule for op kind " + std::to_string(int(k)));
}

/// The rule of op kind K (graph_ops::<op>_rule), for code that names ops at compile time.
template <op_kind K>
struct rule_of;
#define KFUSE_OP_RULE_OF(name, nhwc) \
  template <>                        \
  struct rule_of<op_kind::name> {    \
    using type = name##_rule;        \
  };
KFUSE_GRAPH_OPS(KFUSE_OP_RULE_OF)
#undef KFUSE_OP_RULE_OF

/// The run-time hooks of a rule, by kind (for the passes).
inline bool optional_slot(op_kind k, std::size_t slot) {
  bool r = false;
  with_rule(k, [&](auto rule) { r = decltype(rule)::optional_slot(slot); });
  return r;
}
inline bool absorbs_chain(op_kind k) {
  bool r = false;
  with_rule(k, [&](auto rule) { r = decltype(rule)::absorbs_chain; });
  return r;
}
inline int chain_operand_slots(op_kind k) {
  int r = 0;
  with_rule(k, [&](auto rule) { r = decltype(rule)::chain_operand_slots; });
  return r;
}
inline bool folds_batch_norm(op_kind k) {
  bool r = false;
  with_rule(k, [&](auto rule) { r = decltype(rule)::folds_batch_norm; });
  return r;
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
