#pragma once
// The full product (label full): every stage x every output type for one input type
// (KFUSE_FULL_IN), every backend of the arch under test. Integer inputs get a dequantize stage
// first and integer outputs a quantize stage last, so every chain is well-typed.
#include "kernels/eltwise_common.hpp"

namespace kt {

inline const std::vector<float>& full_channel_values() {
  static const std::vector<float> v = [] {
    std::vector<float> r(64);
    for (int i = 0; i < 64; ++i) r[i] = 0.125f * float(i % 11) - 0.6f;
    return r;
  }();
  return v;
}

// Wraps one stage into a well-typed chain for In -> Out.
template <class In, class Out, class Stage>
auto full_chain(const Stage& s) {
  using OutE = kfuse::elem_of<Out>;
  constexpr bool int_in = std::is_integral_v<In>;
  constexpr bool int_out = kfuse::elem_traits<OutE>::is_quantized;
  const kfuse::dequantize deq{{0.05f, std::is_signed_v<In> ? 0 : 128}};
  if constexpr (int_in && int_out)
    return kfuse::epilogue<kfuse::dequantize, Stage, kfuse::quantize<OutE>>{deq, s, {{0.03f, 3}}};
  else if constexpr (int_in)
    return kfuse::epilogue<kfuse::dequantize, Stage>{deq, s};
  else if constexpr (int_out)
    return kfuse::epilogue<Stage, kfuse::quantize<OutE>>{s, {{0.03f, 3}}};
  else
    return kfuse::epilogue<Stage>{s};
}

template <class B, class In, class Out>
void full_for_output(std::mt19937& rng) {
  const std::vector<float>& cv = full_channel_values();
  const kfuse::dims4 d{2, 13, 3, 7};
  auto flat = [&](const auto& stage) { check_flat<B, In, Out>(full_chain<In, Out>(stage), rng); };
  auto layouts = [&](const auto& stage) {
    check_layouts<B, In, Out>(full_chain<In, Out>(stage), d, rng);
  };
  flat(kfuse::scale{1.75f});
  flat(kfuse::relu{});
  flat(kfuse::leaky_relu{0.2f});
  flat(kfuse::clamp{-1.f, 2.f});
  flat(kfuse::gelu_erf{});
  flat(kfuse::gelu_tanh{});
  flat(kfuse::silu{});
  flat(kfuse::sigmoid{});
  flat(kfuse::tanh{});
  flat(kfuse::hardswish{});
  flat(kfuse::hardsigmoid{});
  layouts(kfuse::bias{{cv.data(), 13}});
  layouts(kfuse::add<>{{{cv.data(), 13}, true}});
  layouts(kfuse::mul<>{{{cv.data(), 13}, true}});
  if constexpr (!kfuse::elem_traits<kfuse::elem_of<Out>>::is_quantized) {
    if constexpr (!std::is_integral_v<In>)
      check_flat<B, In, Out>(kfuse::epilogue<kfuse::relu, kfuse::cast<kfuse::elem_of<Out>>>{{}, {}},
                             rng);
    else
      check_flat<B, In, Out>(
          kfuse::epilogue<kfuse::dequantize, kfuse::cast<kfuse::elem_of<Out>>>{{{0.05f, 0}}, {}},
          rng);
  }
}

template <class In>
void full_product() {
  if (!cpu_can_run()) return;
  std::mt19937 rng(1234);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    full_for_output<B, In, float>(rng);
    full_for_output<B, In, kfuse::f16_t>(rng);
    full_for_output<B, In, kfuse::bf16_t>(rng);
    full_for_output<B, In, std::int8_t>(rng);
    full_for_output<B, In, std::uint8_t>(rng);
  });
}

}  // namespace kt
