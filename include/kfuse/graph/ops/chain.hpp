#pragma once
// chain: an epilogue stage that runs a list of eltwise stages chosen at plan time.
//
// The graph compiler fuses any chain of activations, scales, biases and second-tensor adds /
// muls into the producer (gemm, eltwise) through this one stage, so each kernel is
// instantiated once per recipe rather than once per combination of stages (one gemm epilogue
// costs ~2.5 s of compile time at -O1). The price is one predictable switch per stage per
// output vector, on registers, before the single store. A producer whose output the plan
// quantizes adds one quantize<E> stage after the chain (chain_epilogue).
#include <cstdint>
#include <type_traits>

#include "kfuse/epilogue.hpp"
#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Stages a fused chain may hold (add / mul / bias operands count against chain_max_operands).
inline constexpr int chain_max_stages = 12;
inline constexpr int chain_max_operands = 3;

/// One stage of a chain: `operand` indexes the command's operand pointers (-1: none).
struct chain_stage {
  stage_kind kind = stage_kind::relu;
  float p0 = 0.f, p1 = 0.f;
  std::int8_t operand = -1;
  bool per_channel = false;
};

struct chain_list {
  chain_stage stages[chain_max_stages];
  int count = 0;
};

/// The stage: `list` from the plan, `operands` resolved for this command (f32 tensors).
struct chain {
  static constexpr std::string_view name{"chain"};
  static constexpr int cost = 2;
  const chain_list* list = nullptr;
  const float* operands[chain_max_operands] = {};

  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    const int n = list->count;
    for (int s = 0; s < n; ++s) {
      const chain_stage& st = list->stages[s];
      switch (st.kind) {
        case stage_kind::relu:
          x = kfuse::relu{}(x, ctx);
          break;
        case stage_kind::leaky_relu:
          x = kfuse::leaky_relu{st.p0}(x, ctx);
          break;
        case stage_kind::clamp:
          x = kfuse::clamp{st.p0, st.p1}(x, ctx);
          break;
        case stage_kind::sigmoid:
          x = kfuse::sigmoid{}(x, ctx);
          break;
        case stage_kind::silu:
          x = kfuse::silu{}(x, ctx);
          break;
        case stage_kind::tanh:
          x = kfuse::tanh{}(x, ctx);
          break;
        case stage_kind::gelu_tanh:
          x = kfuse::gelu_tanh{}(x, ctx);
          break;
        case stage_kind::gelu_erf:
          x = kfuse::gelu_erf{}(x, ctx);
          break;
        case stage_kind::hardswish:
          x = kfuse::hardswish{}(x, ctx);
          break;
        case stage_kind::hardsigmoid:
          x = kfuse::hardsigmoid{}(x, ctx);
          break;
        case stage_kind::scale:
          x = x * V(st.p0);
          break;
        case stage_kind::bias:
          x = x + ctx.channel_param(operands[st.operand]);
          break;
        case stage_kind::add:
          x = x + (st.per_channel ? ctx.channel_param(operands[st.operand])
                                  : ctx.load(operands[st.operand]));
          break;
        case stage_kind::mul:
          x = x * (st.per_channel ? ctx.channel_param(operands[st.operand])
                                  : ctx.load(operands[st.operand]));
          break;
      }
    }
    return x;
  }
};

/// The epilogue of a graph producer writing Out: the chain alone for float, the chain then
/// quantize<E> when the plan absorbed the quantization of its output (Out = uint8_t / int8_t):
/// the int8 tensor is written from registers, without an f32 round trip through memory.
template <class Out>
struct chain_epilogue {
  using type = epilogue<chain>;
  static KFUSE_INLINE type make(const chain& c, const quant_params&) { return type{c}; }
};
template <class Out>
requires std::is_integral_v<Out>
struct chain_epilogue<Out> {
  using type = epilogue<chain, quantize<elem_of<Out>>>;
  static KFUSE_INLINE type make(const chain& c, const quant_params& q) {
    return type{c, quantize<elem_of<Out>>{q}};
  }
};
template <class Out>
using chain_epilogue_t = typename chain_epilogue<Out>::type;

}  // namespace graph_ops

KFUSE_END_NAMESPACE
