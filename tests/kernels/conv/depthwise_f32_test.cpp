// depthwise_conv2d, f32 recipe: every shape of dw_shapes() in both layouts, fused epilogues
// (bare, bias + relu, residual add, a user stage, an out-of-line user stage, bias + quantize
// to i8), every backend of the
// arch under test, thread-count invariance and the error paths.
#include "kernels/conv/depthwise_common.hpp"

using namespace kt;

namespace {

template <class L>
void f32_epilogues() {
  std::mt19937 rng(7);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const auto& s : dw_shapes()) {
      const auto x = random_activations<float>(kfuse::numel(s.in_dims()), rng);
      const auto w = random_weights_oihw<float>(s, rng);
      const index_t n_out = kfuse::numel(s.out_dims());
      const auto bias = random_activations<float>(s.k, rng);
      const auto res = random_activations<float>(n_out, rng);
      const std::span<const float> bs(bias), rs(res);
      std::vector<float> qs(std::size_t(s.k), 0.02f);
      dw_check<kfuse::f32, L, B, float, float>(s, x, w, kfuse::epilogue<>{}, "bare");
      dw_check<kfuse::f32, L, B, float, float>(
          s, x, w, kfuse::epilogue<kfuse::bias, kfuse::relu>{{bs}, {}}, "bias+relu");
      dw_check<kfuse::f32, L, B, float, float>(
          s, x, w, kfuse::epilogue<kfuse::add<>, user_square>{{{rs}}, {}}, "residual+user");
      // An out-of-line epilogue (the graph's run-time chain is one): the tiles are saved and
      // it runs per stage per tile (NHWC: every tile; NCHW: all but a row's clamped last one).
      std::atomic<long> tile_calls{0};
      dw_check<kfuse::f32, L, B, float, float>(
          s, x, w,
          kfuse::epilogue<kfuse::add<>, user_tile_bias>{{{rs}}, {bias.data(), &tile_calls}},
          "residual+out-of-line bias");
      if (std::is_same_v<L, kfuse::nhwc>) CHECK(tile_calls.load() > 0);
      dw_check<kfuse::f32, L, B, float, std::int8_t>(
          s, x, w, kfuse::epilogue<kfuse::bias, kfuse::quantize<kfuse::i8>>{{bs}, {{0.f, 3, qs}}},
          "bias+quantize<i8>");
    }
  });
}

}  // namespace

TEST_CASE("depthwise f32 nhwc: shapes x epilogues vs double reference", "[depthwise][nhwc]") {
  if (!cpu_can_run()) return;
  f32_epilogues<kfuse::nhwc>();
}

TEST_CASE("depthwise f32 nchw: shapes x epilogues vs double reference", "[depthwise][nchw]") {
  if (!cpu_can_run()) return;
  f32_epilogues<kfuse::nchw>();
}

TEST_CASE("depthwise f32: 1 and 2 threads, batch 3, are bitwise identical", "[depthwise]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(3);
  const auto s = dw_shape(21, 14, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, 3);
  const auto x = random_activations<float>(kfuse::numel(s.in_dims()), rng);
  const auto w = random_weights_oihw<float>(s, rng);
  auto both = [&]<class L>() {
    using DW = kfuse::depthwise_conv2d<kfuse::f32, L, test_arch>;
    const auto p = DW::pack(w.data(), s);
    std::vector<float> y1(std::size_t(kfuse::numel(s.out_dims()))), y2(y1.size());
    DW::run(kfuse::view<L>(x.data(), s.in_dims()), p, kfuse::view<L>(y1.data(), s.out_dims()), {},
            {1});
    const auto info = DW::run(kfuse::view<L>(x.data(), s.in_dims()), p,
                              kfuse::view<L>(y2.data(), s.out_dims()), {}, {2});
    CHECK(info.threads >= 1);
    CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
  };
  both.operator()<kfuse::nhwc>();
  both.operator()<kfuse::nchw>();
}

