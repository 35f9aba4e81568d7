// few_channel_conv2d (kernels/conv/few_channel_conv2d.hpp): NCHW in, NHWC out, 1-4 input
// channels; geometries (kernel 1x1 .. 7x7 and 5x3, strides 1 / 2 / 3 rows, asymmetric pads,
// dilation, rows of 1 .. 37 outputs: the 12-, 4- and 1-pixel tiles, K of one vector, two, and past
// one panel), fused epilogues (residual add read in NHWC, out-of-line user stage), poisoned
// outputs, every backend, 1 vs 2 threads bitwise identical, against the double reference; the
// errors.
#include "kfuse/kernels/conv/few_channel_conv2d.hpp"

#include "kernels/conv/conv_reference.hpp"
#include "support/test_support.hpp"

using namespace kt;
using kfuse::conv_shape;

namespace {

std::vector<conv_shape> shapes() {
  return {
      make(1, 3, 17, 23, 16, 3, 3, 2, {1, 1, 1, 1}),     // a MobileNetV3 stem, 12 columns
      make(2, 3, 30, 30, 32, 7, 7, 2, {3, 3, 3, 3}),     // a ResNet stem: 15 columns (12 + 1 x 3)
      make(1, 1, 9, 40, 5, 3, 3, 1, {0, 2, 1, 0}),       // one channel, asymmetric pads, K < L
      make(3, 4, 6, 5, 33, 1, 1, 1),                     // 1x1, K past two vectors
      make(1, 2, 11, 11, 64, 3, 3, 1, {2, 2, 2, 2}, 2),  // dilation 2, two panels
      make(1, 3, 1, 1, 17, 3, 3, 1, {1, 1, 1, 1}),       // 1x1 map: padded taps only
      make(2, 3, 37, 75, 24, 3, 3, 2, {1, 0, 1, 1}),     // 37 columns: 3 x 12 + 1
  };
}

/// x in NCHW, the exact result (and its scale) converted to NHWC.
struct problem : conv_problem<kfuse::nchw> {
  problem(const conv_shape& shape, std::mt19937& rng) : conv_problem(shape, rng) {
    const kfuse::dims4 d = s.out_dims();
    const std::vector<double> e = exact, a = scale;
    for (index_t n = 0; n < d.n; ++n)
      for (index_t k = 0; k < d.c; ++k)
        for (index_t i = 0; i < d.h * d.w; ++i) {
          const auto to = std::size_t((n * d.h * d.w + i) * d.c + k),
                     from = std::size_t((n * d.c + k) * d.h * d.w + i);
          exact[to] = e[from];
          scale[to] = a[from];
        }
  }
};

template <class B, class Ep>
void check(const problem& p, const Ep& ep, std::string_view what, int threads = 0) {
  using C = kfuse::few_channel_conv2d<test_arch, Ep, B>;
  REQUIRE(C::takes(p.s));
  const auto w = C::pack(p.w.data(), p.s);
  const index_t n_out = kfuse::numel(p.s.out_dims());
  guarded<float> y(n_out, 0xFF);  // NaN: every output must be written
  const kfuse::workspace_buffer ws(C::workspace_size(p.s, std::max(threads, 2)));
  const auto info =
      C::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(p.x.data()), p.s.in_dims()), w,
             kfuse::view<kfuse::nhwc>(y.data, p.s.out_dims()), ep, ws.view(), {threads});
  CHECK(info.kernel == "few_channel_conv2d");
  REQUIRE(y.guards_intact());
  int failures = 0;
  for (index_t i = 0; i < n_out; ++i) {
    const double want = ref_epilogue(ep, p.exact[std::size_t(i)], ref_ctx{i, i % p.s.k});
    const double tol = 1e-6 + 3e-6 * p.scale[std::size_t(i)];
    if (!(std::fabs(double(y.data[i]) - want) <= tol) && failures++ < 5)
      UNSCOPED_INFO(what << " N" << p.s.n << " C" << p.s.c << " " << p.s.h << "x" << p.s.w << " K"
                         << p.s.k << " " << p.s.r << "x" << p.s.s << " at " << i << ": got "
                         << y.data[i] << " want " << want);
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("few_channel_conv2d: NCHW in, NHWC out vs the double reference", "[conv2d]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(31);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (conv_shape s : shapes()) {
      const problem p(s, rng);
      const std::span<const float> bias(p.bias), res(p.residual);
      check<B>(p, kfuse::epilogue<kfuse::bias, kfuse::add<>, kfuse::relu>{{bias}, {{res}}, {}},
               "bias+residual+relu");
      if constexpr (std::is_same_v<B, kfuse::backend::xsimd>) {
        check<B>(p, kfuse::epilogue<>{}, "bare", 1);
        check<B>(p, kfuse::epilogue<kfuse::bias, kfuse::hardswish>{{bias}, {}}, "bias+hardswish");
        std::atomic<long> tile_calls{0};
        check<B>(p,
                 kfuse::epilogue<kfuse::scale, user_square, user_tile_bias>{
                     {0.5f}, {}, {p.bias.data(), &tile_calls}},
                 "user stages, out of line");
      }
    }
  });
}

