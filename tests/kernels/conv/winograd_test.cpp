// conv2d's Winograd F(4x4, 3x3) path (kernels/conv/winograd.hpp): forced on many geometries
// (channel tails of the vector and of the NR block, maps that are not multiples of 4 including
// 1x1 and 1xW, pads 0 / 1 / 2 and asymmetric, tiles spanning images, blocks of tiles spanning
// images), fused epilogues (residual add at the right pixel, out-of-line user stage, bf16
// output), poisoned outputs, every backend, 1 vs 2 threads bitwise identical; against the
// double-precision direct reference. The automatic choice and its errors.
//
// Tolerance: |y - exact| <= 1e-6 + 4e-6 * sum |x w| (the direct path's: 3e-6 * sum |x w|). The
// transforms add roundings weighted by the coefficients of B (<= 5), G (<= 1/4) and A (<= 8), so
// the error is a few ulps of sum |x w| rather than one; measured on these shapes: at most
// 1.6e-6 * sum |x w| (0.4 of the bound, asserted below 1).
#include "kernels/conv/conv_reference.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "support/test_support.hpp"

using namespace kt;
using kfuse::conv_shape;

namespace {

using L = kfuse::nhwc;

std::vector<conv_shape> winograd_shapes() {
  return {
      make(1, 16, 8, 8, 16, 3, 3, 1, {1, 1, 1, 1}),     // one vector each, 2x2 tiles
      make(2, 21, 9, 11, 70, 3, 3, 1, {1, 1, 1, 1}),    // channel tails, K past one NR block
      make(1, 5, 7, 5, 3, 3, 3, 1, {0, 0, 0, 0}),       // unpadded: 5x3 outputs, few channels
      make(3, 17, 6, 6, 9, 3, 3, 1, {2, 1, 0, 2}),      // asymmetric pads, 3 images
      make(1, 8, 1, 1, 20, 3, 3, 1, {1, 1, 1, 1}),      // 1x1 map: padded taps only
      make(2, 12, 1, 13, 33, 3, 3, 1, {1, 1, 1, 1}),    // one row
      make(1, 64, 28, 28, 64, 3, 3, 1, {1, 1, 1, 1}),   // 49 tiles: blocks of whole tiles
      make(5, 32, 14, 14, 48, 3, 3, 1, {1, 1, 1, 1}),   // blocks spanning images
      make(1, 200, 10, 10, 40, 3, 3, 1, {1, 1, 1, 1}),  // C past one vector many times
      make(1, 192, 6, 6, 200, 3, 3, 1, {1, 1, 1, 1}),   // 5.5 MB of transformed weights: prefetched
  };
}

using problem = conv_problem<L>;

template <class B, class Out = float, class Ep>
void check_winograd(const problem& p, const Ep& ep, std::string_view what, int threads = 0) {
  using C = kfuse::conv2d<kfuse::f32, L, test_arch, Ep, B>;
  const auto w = C::pack(p.w.data(), p.s, -1, kfuse::conv_algorithm::winograd);
  const index_t n_out = kfuse::numel(p.s.out_dims());
  guarded<Out> y(n_out, 0xFF);  // NaN: every output must be written
  const auto info = C::run(kfuse::view<L>(static_cast<const float*>(p.x.data()), p.s.in_dims()), w,
                           kfuse::view<L>(y.data, p.s.out_dims()), ep, {threads});
  CHECK(std::string_view(info.micro_kernel).substr(0, 29) == "conv winograd f(4x4,3x3) nhwc");
  REQUIRE(y.guards_intact());
  int failures = 0;
  double worst = 0;
  for (index_t i = 0; i < n_out; ++i) {
    const double want = ref_epilogue(ep, p.exact[std::size_t(i)], ref_ctx{i, i % p.s.k});
    const double bound = 4e-6 * p.scale[std::size_t(i)];
    const double tol = tolerance<Out>(want) + 1e-6 + bound;
    const double got = double(kfuse::to_float(y.data[i]));
    const double err = std::fabs(got - representable<Out>(want));
    if (bound > 0) worst = std::max(worst, (err - tolerance<Out>(want)) / bound);
    if (!(err <= tol) && failures++ < 5)
      UNSCOPED_INFO(what << " N" << p.s.n << " C" << p.s.c << " " << p.s.h << "x" << p.s.w << " K"
                         << p.s.k << " at " << i << ": got " << got << " want " << want);
  }
  CHECK(failures == 0);
  CHECK(worst < 1.0);
}

}  // namespace

