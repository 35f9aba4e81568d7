#pragma once
// What kfuse::reduce (kernels/reduce.hpp) and the graph's reduce op compute over the reduced
// positions of each output value, and which extreme arg_reduce finds.
#include <cstdint>

namespace kfuse {

enum class reduce_kind : std::uint8_t {
  sum,
  mean,
  max,
  min,
  prod,
  l1,           // sum |x|
  l2,           // sqrt(sum x^2)
  sum_square,   // sum x^2
  log_sum_exp,  // log(sum exp(x)), computed as m + log(sum exp(x - m)), m the max
};

/// Which extreme kfuse::arg_reduce (kernels/arg_reduce.hpp) and the graph's arg_reduce find.
enum class arg_kind : std::uint8_t { max, min };

}  // namespace kfuse
