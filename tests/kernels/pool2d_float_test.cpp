// pool2d, f32 and bf16: max, average (count_include_pad both ways, ceil mode), global max and
// average, both layouts, every backend of the arch under test, fused epilogues, NaN propagation,
// thread-count invariance, and every error path.
#include "kernels/pool2d_common.hpp"

using namespace kt;

namespace {

template <class L>
void float_cases() {
  std::mt19937 rng(21);
  using kfuse::pool_kind;
  for_each_backend([&](auto b) {
    using B = decltype(b);
    std::vector<kfuse::pool_shape> shapes = pool_windows(pool_kind::max, true);
    for (bool incl : {true, false})
      for (const auto& s : pool_windows(pool_kind::avg, incl)) shapes.push_back(s);
    for (auto k : {pool_kind::max, pool_kind::avg})
      for (const auto& s : pool_globals(k)) shapes.push_back(s);
    for (const auto& s : shapes) {
      std::vector<float> x(std::size_t(kfuse::numel(s.in_dims())));
      fill_random(x.data(), index_t(x.size()), rng, -4.f, 4.f);
      std::vector<kfuse::bf16_t> xb(x.size());
      fill_random(xb.data(), index_t(xb.size()), rng, -4.f, 4.f);
      std::vector<float> bias(std::size_t(s.c));
      fill_random(bias.data(), s.c, rng, -1.f, 1.f);
      const std::span<const float> bs(bias);
      pool_check<kfuse::f32, L, B, float>(s, x, kfuse::epilogue<>{}, "f32");
      pool_check<kfuse::f32, L, B, float>(s, x, kfuse::epilogue<kfuse::bias, kfuse::relu>{{bs}, {}},
                                          "f32 bias+relu");
      pool_check<kfuse::bf16, L, B, kfuse::bf16_t>(s, xb, kfuse::epilogue<>{}, "bf16");
      pool_check<kfuse::bf16, L, B, float>(s, xb, kfuse::epilogue<pool_user_stage>{},
                                           "bf16 user stage -> f32");
    }
  });
}

}  // namespace

TEST_CASE("pool2d f32/bf16 nhwc: every mode vs double reference", "[pool2d][nhwc]") {
  if (!cpu_can_run()) return;
  float_cases<kfuse::nhwc>();
}

TEST_CASE("pool2d f32/bf16 nchw: every mode vs double reference", "[pool2d][nchw]") {
  if (!cpu_can_run()) return;
  float_cases<kfuse::nchw>();
}

TEST_CASE("pool2d nchw: f32 of stride 1 / 2 takes the rows path where the arch has masked loads",
          "[pool2d][nchw]") {
  if (!cpu_can_run()) return;
  using kfuse::pool_kind;
  using P = kfuse::pool2d<kfuse::f32, kfuse::nchw, test_arch>;
  using Pb = kfuse::pool2d<kfuse::bf16, kfuse::nchw, test_arch>;
  constexpr bool masked = kfuse::simd::has_partial_f32<typename P::vec::impl>;
  auto kernel = [](auto tag, const kfuse::pool_shape& s) {
    using Q = decltype(tag);
    using T = typename Q::storage;
    std::vector<T> x(std::size_t(kfuse::numel(s.in_dims())));
    std::vector<T> y(std::size_t(kfuse::numel(s.out_dims())));
    return std::string(Q::run(kfuse::view<kfuse::nchw>(x.data(), s.in_dims()), s,
                              kfuse::view<kfuse::nchw>(y.data(), s.out_dims()))
                           .micro_kernel);
  };
  const auto s2 = pool_case(pool_kind::max, 3, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1);
  const auto s1 = pool_case(pool_kind::avg, 3, 9, 20, 5, 5, 1, 1, 2, 2, 2, 2);
  const auto s3 = pool_case(pool_kind::max, 3, 9, 20, 3, 3, 3, 3, 1, 1, 1, 1);
  CHECK(kernel(P{}, s2) == (masked ? "nchw max rows" : "nchw max phases"));
  CHECK(kernel(P{}, s1) == (masked ? "nchw avg rows" : "nchw avg phases"));
  CHECK(kernel(P{}, s3) == "nchw max phases");   // stride 3
  CHECK(kernel(Pb{}, s2) == "nchw max phases");  // bf16 input
}

TEST_CASE("pool2d: output sizes follow PyTorch (ceil mode drops a window starting in the padding)",
          "[pool2d]") {
  using kfuse::pool_kind;
  // 6 + 2*1 - 3 = 5: floor 5/2 + 1 = 3, ceil 3 + 1 = 4 but the 4th window would start at
  // 3*2 - 1 = 5 < 6: kept. 5 with pad 1, 2x2 s2: floor 3, ceil 4 starts at 6 - 1 = 5 >= 5: dropped.
  CHECK(pool_case(pool_kind::max, 1, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, false).out_h() == 3);
  CHECK(pool_case(pool_kind::max, 1, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, true).out_h() == 4);
  CHECK(pool_case(pool_kind::max, 1, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1, false).out_h() == 3);
  CHECK(pool_case(pool_kind::max, 1, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1, true).out_h() == 3);
  CHECK(pool_case(pool_kind::max, 1, 7, 7, 2, 2, 2, 2, 0, 0, 0, 0, true).out_w() == 4);
  CHECK(global_case(pool_kind::avg, 3, 9, 9).out_dims() == kfuse::dims4{1, 3, 1, 1});
}

