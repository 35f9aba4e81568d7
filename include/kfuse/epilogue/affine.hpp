#pragma once
// Affine stages and second-tensor stages: scale, bias, add, mul.
#include <span>

#include "kfuse/epilogue/stage.hpp"

namespace kfuse {

/// y = x * value
struct scale {
  static constexpr std::string_view name{"scale"};
  float value = 1.f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return x * V(value);
  }
};

/// y = x + values[channel]
struct bias {
  static constexpr std::string_view name{"bias"};
  static constexpr bool needs_channel = true;
  std::span<const float> values;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return x + ctx.channel_param(values.data());
  }
  template <class Check>
  void validate(const Check& c) const {
    c.expect_data(values.data(), values.size(), "bias values");
    c.expect_per_channel(index_t(values.size()), "bias values");
    c.expect_params_apart(values.data(), values.size_bytes(), "bias values");
  }
};

namespace stage_detail {
// The shared body of add and mul: a second tensor, elementwise (same shape as the output) or
// one value per channel.
template <class E>
struct second_tensor {
  std::span<const storage_t<E>> other;
  bool per_channel = false;

  template <class V, class Ctx>
  KFUSE_INLINE V operand(const Ctx& ctx) const {
    return per_channel ? ctx.channel_param(other.data()) : ctx.load(other.data());
  }
  template <class Check>
  void validate(const Check& c) const {
    c.expect_data(other.data(), other.size(), per_channel ? "operand values" : "second tensor");
    if (per_channel) {
      c.expect_per_channel(index_t(other.size()), "operand values");
      c.expect_params_apart(other.data(), other.size_bytes(), "operand values");
    } else {
      if (index_t(other.size()) != c.numel)
        c.fail("second tensor has " + std::to_string(other.size()) + " elements, the output " +
               std::to_string(c.numel));
      c.expect_operand_apart(other.data(), other.size_bytes(), sizeof(storage_t<E>),
                             "second tensor");
    }
  }
};
}  // namespace stage_detail

/// y = x + other  (residual), or x + other[channel] with per_channel
template <class E = f32>
struct add : stage_detail::second_tensor<E> {
  static constexpr std::string_view name{"add"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return x + this->template operand<V>(ctx);
  }
};

/// y = x * other, or x * other[channel] with per_channel
template <class E = f32>
struct mul : stage_detail::second_tensor<E> {
  static constexpr std::string_view name{"mul"};
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return x * this->template operand<V>(ctx);
  }
};

}  // namespace kfuse
