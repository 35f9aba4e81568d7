// conv2d f32: many geometries (odd channels, 1x1 / 3x3 / 5x5 / 7x7, strides, asymmetric pads,
// dilation, groups, H/W of 1 .. 33), both layouts, every backend of the arch under test, fused
// epilogues (bare, bias+relu, bias+residual add+relu, a user stage), poisoned outputs, 1 vs 2
// threads, and batch-norm folding, against the double-precision direct reference.
#include "kernels/conv/conv_reference.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "kfuse/kernels/conv/fold_batch_norm.hpp"
#include "support/test_support.hpp"

using namespace kt;
using kfuse::conv_shape;

// One layout per executable (compile time): this file tests NHWC; conv2d_*_nchw_test.cpp
// includes it with CONV_TEST_LAYOUT = kfuse::nchw.
#ifndef CONV_TEST_LAYOUT
#define CONV_TEST_LAYOUT kfuse::nhwc
#endif

namespace {

using kt::ref_stage;

using kt::make;

conv_shape diagonal(conv_shape s, index_t blocks, index_t block_groups = 1) {
  s.diagonal = blocks;
  s.block_groups = block_groups;
  return s;
}

std::vector<conv_shape> test_shapes() {
  return {
      make(1, 3, 7, 7, 5, 3, 3, 1, {1, 1, 1, 1}),           // odd channels, 3x3 pad 1
      make(2, 13, 9, 11, 17, 3, 3, 2, {0, 1, 1, 0}),        // stride 2, asymmetric pads
      make(1, 13, 1, 1, 7, 1, 1, 1),                        // 1x1 on a 1x1 image (gemm)
      make(1, 16, 7, 7, 70, 1, 1, 1),                       // 1x1 gemm, K past one panel
      make(1, 20, 7, 9, 36, 1, 1, 2),                       // 1x1 stride 2
      make(1, 3, 28, 28, 16, 7, 7, 2, {3, 3, 3, 3}),        // 7x7 stride 2 (a stem)
      make(1, 8, 12, 10, 8, 3, 3, 1, {2, 2, 2, 2}, 2),      // dilation 2
      make(1, 8, 14, 14, 12, 5, 5, 1, {2, 1, 2, 1}, 1, 4),  // 5x5, groups 4
      make(2, 4, 7, 9, 6, 3, 3, 1, {1, 1, 1, 1}, 1, 2),     // groups 2
      make(1, 6, 8, 8, 6, 3, 3, 1, {1, 1, 1, 1}, 1, 6),     // depthwise (delegated)
      make(1, 8, 9, 9, 8, 3, 3, 2, {1, 0, 1, 1}, 1, 8),     // depthwise stride 2
      make(1, 4, 7, 7, 8, 3, 3, 1, {1, 1, 1, 1}, 1, 4),     // groups == C, 2 outputs each
      make(1, 64, 1, 1, 40, 3, 3, 1, {1, 1, 1, 1}),         // H = W = 1, padded taps only
      make(1, 66, 9, 9, 20, 3, 3, 1, {1, 1, 1, 1}),         // C*R*S > one panel chunk
      make(1, 7, 33, 33, 9, 3, 3, 1, {1, 1, 1, 1}),         // 33x33, many pixel tiles
      make(1, 5, 28, 28, 11, 3, 3, 2, {1, 1, 0, 0}, 1, 1),  // 28x28 stride 2
      // NHWC tiles span output rows: no padding on a 2-wide map (a tile touches 4 rows), pads
      // on top and bottom only (3x1), a 3x3 stride-2 map of 3 columns, and channels in chunks.
      make(2, 5, 6, 4, 7, 3, 3, 1),
      make(1, 6, 9, 3, 10, 3, 1, 1, {1, 0, 1, 0}),
      make(2, 9, 5, 5, 18, 3, 3, 2, {1, 1, 1, 1}),
      make(1, 300, 5, 5, 20, 3, 3, 1, {1, 1, 1, 1}),
      // A stride-2 RGB stem, and channels in chunks with one vector
      // of outputs.
      make(1, 3, 40, 30, 16, 3, 3, 2, {1, 1, 1, 1}),
      make(1, 300, 5, 5, 8, 3, 3, 1, {1, 1, 1, 1}),
      // Block-diagonal groups (conv_shape::diagonal): NHWC diagonal tiles where a block is one
      // vector of outputs and there are 2 or NV of them (2 x 16 and 4 x 16 on AVX-512, 2 x 8 on
      // AVX2), else (3 blocks) the zeros are computed.
      diagonal(make(1, 32, 9, 7, 32, 3, 3, 1, {1, 1, 1, 1}), 2),
      diagonal(make(2, 96, 6, 5, 96, 3, 3, 2, {1, 1, 1, 1}, 1, 2), 3),
      diagonal(make(1, 16, 7, 7, 64, 3, 3, 1, {1, 1, 1, 1}), 4),
      diagonal(make(1, 8, 7, 7, 16, 3, 3, 1, {1, 0, 1, 0}), 2),
      // Wide rows: most tiles lie in one output row, where a kernel row's 3 taps share the
      // broadcasts at stride 1 (stride 2 reads tap by tap); two groups of 4 blocks.
      diagonal(make(1, 64, 5, 20, 64, 3, 3, 1, {1, 1, 1, 1}), 4),
      diagonal(make(1, 32, 14, 30, 32, 3, 3, 2, {1, 1, 1, 1}), 2),
      diagonal(make(1, 64, 11, 26, 64, 3, 3, 2, {1, 0, 1, 0}), 4),
      diagonal(make(1, 128, 5, 14, 128, 3, 3, 1, {1, 1, 1, 1}, 1, 2), 4),
      // Blocks of narrower groups (conv_shape::block_groups): narrow tiles where a block is one
      // vector of L input and output channels (AVX-512: 4 and 8 channels a group, unpadded 1x1
      // too; AVX2: 4 and 2), the zeros computed elsewhere.
      diagonal(make(1, 64, 9, 7, 64, 3, 3, 1, {1, 1, 1, 1}), 4, 4),
      diagonal(make(2, 64, 6, 5, 64, 3, 3, 2, {1, 1, 1, 1}, 1, 2), 2, 2),
      diagonal(make(1, 32, 7, 9, 32, 3, 3, 1, {1, 1, 1, 1}), 2, 2),
      diagonal(make(1, 64, 5, 5, 64, 1, 1, 1, {0, 0, 0, 0}, 1, 2), 2, 4),
      diagonal(make(1, 16, 7, 7, 16, 3, 3, 1, {1, 1, 1, 1}), 2, 2),
      diagonal(make(1, 32, 6, 6, 32, 3, 3, 2, {1, 0, 1, 0}, 1, 2), 2, 4),
  };
}

template <class L>
using problem = conv_problem<L>;

template <class L, class B, class Out = float, class Ep>
void check_conv(const problem<L>& p, const Ep& ep, std::string_view what, int threads = 0) {
  using C = kfuse::conv2d<kfuse::f32, L, test_arch, Ep, B>;
  const auto w = C::pack(p.w.data(), p.s);
  CHECK(w.pack_seconds() >= 0);
  const index_t n_out = kfuse::numel(p.s.out_dims());
  guarded<Out> y(n_out, 0xFF);  // NaN: every output must be written
  const auto info = C::run(kfuse::view<L>(static_cast<const float*>(p.x.data()), p.s.in_dims()), w,
                           kfuse::view<L>(y.data, p.s.out_dims()), ep, {threads});
  CHECK(info.kernel == "conv2d");
  CHECK(info.arch == test_arch::name);
  const std::string_view mk = info.micro_kernel;
  if (p.s.is_depthwise())  // delegated to kfuse::depthwise_conv2d ("nhwc 5x5s2 7x2v", ...)
    CHECK((mk.rfind("nhwc ", 0) == 0 || mk.rfind("nchw ", 0) == 0));
  else
    CHECK(mk.find("f32 fma") != std::string_view::npos);
  if (p.s.is_depthwise())
    CHECK(mk.find(L::name) != std::string_view::npos);
  else if (C::gemm_shape(p.s))
    CHECK(mk.substr(0, 13) == "conv 1x1 gemm");
  else if (std::is_same_v<L, kfuse::nhwc>)
    CHECK(mk.substr(0, 24) == "conv implicit-gemm nhwc ");
  else
    CHECK(mk.substr(0, 23) == "conv channel-rows nchw ");
  REQUIRE(y.guards_intact());
  int failures = 0;
  for (index_t i = 0; i < n_out && failures < 5; ++i) {
    const double want = ref_epilogue(ep, p.exact[std::size_t(i)], ref_ctx{i, p.channel_of(i)});
    const double tol = tolerance<Out>(want) + 2e-6 * p.scale[std::size_t(i)] * 1.5;
    const double got = double(kfuse::to_float(y.data[i]));
    if (!(std::fabs(got - representable<Out>(want)) <= tol) && failures++ < 5)
      UNSCOPED_INFO(what << " " << L::name << " N" << p.s.n << " C" << p.s.c << " " << p.s.h << "x"
                         << p.s.w << " K" << p.s.k << " " << p.s.r << "x" << p.s.s << " stride "
                         << p.s.stride_h << " groups " << p.s.groups << " at " << i << ": got "
                         << got << " want " << want);
  }
  CHECK(failures == 0);
}

template <class L, class B>
void all_shapes(std::mt19937& rng) {
  for (const conv_shape& s : test_shapes()) {
    const problem<L> p(s, rng);
    const std::span<const float> bias(p.bias), res(p.residual);
    check_conv<L, B>(p,
                     kfuse::epilogue<kfuse::bias, kfuse::add<>, kfuse::relu>{{bias}, {{res}}, {}},
                     "bias+residual+relu");
    // The other epilogues on one backend only (compile time): the kernels' code is the same.
    if constexpr (std::is_same_v<B, kfuse::backend::xsimd>) {
      check_conv<L, B>(p, kfuse::epilogue<>{}, "bare");
      check_conv<L, B>(p, kfuse::epilogue<kfuse::bias, kfuse::relu>{{bias}, {}}, "bias+relu");
      // user_tile_bias makes the epilogue out of line: the GEMM-tile paths save the tile and run
      // apply_tile once per tile, scale and user_square vector by vector on the saved values.
      std::atomic<long> tile_calls{0};
      check_conv<L, B>(p,
                       kfuse::epilogue<kfuse::scale, user_square, user_tile_bias>{
                           {0.5f}, {}, {p.bias.data(), &tile_calls}},
                       "user stages, out of line");
    }
  }
}

}  // namespace