TEST_CASE("pool2d f32: max propagates NaN, 1 and 2 threads are bitwise identical", "[pool2d]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(5);
  auto both = [&]<class L>() {
    for (auto kind : {kfuse::pool_kind::max, kfuse::pool_kind::avg}) {
      auto s = pool_case(kind, 19, 14, 15, 3, 3, 2, 2, 1, 1, 1, 1, true, false, 3);
      std::vector<float> x(std::size_t(kfuse::numel(s.in_dims())));
      fill_random(x.data(), index_t(x.size()), rng);
      x[100] = NAN;
      for_each_backend([&](auto b) {
        pool_check<kfuse::f32, L, decltype(b), float>(s, x, kfuse::epilogue<>{}, "NaN");
      });
      using P = kfuse::pool2d<kfuse::f32, L, test_arch>;
      std::vector<float> y1(std::size_t(kfuse::numel(s.out_dims()))), y2(y1.size());
      P::run(kfuse::view<L>(x.data(), s.in_dims()), s, kfuse::view<L>(y1.data(), s.out_dims()), {},
             {1});
      P::run(kfuse::view<L>(x.data(), s.in_dims()), s, kfuse::view<L>(y2.data(), s.out_dims()), {},
             {2});
      CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
    }
  };
  both.operator()<kfuse::nhwc>();
  both.operator()<kfuse::nchw>();
}

TEST_CASE("pool2d: bad inputs throw kfuse::error naming the problem", "[pool2d][errors]") {
  using Catch::Matchers::Contains;
  using kfuse::pool_kind;
  using P = kfuse::pool2d<kfuse::f32, kfuse::nchw, test_arch, kfuse::epilogue<kfuse::bias>>;
  std::vector<float> x(4 * 8 * 8, 1.f), y(4 * 8 * 8), bias(4), bias3(3);
  const kfuse::epilogue<kfuse::bias> ep{{bias}};
  auto run = [&](const kfuse::pool_shape& s) {
    return P::run(kfuse::view<kfuse::nchw>(x.data(), s.in_dims()), s,
                  kfuse::view<kfuse::nchw>(y.data(), s.out_dims()), ep);
  };
  const auto ok = pool_case(pool_kind::avg, 4, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1);
  CHECK_NOTHROW(run(ok));
  auto bad = ok;
  bad.pad_top = 2;
  CHECK_THROWS_WITH(run(bad), Contains("must be at most half the window"));
  bad = ok;
  bad.r = 11;
  bad.pad_top = bad.pad_bottom = 0;
  CHECK_THROWS_WITH(run(bad), Contains("output size is not positive: the window 11x3 is larger "
                                       "than the padded input 8x10"));
  bad = ok;
  bad.stride_w = 0;
  CHECK_THROWS_WITH(run(bad), Contains("strides must be positive"));
  bad = ok;
  bad.s = 0;
  CHECK_THROWS_WITH(run(bad), Contains("window size must be positive"));
  bad = ok;
  bad.pad_left = -1;
  CHECK_THROWS_WITH(run(bad), Contains("padding must not be negative"));
  bad = ok;
  bad.c = 0;
  CHECK_THROWS_WITH(run(bad), Contains("input extent must be positive"));
  auto glob = global_case(pool_kind::max, 4, 8, 8);
  glob.pad_top = 1;
  CHECK_THROWS_WITH(run(glob), Contains("global pooling takes no padding"));
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nchw>(x.data(), {1, 4, 8, 7}), ok,
                           kfuse::view<kfuse::nchw>(y.data(), ok.out_dims()), ep),
                    Contains("input dims (N 1, C 4, H 8, W 7) do not match the shape's"));
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nchw>(x.data(), ok.in_dims()), ok,
                           kfuse::view<kfuse::nchw>(y.data(), {1, 4, 3, 4}), ep),
                    Contains("output dims (N 1, C 4, H 3, W 4) do not match the pooling's "
                             "(N 1, C 4, H 4, W 4)"));
  CHECK_THROWS_WITH(
      P::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(nullptr), ok.in_dims()), ok,
             kfuse::view<kfuse::nchw>(y.data(), ok.out_dims()), ep),
      Contains("input is null"));
  CHECK_THROWS_WITH(
      P::run(kfuse::view<kfuse::nchw>(x.data(), ok.in_dims()), ok,
             kfuse::view<kfuse::nchw>(static_cast<float*>(nullptr), ok.out_dims()), ep),
      Contains("output is null"));
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nchw>(x.data(), ok.in_dims()), ok,
                           kfuse::view<kfuse::nchw>(x.data() + 3, ok.out_dims()), ep),
                    Contains("input and output overlap"));
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nchw>(x.data(), ok.in_dims()), ok,
                           kfuse::view<kfuse::nchw>(y.data(), ok.out_dims()),
                           kfuse::epilogue<kfuse::bias>{{bias3}}),
                    Contains("pool2d: stage 'bias': 3 bias values for 4 channels"));
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nchw>(x.data(), ok.in_dims()), ok,
                           kfuse::view<kfuse::nchw>(y.data(), ok.out_dims()), ep, {}, 2),
                    Contains("zero point is only meaningful for integer elements"));
}
