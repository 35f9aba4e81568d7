// eltwise, covering set (label ci): every stage on f32 through every backend of the arch under
// test, every input x output element type on one representative chain, per-channel stages in
// both layouts, large values, and every bad-input error.
#include "kernels/eltwise_common.hpp"

using namespace kt;
using kfuse::epilogue;

namespace {

// Per-channel parameters for up to 64 channels.
const std::vector<float> channel_values = [] {
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[i] = 0.25f * float(i % 9) - 1.f;
  return v;
}();

template <class B>
void every_stage_f32(std::mt19937& rng) {
  std::vector<float> other(4096);
  fill_random(other.data(), index_t(other.size()), rng);
  check_flat<B, float, float>(epilogue<kfuse::scale>{{1.75f}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::relu>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::leaky_relu>{{0.1f}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::clamp>{{0.f, 6.f}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::gelu_erf>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::gelu_tanh>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::silu>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::sigmoid>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::tanh>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::hardswish>{{}}, rng);
  check_flat<B, float, float>(epilogue<kfuse::hardsigmoid>{{}}, rng);
  // Elementwise second tensors: the residual covers the first n elements of `other`.
  for (index_t n : test_lengths(kfuse::simd::vec_for<test_arch, B>::lanes)) {
    guarded<float> in(n, 0);
    fill_random(in.data, n, rng);
    const epilogue<kfuse::add<>, kfuse::mul<>> ep{
        {{std::span<const float>(other.data(), std::size_t(n))}},
        {{std::span<const float>(other.data(), std::size_t(n))}}};
    const auto generic =
        run_eltwise<kfuse::arch::generic, B, float, float>(in.data, n, ep, nullptr, "scalar");
    const auto got =
        run_eltwise<test_arch, B, float, float>(in.data, n, ep, nullptr, impl_prefix<B>());
    check_against_reference(got, generic, in.data, n, ep, nullptr, false, "add+mul");
  }
  check_flat<B, float, kfuse::bf16_t>(epilogue<kfuse::cast<kfuse::bf16>>{{}}, rng);
  check_flat<B, float, kfuse::f16_t>(epilogue<kfuse::cast<kfuse::f16>>{{}}, rng);
  check_flat<B, float, std::int8_t>(epilogue<kfuse::quantize<kfuse::i8>>{{{0.05f, 3}}}, rng);
  check_flat<B, float, std::uint8_t>(epilogue<kfuse::quantize<kfuse::u8>>{{{0.03f, 128}}}, rng);
  check_flat<B, std::int8_t, float>(epilogue<kfuse::dequantize>{{{0.1f, -2}}}, rng);
  check_flat<B, float, std::int8_t>(epilogue<kfuse::requantize<kfuse::i8>>{{7.5f, -1}}, rng);
}

// One representative chain from every input type to every output type, against the double
// reference (the generic arch is compared with in the other cases; here it would double the
// compile time of this TU).
template <class B, class In, class Out>
void chain_for_types(std::mt19937& rng) {
  const kfuse::dims4 d{2, 13, 3, 5};
  if constexpr (kfuse::elem_traits<kfuse::elem_of<Out>>::is_quantized) {
    using E = kfuse::elem_of<Out>;
    if constexpr (std::is_integral_v<In>) {
      const epilogue<kfuse::dequantize, kfuse::scale, kfuse::bias, kfuse::gelu_tanh,
                     kfuse::quantize<E>>
          ep{{{0.04f, 1}}, {1.5f}, {{channel_values.data(), 13}}, {}, {{0.02f, 10}}};
      check_layouts<B, In, Out, false>(ep, d, rng);
    } else {
      const epilogue<kfuse::scale, kfuse::bias, kfuse::gelu_tanh, kfuse::quantize<E>> ep{
          {1.5f}, {{channel_values.data(), 13}}, {}, {{0.02f, 10}}};
      check_layouts<B, In, Out, false>(ep, d, rng);
      check_flat<B, In, Out, false>(
          epilogue<kfuse::scale, kfuse::relu, kfuse::quantize<E>>{{0.5f}, {}, {{0.03f, 5}}}, rng);
    }
  } else if constexpr (std::is_integral_v<In>) {
    const epilogue<kfuse::dequantize, kfuse::scale, kfuse::bias, kfuse::gelu_tanh> ep{
        {{0.04f, 1}}, {1.5f}, {{channel_values.data(), 13}}, {}};
    check_layouts<B, In, Out, false>(ep, d, rng);
  } else {
    const epilogue<kfuse::scale, kfuse::bias, kfuse::gelu_tanh> ep{
        {1.5f}, {{channel_values.data(), 13}}, {}};
    check_layouts<B, In, Out, false>(ep, d, rng);
    check_flat<B, In, Out, false>(
        epilogue<kfuse::scale, kfuse::relu, kfuse::gelu_tanh>{{1.5f}, {}, {}}, rng);
  }
}

template <class B, class In>
void chains_from(std::mt19937& rng) {
  chain_for_types<B, In, float>(rng);
  chain_for_types<B, In, kfuse::f16_t>(rng);
  chain_for_types<B, In, kfuse::bf16_t>(rng);
  chain_for_types<B, In, std::int8_t>(rng);
  chain_for_types<B, In, std::uint8_t>(rng);
}

}  // namespace

TEST_CASE("eltwise: every stage on f32", "[eltwise]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(42);
  for_each_backend([&](auto b) { every_stage_f32<decltype(b)>(rng); });
}

TEST_CASE("eltwise: every input x output element type on one chain", "[eltwise]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(7);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    chains_from<B, float>(rng);
    chains_from<B, kfuse::f16_t>(rng);
    chains_from<B, kfuse::bf16_t>(rng);
    chains_from<B, std::int8_t>(rng);
    chains_from<B, std::uint8_t>(rng);
  });
}

TEST_CASE("eltwise: per-channel parameters in both layouts", "[eltwise]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(3);
  std::vector<float> scales(64), other(64);
  std::vector<std::int32_t> zps(64);
  for (int i = 0; i < 64; ++i) {
    scales[i] = 0.01f + 0.002f * float(i);
    zps[i] = i % 7 - 3;
    other[i] = 1.f + 0.1f * float(i % 5);
  }
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const kfuse::dims4& d :
         {kfuse::dims4{1, 1, 1, 1}, kfuse::dims4{2, 3, 7, 7}, kfuse::dims4{1, 13, 1, 33},
          kfuse::dims4{1, 64, 2, 3}, kfuse::dims4{3, 17, 5, 1}}) {
      const auto C = std::size_t(d.c);
      const epilogue<kfuse::bias, kfuse::mul<>, kfuse::relu, kfuse::quantize<kfuse::i8>> ep{
          {{channel_values.data(), C}},
          {{std::span<const float>(other.data(), C), true}},
          {},
          {{1.f, 0, {scales.data(), C}, {zps.data(), C}}}};
      check_layouts<B, float, std::int8_t>(ep, d, rng);
      const epilogue<kfuse::bias, kfuse::silu> ep2{{{channel_values.data(), C}}, {}};
      check_layouts<B, float, float>(ep2, d, rng);
    }
  });
}

