#pragma once
// The built-in epilogue stages, declared once. Everything that enumerates them at run time is
// generated from this list: the graph's stage_kind enum and stage_name() (graph/types.hpp,
// graph/names.hpp), which stages read a tensor operand, and the plan's chain stage, which builds
// the stage object of each kind (graph/ops/chain.hpp).
//
// X(name, form): `name` is both the enum value and the stage type kfuse::name; `form` says how a
// run-time stage {kind, p0, p1, operand, per_channel} becomes that stage object:
//   unary        kfuse::name{}
//   one_param    kfuse::name{p0}
//   two_params   kfuse::name{p0, p1}
//   factor       x * p0
//   add_operand  x + operand (per channel for bias, or when per_channel)
//   mul_operand  x * operand (per channel when per_channel)
//   math_unary, math_one_param, math_two_params
//                as unary, one_param, two_params for a stage type kfuse::math::name
//   math_operand kfuse::math::name<>::apply(x, operand) (per channel when per_channel)
// Comparisons and logical stages give 1.0 (true) or 0.0 (false): a bool tensor of the graph is
// an f32 tensor of 0 / 1 (any value other than 0, NaN included, reads as true).
// A new stage is one line here plus its type (epilogue/activations.hpp, affine.hpp or math.hpp,
// whose names may be those of std:: functions). The order
// is the enum's: append, never reorder (plans and tests store the values).
#define KFUSE_BUILTIN_STAGES(X)  \
  X(relu, unary)                 \
  X(leaky_relu, one_param)       \
  X(clamp, two_params)           \
  X(sigmoid, unary)              \
  X(silu, unary)                 \
  X(tanh, unary)                 \
  X(gelu_tanh, unary)            \
  X(gelu_erf, unary)             \
  X(hardswish, unary)            \
  X(hardsigmoid, unary)          \
  X(scale, factor)               \
  X(bias, add_operand)           \
  X(add, add_operand)            \
  X(mul, mul_operand)            \
  X(exp, math_unary)             \
  X(log, math_unary)             \
  X(sqrt, math_unary)            \
  X(reciprocal, math_unary)      \
  X(abs, math_unary)             \
  X(floor, math_unary)           \
  X(ceil, math_unary)            \
  X(round, math_unary)           \
  X(sign, math_unary)            \
  X(erf, math_unary)             \
  X(softplus, math_unary)        \
  X(softsign, math_unary)        \
  X(mish, math_unary)            \
  X(elu, math_one_param)         \
  X(celu, math_one_param)        \
  X(selu, math_two_params)       \
  X(power, math_one_param)       \
  X(div, math_operand)           \
  X(max, math_operand)           \
  X(min, math_operand)           \
  X(pow, math_operand)           \
  X(prelu, math_operand)         \
  X(equal, math_operand)         \
  X(less, math_operand)          \
  X(less_equal, math_operand)    \
  X(greater, math_operand)       \
  X(greater_equal, math_operand) \
  X(logical_and, math_operand)   \
  X(logical_or, math_operand)    \
  X(logical_xor, math_operand)   \
  X(logical_not, math_unary)     \
  X(keep_if, math_operand)       \
  X(keep_unless, math_operand)
