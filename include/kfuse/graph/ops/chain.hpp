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
#include <limits>
#include <type_traits>
#include <utility>

#include "kfuse/epilogue.hpp"
#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Stages a fused chain may hold (add / mul / bias operands count against chain_max_operands).
inline constexpr int chain_max_stages = 12;
inline constexpr int chain_max_operands = 3;

/// One stage of a chain: `operand` indexes the command's operand pointers (-1: none).
using chain_stage = stage_desc<std::int8_t>;

/// A chain's common_form (epilogue/stage.hpp), found once at plan time: operand slots where
/// the form has pointers.
struct chain_shape {
  common_form::act kind = common_form::act::other;
  std::int8_t scale = -1, bias = -1, addend = -1;  // operand slots; -1: none
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};

struct chain_list {
  chain_stage stages[chain_max_stages];
  int count = 0;
  chain_shape shape;  // set by with_shape()
};

/// The list with its shape: [per-channel mul] [bias] [add] [relu | clamp | hardswish | gelu_erf
/// | gelu_tanh | silu], each optional, in this order (the order of the arithmetic), or
/// common_form::act::other.
inline chain_list with_shape(chain_list l) {
  using act = common_form::act;
  chain_shape& sh = l.shape;
  sh = {};
  int s = 0;
  const auto at = [&](stage_kind k) { return s < l.count && l.stages[s].kind == k; };
  if (at(stage_kind::mul) && l.stages[s].per_channel) sh.scale = l.stages[s++].operand;
  if ((at(stage_kind::bias) || at(stage_kind::add)) &&
      (l.stages[s].kind == stage_kind::bias || l.stages[s].per_channel))
    sh.bias = l.stages[s++].operand;
  if (at(stage_kind::add) && !l.stages[s].per_channel) sh.addend = l.stages[s++].operand;
  act kind = act::clamp;
  if (at(stage_kind::relu)) {
    sh.lo = 0.f;
    ++s;
  } else if (at(stage_kind::clamp)) {
    sh.lo = l.stages[s].p0;
    sh.hi = l.stages[s].p1;
    ++s;
  } else {
    constexpr std::pair<stage_kind, act> named[] = {{stage_kind::hardswish, act::hardswish},
                                                    {stage_kind::gelu_erf, act::gelu_erf},
                                                    {stage_kind::gelu_tanh, act::gelu_tanh},
                                                    {stage_kind::silu, act::silu}};
    for (const auto& [stage, a] : named)
      if (at(stage)) {
        kind = a;
        ++s;
        break;
      }
  }
  sh.kind = s == l.count ? kind : act::other;
  return l;
}

/// The stage: `list` from the plan, `operands` resolved for this command (f32 tensors).
struct chain {
  static constexpr std::string_view name{"chain"};
  static constexpr int cost = 2;
  // Its switch over every stage kind is not inlined at each output vector (GCC calls it).
  static constexpr bool out_of_line = true;
  // Bias and per-channel operands are chosen at run time (the plan's rows_shape says channels).
  static constexpr bool may_use_channel = true;
  const chain_list* list = nullptr;
  const float* operands[chain_max_operands] = {};

  /// No stages: kernels may run without the epilogue (kfuse::is_identity).
  bool identity() const { return list->count == 0; }

