#pragma once
// A step of the plan compiler: one node, or a producer with the eltwise nodes fused into it, with
// its stage chain and typed provenance. Passes rewrite steps; lowering turns each live one into
// replay commands.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// One stage of a step's chain: `operand` is a plan tensor (-1: none).
using op_stage = stage_desc<std::int32_t>;

struct step {
  int node = -1;                      // the graph node it was built from
  op_kind op = op_kind::eltwise;      // the op that runs (a batch_norm runs as an eltwise chain)
  op_kind source = op_kind::eltwise;  // the node's own op (reports, profiles)
  std::vector<std::string> fused;     // names of the nodes absorbed into it
  std::int32_t x = -1;                // data input
  std::vector<std::int32_t> others;   // weights and other inputs (not chain operands)
  std::vector<op_stage> chain;        // stages fused after the op (eltwise: the op itself)
  std::int32_t out = -1;
  bool alive = true;
  int folded_bn = -1;          // conv2d: the batch_norm node folded into its weights and bias
  bool bn_after_bias = false;  // the folded batch norm came after a bias (the chain's first)
  tensor_quant out_quant{};    // an int8 output (quantize absorbed): its scale and zero point
  std::int32_t gate = -1;      // conv2d: a channel gate scaling its weights (passes/channel_gate)
  std::int32_t gated_in = -1;  // int8 gated conv2d: the multiply's output (its quant params)
  // matmul: the strided_view node operand a / b is read through (passes/view_absorption), -1
  // when the operand is read as it is.
  std::array<int, 2> views{-1, -1};
  // attention: Q, K and V read as column ranges of one merged projection (passes/qkv_merge):
  // the tensors whose [B, S, H, d] shapes they have, and their first column in it; -1 when each
  // is read as it is.
  std::array<std::int32_t, 3> qkv_shape_of{-1, -1, -1};
  std::array<index_t, 3> qkv_column{};
};

/// Tensor operands of a chain (a scale stage has none).
inline int operand_count(const std::vector<op_stage>& chain) {
  int k = 0;
  for (const op_stage& s : chain) k += s.operand >= 0 && s.kind != stage_kind::scale;
  return k;
}

/// Bytes a chain's operands hold for a tensor of `numel` values and `channels` channels: a
/// per-channel operand (bias, per-channel add / mul) one value a channel, a second tensor one
/// value an element.
inline double operand_bytes(const std::vector<op_stage>& chain, index_t numel, index_t channels) {
  double bytes = 0;
  for (const op_stage& s : chain)
    if (s.operand >= 0 && s.kind != stage_kind::scale)
      bytes += 4.0 * double(s.kind == stage_kind::bias || s.per_channel ? channels : numel);
  return bytes;
}

/// Whether a chain reads a per-channel parameter (then the eltwise rows follow channels).
inline bool chain_per_channel(const std::vector<op_stage>& chain) {
  for (const op_stage& s : chain)
    if (s.kind == stage_kind::bias || (stage_reads_operand(s.kind) && s.per_channel)) return true;
  return false;
}

}  // namespace detail

KFUSE_END_NAMESPACE
