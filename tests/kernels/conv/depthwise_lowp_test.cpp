// depthwise_conv2d, bf16 and i8 recipes: every shape of dw_shapes() in both layouts, against
// the double reference computed from the exact stored inputs.
//  bf16: bf16 activations, f32 (rounded to bf16 when packed) or bf16 weights, f32 compute; bf16
//        or f32 outputs (one bf16 ulp).
//  i8:   u8 / s8 activations with a zero point, s8 weights, exact integer sums; requantize per
//        channel (u8) or per tensor (i8) within one quantization step; a float output of the
//        scaled sums.
#include "kernels/conv/depthwise_common.hpp"

using namespace kt;

namespace {

template <class L>
void bf16_cases() {
  std::mt19937 rng(11);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const auto& s : dw_shapes()) {
      const auto x = random_activations<kfuse::bf16_t>(kfuse::numel(s.in_dims()), rng, -4.f, 4.f);
      auto w = random_weights_oihw<float>(s, rng);
      // The bf16 recipe rounds f32 weights to bf16 when packing: the reference uses those values.
      for (float& v : w) v = kfuse::to_float(kfuse::to_bf16(v));
      const auto wb = random_weights_oihw<kfuse::bf16_t>(s, rng);
      const index_t n_out = kfuse::numel(s.out_dims());
      const auto bias = random_activations<float>(s.k, rng);
      const auto res = random_activations<kfuse::bf16_t>(n_out, rng);
      const std::span<const float> bs(bias);
      const std::span<const kfuse::bf16_t> rs(res);
      dw_check<kfuse::bf16, L, B, kfuse::bf16_t, kfuse::bf16_t>(s, x, w, kfuse::epilogue<>{},
                                                                "bf16 bare");
      dw_check<kfuse::bf16, L, B, kfuse::bf16_t, float>(
          s, x, wb, kfuse::epilogue<kfuse::bias, kfuse::relu>{{bs}, {}},
          "bf16 weights, bias+relu -> f32");
      dw_check<kfuse::bf16, L, B, kfuse::bf16_t, kfuse::bf16_t>(
          s, x, w, kfuse::epilogue<kfuse::add<kfuse::bf16>, user_square>{{{rs}}, {}},
          "bf16 residual+user");
    }
  });
}

template <class L, class T>
void int8_cases(std::int32_t zp) {
  std::mt19937 rng(13);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const auto& s : dw_shapes()) {
      const auto x = random_activations<T>(kfuse::numel(s.in_dims()), rng, -128.f, 255.f);
      const auto w = random_weights_oihw<std::int8_t>(s, rng, -128.f, 127.f);
      std::vector<float> bias(std::size_t(s.k)), mult(std::size_t(s.k));
      std::uniform_int_distribution<int> bi(-2000, 2000);
      std::uniform_real_distribution<float> mi(0.5f / 4096, 4.f / 4096);
      for (auto& v : bias) v = float(bi(rng));
      for (auto& v : mult) v = mi(rng);
      const std::span<const float> bs(bias), ms(mult);
      dw_check<kfuse::i8, L, B, T, std::uint8_t>(
          s, x, w,
          kfuse::epilogue<kfuse::bias, kfuse::relu, kfuse::requantize<kfuse::u8>>{
              {bs}, {}, {0.f, 5, ms}},
          "bias+relu+requantize<u8> per channel", zp);
      dw_check<kfuse::i8, L, B, T, std::int8_t>(
          s, x, w, kfuse::epilogue<kfuse::requantize<kfuse::i8>>{{1.f / 2048, -3}},
          "requantize<i8> per tensor", zp);
      dw_check<kfuse::i8, L, B, T, float>(s, x, w, kfuse::epilogue<kfuse::scale>{{0.001f}},
                                          "scaled sums -> f32", zp);
    }
  });
}

}  // namespace

TEST_CASE("depthwise bf16 nhwc: shapes x epilogues vs double reference", "[depthwise][bf16]") {
  if (!cpu_can_run()) return;
  bf16_cases<kfuse::nhwc>();
}

TEST_CASE("depthwise bf16 nchw: shapes x epilogues vs double reference", "[depthwise][bf16]") {
  if (!cpu_can_run()) return;
  bf16_cases<kfuse::nchw>();
}

TEST_CASE("depthwise i8 nhwc: u8 and s8 activations with zero points", "[depthwise][int8]") {
  if (!cpu_can_run()) return;
  int8_cases<kfuse::nhwc, std::uint8_t>(7);
  int8_cases<kfuse::nhwc, std::int8_t>(-3);
}

TEST_CASE("depthwise i8 nchw: u8 and s8 activations with zero points", "[depthwise][int8]") {
  if (!cpu_can_run()) return;
  int8_cases<kfuse::nchw, std::uint8_t>(128);
  int8_cases<kfuse::nchw, std::int8_t>(0);
}

TEST_CASE("depthwise i8: zero point outside the input's range throws", "[depthwise][errors]") {
  using Catch::Matchers::Contains;
  using DW = kfuse::depthwise_conv2d<kfuse::i8, kfuse::nchw, test_arch>;
  const auto s = dw_shape(4, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1);
  std::vector<std::int8_t> w(std::size_t(s.weight_count()), 1);
  std::vector<std::uint8_t> xu(100, 1);
  std::vector<std::int8_t> xs(100, 1);
  std::vector<float> y(100);
  const auto p = DW::pack(w.data(), s);
  const auto out = kfuse::view<kfuse::nchw>(y.data(), s.out_dims());
  CHECK_THROWS_WITH(DW::run(kfuse::view<kfuse::nchw>(xu.data(), s.in_dims()), p, out, {}, {}, 256),
                    Contains("input zero point 256 is outside the input's element range"));
  CHECK_THROWS_WITH(DW::run(kfuse::view<kfuse::nchw>(xs.data(), s.in_dims()), p, out, {}, {}, -129),
                    Contains("input zero point -129 is outside"));
  CHECK_NOTHROW(DW::run(kfuse::view<kfuse::nchw>(xs.data(), s.in_dims()), p, out, {}, {}, -128));
}