TEST_CASE("depthwise nhwc: channel groups on one thread match the reference and two threads",
          "[depthwise][nhwc]") {
  if (!cpu_can_run()) return;
  // One thread, 5+ tap rows whose input rows pass 24 KiB: the rows run a channel group at a
  // time (depthwise.hpp). Groups with a channel tail, stride 1 and 2, the generic 7x7 path,
  // 7-row maps, batch 2; two threads run ungrouped, bitwise the same.
  std::mt19937 rng(11);
  for (const auto& s :
       {dw_shape(200, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2, 1, 2),
        dw_shape(72, 28, 28, 5, 5, 2, 2, 2, 2, 2, 2), dw_shape(240, 7, 7, 5, 5, 1, 1, 2, 2, 2, 2),
        dw_shape(67, 16, 16, 7, 7, 1, 1, 3, 3, 3, 3)}) {
    INFO("C " << s.c << " " << s.h << "x" << s.w << " " << s.r << "x" << s.s << " stride "
              << s.stride_h);
    const auto x = random_activations<float>(kfuse::numel(s.in_dims()), rng);
    const auto w = random_weights_oihw<float>(s, rng);
    const auto bias = random_activations<float>(s.k, rng);
    const std::span<const float> bs(bias);
    for_each_backend([&](auto b) {
      dw_check<kfuse::f32, kfuse::nhwc, decltype(b), float, float>(
          s, x, w, kfuse::epilogue<kfuse::bias, kfuse::relu>{{bs}, {}}, "bias+relu, 1 thread", 0,
          1);
    });
    using DW = kfuse::depthwise_conv2d<kfuse::f32, kfuse::nhwc, test_arch>;
    const auto p = DW::pack(w.data(), s);
    std::vector<float> y1(std::size_t(kfuse::numel(s.out_dims())), std::nanf("")), y2 = y1;
    DW::run(kfuse::view<kfuse::nhwc>(x.data(), s.in_dims()), p,
            kfuse::view<kfuse::nhwc>(y1.data(), s.out_dims()), {}, {1});
    DW::run(kfuse::view<kfuse::nhwc>(x.data(), s.in_dims()), p,
            kfuse::view<kfuse::nhwc>(y2.data(), s.out_dims()), {}, {2});
    CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("depthwise: bad inputs throw kfuse::error naming the problem", "[depthwise][errors]") {
  using Catch::Matchers::Contains;
  using DW =
      kfuse::depthwise_conv2d<kfuse::f32, kfuse::nhwc, test_arch, kfuse::epilogue<kfuse::bias>>;
  const auto s = dw_shape(8, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1);
  std::vector<float> w(std::size_t(s.weight_count()), 0.5f), x(8 * 36, 1.f), y(8 * 36),
      bias(8, 0.f), bias7(7, 0.f);
  const auto p = DW::pack(w.data(), s);
  const kfuse::epilogue<kfuse::bias> ep{{bias}};
  const auto in = kfuse::view<kfuse::nhwc>(static_cast<const float*>(x.data()), s.in_dims());
  const auto out = kfuse::view<kfuse::nhwc>(y.data(), s.out_dims());
  CHECK_NOTHROW(DW::run(in, p, out, ep));

  auto grouped = s;
  grouped.groups = 4;
  CHECK_THROWS_WITH(DW::pack(w.data(), grouped), Contains("not a depthwise shape"));
  auto wide = s;
  wide.k = 16;
  CHECK_THROWS_WITH(DW::pack(w.data(), wide), Contains("not a depthwise shape"));
  auto big = s;
  big.r = big.s = 9;
  big.pad_top = big.pad_left = big.pad_bottom = big.pad_right = 0;
  CHECK_THROWS_WITH(DW::pack(w.data(), big), Contains("output size is not positive"));
  CHECK_THROWS_WITH(DW::pack(static_cast<const float*>(nullptr), s), Contains("weights is null"));
  CHECK_THROWS_WITH(DW::run(kfuse::view<kfuse::nhwc>(x.data(), {1, 7, 6, 6}), p, out, ep),
                    Contains("input has 7 channels, the packed weights 8"));
  CHECK_THROWS_WITH(DW::run(in, p, kfuse::view<kfuse::nhwc>(y.data(), {1, 8, 5, 6}), ep),
                    Contains("output dims (N 1, C 8, H 5, W 6) do not match"));
  CHECK_THROWS_WITH(
      DW::run(kfuse::view<kfuse::nhwc>(static_cast<const float*>(nullptr), s.in_dims()), p, out,
              ep),
      Contains("input is null"));
  CHECK_THROWS_WITH(
      DW::run(in, p, kfuse::view<kfuse::nhwc>(static_cast<float*>(nullptr), s.out_dims()), ep),
      Contains("output is null"));
  CHECK_THROWS_WITH(DW::run(in, p, out, kfuse::epilogue<kfuse::bias>{{bias7}}),
                    Contains("stage 'bias': 7 bias values for 8 channels"));
  CHECK_THROWS_WITH(DW::run(in, DW::packed{}, out, ep), Contains("packed weights are empty"));
  CHECK_THROWS_WITH(DW::run(in, p, out, ep, {}, 3),
                    Contains("zero point is only meaningful for the i8 recipe"));
  CHECK_THROWS_WITH(DW::run(in, p, kfuse::view<kfuse::nhwc>(x.data() + 1, s.out_dims()), ep),
                    Contains("input and output overlap"));
  auto unpadded = s;
  unpadded.pad_top = unpadded.pad_left = unpadded.pad_bottom = unpadded.pad_right = 0;
  const auto p0 = DW::pack(w.data(), unpadded);
  CHECK_THROWS_WITH(DW::run(kfuse::view<kfuse::nhwc>(x.data(), {1, 8, 2, 2}), p0,
                            kfuse::view<kfuse::nhwc>(y.data(), {1, 8, 1, 1}), ep),
                    Contains("output size is not positive"));
  try {
    DW::run(in, DW::packed{}, out, ep);
  } catch (const kfuse::error& e) {
    CHECK(std::string(e.what()).rfind("depthwise_conv2d: ", 0) == 0);
  }
}