TEST_CASE("eltwise: large values saturate instead of producing NaN", "[eltwise]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(11);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    check_flat<B, float, float>(epilogue<kfuse::sigmoid>{{}}, rng, -500.f, 500.f);
    check_flat<B, float, float>(epilogue<kfuse::silu>{{}}, rng, -500.f, 500.f);
    check_flat<B, float, float>(epilogue<kfuse::gelu_tanh>{{}}, rng, -500.f, 500.f);
    check_flat<B, float, float>(epilogue<kfuse::gelu_erf>{{}}, rng, -500.f, 500.f);
    check_flat<B, float, float>(epilogue<kfuse::tanh>{{}}, rng, -500.f, 500.f);
    check_flat<B, float, std::int8_t>(epilogue<kfuse::quantize<kfuse::i8>>{{{0.01f, 0}}}, rng,
                                      -1e6f, 1e6f);
    check_flat<B, float, kfuse::bf16_t>(epilogue<kfuse::scale>{{1.f}}, rng, -1e38f, 1e38f);
  });
}

TEST_CASE("eltwise: bad inputs throw kfuse::error naming the problem", "[eltwise][errors]") {
  if (!cpu_can_run()) return;  // the checks run on the arch's code path
  std::vector<float> x(64, 1.f), y(64);
  const epilogue<kfuse::relu> ep{{}};
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(kfuse::eltwise(std::span<const float>(x), std::span<float>(y.data(), 63), ep),
                    Contains("input has 64 elements, the output 63"));
  CHECK_THROWS_WITH(kfuse::eltwise(static_cast<const float*>(nullptr), y.data(), 8, ep),
                    Contains("input is null but has 8 elements"));
  CHECK_THROWS_WITH(kfuse::eltwise(x.data(), static_cast<float*>(nullptr), 8, ep),
                    Contains("output is null"));
  const auto* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x.data()) + 1);
  CHECK_THROWS_WITH(kfuse::eltwise(odd, y.data(), 8, ep),
                    Contains("not aligned to its element size"));
  CHECK_THROWS_WITH(kfuse::eltwise(x.data(), x.data() + 3, 16, ep), Contains("overlap"));
  CHECK_NOTHROW(kfuse::eltwise(x.data(), x.data(), 16, ep));
  CHECK_NOTHROW(kfuse::eltwise(x.data(), y.data(), 0, ep));

  const kfuse::dims4 d{1, 16, 2, 2};
  const epilogue<kfuse::bias> wrong_bias{{{channel_values.data(), 13}}};
  CHECK_THROWS_WITH(kfuse::eltwise(kfuse::view<kfuse::nchw>(x.data(), d),
                                   kfuse::view<kfuse::nchw>(y.data(), d), wrong_bias),
                    Contains("stage 'bias': 13 bias values for 16 channels"));
  CHECK_THROWS_WITH(
      kfuse::eltwise(kfuse::view<kfuse::nhwc>(x.data(), d),
                     kfuse::view<kfuse::nhwc>(y.data(), kfuse::dims4{1, 16, 4, 1}), ep),
      Contains("shapes differ"));
  std::vector<float> scales(16, 0.1f);
  std::vector<std::int8_t> q(64);
  const epilogue<kfuse::quantize<kfuse::i8>> per_channel{{{1.f, 0, {scales.data(), 16}}}};
  CHECK_THROWS_WITH(kfuse::eltwise(x.data(), q.data(), 64, per_channel),
                    Contains("scales is per channel but the tensor has no channel axis"));
  const epilogue<kfuse::quantize<kfuse::i8>> zero_scale{{{0.f, 0}}};
  CHECK_THROWS_WITH(kfuse::eltwise(x.data(), q.data(), 64, zero_scale),
                    Contains("stage 'quantize': scale must be positive"));
  const epilogue<kfuse::add<>> short_residual{{{std::span<const float>(x.data(), 10)}}};
  CHECK_THROWS_WITH(kfuse::eltwise(x.data(), y.data(), 64, short_residual),
                    Contains("second tensor has 10 elements, the output 64"));
  const epilogue<kfuse::clamp> bad_clamp{{5.f, 1.f}};
  CHECK_THROWS_WITH(kfuse::eltwise(x.data(), y.data(), 64, bad_clamp),
                    Contains("lo must not exceed hi"));
}

TEST_CASE("eltwise: 1 and 2 threads give identical results", "[eltwise][threads]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(5);
  const index_t n = 300001;
  std::vector<float> x(static_cast<std::size_t>(n)), y1(x.size()), y2(x.size());
  fill_random(x.data(), n, rng);
  const epilogue<kfuse::scale, kfuse::gelu_tanh> ep{{0.5f}, {}};
  const auto one = kfuse::eltwise(x.data(), y1.data(), n, ep, {1});
  const auto two = kfuse::eltwise(x.data(), y2.data(), n, ep, {2});
  CHECK(one.threads == 1);
  CHECK(two.threads == std::min(2, kfuse::default_pool().size()));
  CHECK(std::memcmp(y1.data(), y2.data(), sizeof(float) * std::size_t(n)) == 0);
}