TEST_CASE("conv2d f32: geometries x fused epilogues vs the double reference", "[conv2d]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(11);
  for_each_backend([&](auto b) { all_shapes<CONV_TEST_LAYOUT, decltype(b)>(rng); });
}

TEMPLATE_TEST_CASE("conv2d f32: 1 and 2 threads are bitwise identical", "[conv2d][threads]",
                   CONV_TEST_LAYOUT) {
  if (!cpu_can_run()) return;
  using L = TestType;
  std::mt19937 rng(5);
  using C = kfuse::conv2d<kfuse::f32, L, test_arch>;
  for (const conv_shape& s : {make(2, 13, 15, 15, 70, 3, 3, 1, {1, 1, 1, 1}),
                              make(1, 40, 7, 7, 24, 3, 3, 1, {1, 1, 1, 1})}) {
    const problem<L> p(s, rng);
    const auto w = C::pack(p.w.data(), s);
    std::vector<float> y1(p.exact.size()), y2(p.exact.size());
    const auto x = kfuse::view<L>(static_cast<const float*>(p.x.data()), s.in_dims());
    C::run(x, w, kfuse::view<L>(y1.data(), s.out_dims()), {}, {1});
    const auto info = C::run(x, w, kfuse::view<L>(y2.data(), s.out_dims()), {}, {2});
    CHECK(info.threads >= 1);
    CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
  }
}