TEST_CASE("conv2d winograd: geometries x fused epilogues vs the double reference",
          "[conv2d][winograd]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(21);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const conv_shape& s : winograd_shapes()) {
      const problem p(s, rng);
      const std::span<const float> bias(p.bias), res(p.residual);
      check_winograd<B>(
          p, kfuse::epilogue<kfuse::bias, kfuse::add<>, kfuse::relu>{{bias}, {{res}}, {}},
          "bias+residual+relu");
      if constexpr (std::is_same_v<B, kfuse::backend::xsimd>) {
        check_winograd<B>(p, kfuse::epilogue<>{}, "bare", 1);
        std::atomic<long> tile_calls{0};
        check_winograd<B>(p,
                          kfuse::epilogue<kfuse::scale, user_square, user_tile_bias>{
                              {0.5f}, {}, {p.bias.data(), &tile_calls}},
                          "user stages, out of line");
        CHECK(tile_calls > 0);
        check_winograd<B, kfuse::bf16_t>(
            p, kfuse::epilogue<kfuse::relu, kfuse::cast<kfuse::bf16>>{{}, {}}, "relu->bf16");
      }
    }
  });
}

TEST_CASE("conv2d winograd: 1 and 2 threads are bitwise identical", "[conv2d][winograd][threads]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(22);
  using C = kfuse::conv2d<kfuse::f32, L, test_arch>;
  // 1 block of tiles (the threads split K; one-vector panels) and many (the threads split the
  // blocks; NV-vector panels).
  for (const conv_shape& s : {make(1, 24, 14, 14, 140, 3, 3, 1, {1, 1, 1, 1}),
                              make(2, 16, 30, 26, 64, 3, 3, 1, {1, 1, 1, 1})}) {
    const problem p(s, rng);
    const auto w = C::pack(p.w.data(), s, -1, kfuse::conv_algorithm::winograd);
    std::vector<float> y1(p.exact.size()), y2(p.exact.size());
    const auto x = kfuse::view<L>(static_cast<const float*>(p.x.data()), s.in_dims());
    C::run(x, w, kfuse::view<L>(y1.data(), s.out_dims()), {}, {1});
    const auto info = C::run(x, w, kfuse::view<L>(y2.data(), s.out_dims()), {}, {2});
    CHECK(info.threads == 2);
    CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("conv2d winograd: the automatic choice and its errors", "[conv2d][winograd]") {
  using C = kfuse::conv2d<kfuse::f32, L, test_arch>;
  const auto path = [](const conv_shape& s, kfuse::conv_algorithm a) {
    const std::vector<float> w(std::size_t(s.weight_count()), 0.25f);
    return std::string(C::micro_kernel(C::pack(w.data(), s, -1, a).path_)).substr(0, 13);
  };
  const conv_shape big = make(1, 64, 56, 56, 64, 3, 3, 1, {1, 1, 1, 1});
  CHECK(path(big, kfuse::conv_algorithm::automatic) == "conv winograd");
  CHECK(path(big, kfuse::conv_algorithm::direct) == "conv implicit");
  // ResNet-18's 7x7 x 512 layer at batch 1: 4 tiles, each transformed weight used 4 times.
  CHECK(path(make(1, 512, 7, 7, 512, 3, 3, 1, {1, 1, 1, 1}), kfuse::conv_algorithm::automatic) ==
        "conv implicit");
  CHECK(path(make(8, 512, 7, 7, 512, 3, 3, 1, {1, 1, 1, 1}), kfuse::conv_algorithm::automatic) ==
        "conv winograd");
  // Few channels: the transforms would cost more than the multiplies they save.
  CHECK(path(make(1, 3, 64, 64, 16, 3, 3, 1, {1, 1, 1, 1}), kfuse::conv_algorithm::automatic) ==
        "conv implicit");
  const std::vector<float> w(64 * 64 * 9, 0.f);
  for (const conv_shape& s : {make(1, 64, 56, 56, 64, 3, 3, 2, {1, 1, 1, 1}),
                              make(1, 64, 56, 56, 64, 5, 5, 1, {2, 2, 2, 2}),
                              make(1, 64, 56, 56, 64, 3, 3, 1, {2, 2, 2, 2}, 2),
                              make(1, 64, 56, 56, 64, 3, 3, 1, {1, 1, 1, 1}, 1, 2)})
    CHECK_THROWS_WITH(
        C::pack(w.data(), s, -1, kfuse::conv_algorithm::winograd),
        Catch::Matchers::Contains("conv2d pack") && Catch::Matchers::Contains("Winograd needs"));
  using N = kfuse::conv2d<kfuse::f32, kfuse::nchw, test_arch>;
  CHECK_THROWS_WITH(N::pack(w.data(), big, -1, kfuse::conv_algorithm::winograd),
                    Catch::Matchers::Contains("Winograd needs"));
}