  /// The chain as a common_form when it has that shape (kernels then run it inline).
  KFUSE_INLINE common_form common() const {
    const chain_shape& sh = list->shape;
    return {sh.kind,
            sh.bias >= 0 ? operands[sh.bias] : nullptr,
            sh.addend >= 0 ? operands[sh.addend] : nullptr,
            sh.lo,
            sh.hi,
            sh.scale >= 0 ? operands[sh.scale] : nullptr};
  }

  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    for (int s = 0; s < list->count; ++s)
      visit(list->stages[s], [&](const auto& stage) { x = stage(x, ctx); });
    return x;
  }

  /// The whole saved tile of a gemm / conv kernel, stage by stage: one dispatch per stage per
  /// tile instead of one per stage per vector.
  template <class V, bool PerLane>
  KFUSE_NOINLINE void apply_tile(const saved_tile& t) const {
    for (int s = 0; s < list->count; ++s)
      visit(list->stages[s], [&](const auto& stage) { t.transform<V, PerLane>(stage); });
  }

 private:
  // The stages whose form (epilogue/stage_list.hpp) is not a stage type's constructor.
  template <class F>
  static KFUSE_INLINE void visit_factor(const chain_stage& st, F&& f) {
    f([p = st.p0]<class V>(V x, const auto&) { return x * V(p); });
  }
  template <class F>
  static KFUSE_INLINE void visit_add(const chain_stage& st, const float* op, F&& f) {
    if (st.kind == stage_kind::bias || st.per_channel)
      f([op]<class V>(V x, const auto& ctx) { return x + ctx.channel_param(op); });
    else
      f([op]<class V>(V x, const auto& ctx) { return x + ctx.load(op); });
  }
  // The math stages (kfuse::math: exp, log, pow, elu...) run out of line, one switch per
  // vector type: inlined at every call site like the activations, their ~20 bodies of exp / log
  // code made every plan compiler TU 23% slower to build, for stages rare on hot paths.
  template <class V, class Ctx>
  static KFUSE_NOINLINE V apply_math(const chain_stage& st, const float* op, V x, const Ctx& ctx) {
    switch (st.kind) {
#define KFUSE_MATH_unary(name)
#define KFUSE_MATH_one_param(name)
#define KFUSE_MATH_two_params(name)
#define KFUSE_MATH_factor(name)
#define KFUSE_MATH_add_operand(name)
#define KFUSE_MATH_mul_operand(name)
#define KFUSE_MATH_math_unary(name) \
  case stage_kind::name:            \
    return kfuse::math::name{}(x, ctx);
#define KFUSE_MATH_math_one_param(name) \
  case stage_kind::name:                \
    return kfuse::math::name{st.p0}(x, ctx);
#define KFUSE_MATH_math_two_params(name) \
  case stage_kind::name:                 \
    return kfuse::math::name{st.p0, st.p1}(x, ctx);
#define KFUSE_MATH_math_operand(name) \
  case stage_kind::name:              \
    return kfuse::math::name<>::apply(x, st.per_channel ? ctx.channel_param(op) : ctx.load(op));
#define KFUSE_MATH_CASE(name, form) KFUSE_MATH_##form(name)
      KFUSE_BUILTIN_STAGES(KFUSE_MATH_CASE)
#undef KFUSE_MATH_CASE
#undef KFUSE_MATH_unary
#undef KFUSE_MATH_one_param
#undef KFUSE_MATH_two_params
#undef KFUSE_MATH_factor
#undef KFUSE_MATH_add_operand
#undef KFUSE_MATH_mul_operand
#undef KFUSE_MATH_math_unary
#undef KFUSE_MATH_math_one_param
#undef KFUSE_MATH_math_two_params
#undef KFUSE_MATH_math_operand
      default:
        return x;
    }
  }
  template <class F>
  static KFUSE_INLINE void visit_math(const chain_stage& st, const float* op, F&& f) {
    f([&st, op]<class V>(V x, const auto& ctx) { return apply_math(st, op, x, ctx); });
  }
  template <class F>
  static KFUSE_INLINE void visit_mul(const chain_stage& st, const float* op, F&& f) {
    if (st.per_channel)
      f([op]<class V>(V x, const auto& ctx) { return x * ctx.channel_param(op); });
    else
      f([op]<class V>(V x, const auto& ctx) { return x * ctx.load(op); });
  }

  /// Calls f with a callable (x, ctx) -> x for the stage.
  template <class F>
  KFUSE_INLINE void visit(const chain_stage& st, F&& f) const {
    const float* op = st.operand >= 0 ? operands[st.operand] : nullptr;
    switch (st.kind) {
#define KFUSE_CHAIN_unary(name) f(kfuse::name{})
#define KFUSE_CHAIN_one_param(name) f(kfuse::name{st.p0})
#define KFUSE_CHAIN_two_params(name) f(kfuse::name{st.p0, st.p1})
#define KFUSE_CHAIN_factor(name) visit_factor(st, f)
#define KFUSE_CHAIN_add_operand(name) visit_add(st, op, f)
#define KFUSE_CHAIN_mul_operand(name) visit_mul(st, op, f)
#define KFUSE_CHAIN_math_unary(name) visit_math(st, op, f)
#define KFUSE_CHAIN_math_one_param(name) visit_math(st, op, f)
#define KFUSE_CHAIN_math_two_params(name) visit_math(st, op, f)
#define KFUSE_CHAIN_math_operand(name) visit_math(st, op, f)
#define KFUSE_CHAIN_CASE(name, form) \
  case stage_kind::name:             \
    return KFUSE_CHAIN_##form(name);
      KFUSE_BUILTIN_STAGES(KFUSE_CHAIN_CASE)
#undef KFUSE_CHAIN_CASE
#undef KFUSE_CHAIN_unary
#undef KFUSE_CHAIN_one_param
#undef KFUSE_CHAIN_two_params
#undef KFUSE_CHAIN_factor
#undef KFUSE_CHAIN_add_operand
#undef KFUSE_CHAIN_mul_operand
#undef KFUSE_CHAIN_math_unary
#undef KFUSE_CHAIN_math_one_param
#undef KFUSE_CHAIN_math_two_params
#undef KFUSE_CHAIN_math_operand
    }
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