TEMPLATE_TEST_CASE("conv2d f32: bf16 output through cast<bf16>", "[conv2d]", CONV_TEST_LAYOUT) {
  if (!cpu_can_run()) return;
  std::mt19937 rng(6);
  const problem<TestType> p(make(1, 13, 9, 9, 21, 3, 3, 1, {1, 0, 1, 2}), rng);
  check_conv<TestType, kfuse::backend::xsimd, kfuse::bf16_t>(
      p, kfuse::epilogue<kfuse::relu, kfuse::cast<kfuse::bf16>>{{}, {}}, "relu->bf16");
}

TEMPLATE_TEST_CASE("fold_batch_norm: conv + folded bias == conv -> bias -> batch norm",
                   "[conv2d][batch_norm]", CONV_TEST_LAYOUT) {
  if (!cpu_can_run()) return;
  using L = TestType;
  std::mt19937 rng(7);
  for (const conv_shape& s : {make(1, 13, 9, 9, 17, 3, 3, 1, {1, 1, 1, 1}),
                              make(1, 8, 6, 6, 12, 1, 1, 1, {0, 0, 0, 0}, 1, 4)}) {
    problem<L> p(s, rng);
    const auto gamma = random_activations<float>(s.k, rng, 0.5f, 2.f);
    const auto beta = random_activations<float>(s.k, rng);
    const auto mean = random_activations<float>(s.k, rng);
    const auto var = random_activations<float>(s.k, rng, 0.1f, 3.f);
    const float eps = 1e-3f;
    std::vector<float> w = p.w, b = p.bias;
    kfuse::fold_batch_norm(s, w, b, {mean, var, gamma, beta, eps});
    using C = kfuse::conv2d<kfuse::f32, L, test_arch, kfuse::epilogue<kfuse::bias>>;
    const auto pw = C::pack(w.data(), s);
    std::vector<float> y(p.exact.size(), std::nanf(""));
    C::run(kfuse::view<L>(static_cast<const float*>(p.x.data()), s.in_dims()), pw,
           kfuse::view<L>(y.data(), s.out_dims()), {{{b.data(), b.size()}}});
    int failures = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const index_t c = p.channel_of(index_t(i));
      const double a = gamma[std::size_t(c)] / std::sqrt(double(var[std::size_t(c)]) + eps);
      const double want =
          (p.exact[i] + p.bias[std::size_t(c)] - mean[std::size_t(c)]) * a + beta[std::size_t(c)];
      const double tol = 1e-5 * (std::fabs(a) * (p.scale[i] + 2) + std::fabs(want)) + 1e-6;
      if (!(std::fabs(y[i] - want) <= tol) && failures++ < 5)
        UNSCOPED_INFO("at " << i << " got " << y[i] << " want " << want);
    }
    CHECK(failures == 0);
  }
}