TEST_CASE("few_channel_conv2d: 1 and 2 threads are bitwise identical", "[conv2d][threads]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(32);
  using C = kfuse::few_channel_conv2d<test_arch>;
  const conv_shape s = make(2, 3, 40, 36, 40, 3, 3, 2, {1, 1, 1, 1});
  const problem p(s, rng);
  const auto w = C::pack(p.w.data(), s);
  std::vector<float> y1(p.exact.size()), y2(p.exact.size());
  const kfuse::workspace_buffer ws(C::workspace_size(s, 2));
  const auto x = kfuse::view<kfuse::nchw>(static_cast<const float*>(p.x.data()), s.in_dims());
  C::run(x, w, kfuse::view<kfuse::nhwc>(y1.data(), s.out_dims()), {}, ws.view(), {1});
  const auto info =
      C::run(x, w, kfuse::view<kfuse::nhwc>(y2.data(), s.out_dims()), {}, ws.view(), {2});
  CHECK(info.threads == 2);
  CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
}

// A bf16 plan's stem writes bf16 for its bf16 reader: the f32 result, each value rounded to
// nearest even once (the hardware conversion flushes denormals, which these values are not),
// every tile width and both strides; the output poisoned.
TEST_CASE("few_channel_conv2d: bf16 output is the f32 output rounded", "[conv2d]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(33);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    using Ep = kfuse::epilogue<kfuse::bias, kfuse::hardswish>;
    using C = kfuse::few_channel_conv2d<test_arch, Ep, B>;
    for (conv_shape s : shapes()) {
      const problem p(s, rng);
      const Ep ep{{std::span<const float>(p.bias)}, {}};
      const auto w = C::pack(p.w.data(), s);
      const index_t n_out = kfuse::numel(s.out_dims());
      const kfuse::workspace_buffer ws(C::workspace_size(s, 2));
      const auto x = kfuse::view<kfuse::nchw>(static_cast<const float*>(p.x.data()), s.in_dims());
      std::vector<float> y32(static_cast<std::size_t>(n_out));
      guarded<kfuse::bf16_t> y16(n_out, 0xFF);
      C::run(x, w, kfuse::view<kfuse::nhwc>(y32.data(), s.out_dims()), ep, ws.view(), {1});
      C::run(x, w, kfuse::view<kfuse::nhwc>(y16.data, s.out_dims()), ep, ws.view(), {2});
      REQUIRE(y16.guards_intact());
      int failures = 0;
      for (index_t i = 0; i < n_out; ++i)
        if (y16.data[i].bits != kfuse::to_bf16(y32[std::size_t(i)]).bits && failures++ < 5)
          UNSCOPED_INFO("K" << s.k << " " << s.r << "x" << s.s << " at " << i << ": got bits "
                            << y16.data[i].bits << " for " << y32[std::size_t(i)]);
      CHECK(failures == 0);
    }
  });
}

TEST_CASE("few_channel_conv2d: errors", "[conv2d]") {
  using C = kfuse::few_channel_conv2d<test_arch>;
  const std::vector<float> w(5 * 16 * 9, 0.5f);
  for (const conv_shape& s : {make(1, 5, 8, 8, 16, 3, 3, 1, {1, 1, 1, 1}),
                              make(1, 4, 8, 8, 16, 3, 3, 1, {1, 1, 1, 1}, 1, 2),
                              make(1, 3, 9, 9, 16, 3, 3, 3, {1, 1, 1, 1})}) {
    CHECK_FALSE(C::takes(s));
    CHECK_THROWS_WITH(C::pack(w.data(), s), Catch::Matchers::Contains("few_channel_conv2d pack") &&
                                                Catch::Matchers::Contains("at most 4 input"));
  }
  const conv_shape s = make(1, 3, 8, 8, 16, 3, 3, 2, {1, 1, 1, 1});
  const auto pw = C::pack(w.data(), s);
  std::vector<float> x(3 * 8 * 8), y(16 * 4 * 4);
  const kfuse::workspace_buffer ws(C::workspace_size(s, 1));
  CHECK_THROWS_WITH(C::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(x.data()),
                                                    kfuse::dims4{1, 3, 8, 7}),
                           pw, kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), {}, ws.view()),
                    Catch::Matchers::Contains("few_channel_conv2d: the input is not"));
  CHECK_THROWS_WITH(
      C::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(x.data()), s.in_dims()), pw,
             kfuse::view<kfuse::nhwc>(y.data(), kfuse::dims4{1, 16, 4, 3}), {}, ws.view()),
      Catch::Matchers::Contains("output shape"));
  CHECK_THROWS_WITH(
      C::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(x.data()), s.in_dims()), pw,
             kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), {}, kfuse::workspace{}),
      Catch::Matchers::Contains("workspace"));
}