// The squeeze-excite multiply fused into the 1x1 conv after it: run_gated == the conv of the
// gated input (x * gate[n, c] computed in double), per-sample and shared gates, a residual add
// read at each sample's own flat index, poisoned outputs; the wrong shape and a short workspace
// are errors.
TEST_CASE("conv2d f32: run_gated = conv(x * gate) for a per-sample channel gate", "[conv2d]") {
  if (!cpu_can_run()) return;
  using L = kfuse::nhwc;
  std::mt19937 rng(12);
  using Ep = kfuse::epilogue<kfuse::bias, kfuse::add<>, kfuse::relu>;
  using C = kfuse::conv2d<kfuse::f32, L, test_arch, Ep>;
  for (const conv_shape& s : gated_shapes()) {
    for (const index_t stride : {s.c, index_t(0)}) {
      INFO("N" << s.n << " C" << s.c << " " << s.h << "x" << s.w << " K" << s.k << " gate stride "
               << stride);
      REQUIRE(C::takes_channel_gate(s));
      problem<L> p(s, rng);
      const auto gate = random_activations<float>(s.n * s.c, rng, 0.f, 1.f);
      const auto gx = gated_input(s, p.x.data(), gate.data(), stride);
      const auto exact = ref_conv2d<L>(s, gx.data(), p.w.data());
      const auto scale = ref_conv2d_abs<L>(s, gx.data(), p.w.data());
      const auto w = C::pack(p.w.data(), s);
      const index_t n_out = kfuse::numel(s.out_dims());
      guarded<float> y(n_out, 0xFF);
      const kfuse::workspace_buffer ws(C::gated_workspace_size(w, 2));
      const std::span<const float> bias(p.bias), res(p.residual);
      const Ep ep{{bias}, {{res}}, {}};
      C::run_gated(kfuse::view<L>(static_cast<const float*>(p.x.data()), s.in_dims()), gate.data(),
                   stride, w, kfuse::view<L>(y.data, s.out_dims()), ep, ws.view(), {2});
      REQUIRE(y.guards_intact());
      int failures = 0;
      for (index_t i = 0; i < n_out; ++i) {
        const double want = ref_epilogue(ep, exact[std::size_t(i)], ref_ctx{i, p.channel_of(i)});
        const double tol = 1e-6 + 4e-6 * scale[std::size_t(i)];
        if (!(std::fabs(double(y.data[i]) - want) <= tol) && failures++ < 5)
          UNSCOPED_INFO("at " << i << ": got " << y.data[i] << " want " << want);
      }
      CHECK(failures == 0);
    }
  }
  SECTION("errors") {
    const conv_shape s3 = make(1, 8, 5, 5, 4, 3, 3, 1, {1, 1, 1, 1});
    CHECK_FALSE(C::takes_channel_gate(s3));
    problem<L> p(s3, rng);
    const auto w = C::pack(p.w.data(), s3);
    std::vector<float> y(std::size_t(kfuse::numel(s3.out_dims()))), gate(8, 1.f);
    const kfuse::workspace_buffer ws(4096);
    const std::span<const float> bias(p.bias), res(p.residual);
    CHECK_THROWS_WITH(
        C::run_gated(kfuse::view<L>(static_cast<const float*>(p.x.data()), s3.in_dims()),
                     gate.data(), 8, w, kfuse::view<L>(y.data(), s3.out_dims()),
                     Ep{{bias}, {{res}}, {}}, ws.view()),
        Catch::Matchers::Contains("a channel gate needs a 1x1"));
    // K <= H x W scales a copy of the weights; K > H x W gates the input rows in blocks.
    for (const auto& [k, what] :
         {std::pair{index_t(20), "gated weights"}, std::pair{index_t(40), "gated row block"}}) {
      const conv_shape s1 = make(1, 8, 5, 5, k, 1, 1, 1);
      CHECK(C::gates_rows(s1) == (k > 25));
      problem<L> q(s1, rng);
      const auto w1 = C::pack(q.w.data(), s1);
      std::vector<float> y1(std::size_t(kfuse::numel(s1.out_dims())));
      const kfuse::workspace_buffer small(64);
      CHECK_THROWS_WITH(
          C::run_gated(
              kfuse::view<L>(static_cast<const float*>(q.x.data()), s1.in_dims()), gate.data(), 8,
              w1, kfuse::view<L>(y1.data(), s1.out_dims()),
              Ep{{std::span<const float>(q.bias)}, {{std::span<const float>(q.residual)}}, {}},
              small.view()),
          Catch::Matchers::Contains(what) && Catch::Matchers::Contains("gated_workspace_size()"));
    }
  }
}
