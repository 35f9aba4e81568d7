// Bad arguments to the kernels: each case of the robustness probes (and their
// neighbours) gives a kfuse::error naming the kernel and the problem, or the documented result.
// Sizes that overflow, null spans, every forbidden overlap, invalid quantization parameters,
// empty tensors. docs/robustness.md lists the rules these check.
#include <cfloat>

#include "support/test_support.hpp"

using namespace kt;
using Catch::Contains;
using kfuse::epilogue;

namespace {
constexpr index_t big = index_t(1) << 31;
}  // namespace

TEST_CASE("probes: sizes that overflow are errors before any allocation or write", "[robustness]") {
  if (!cpu_can_run()) return;
  using G = kfuse::gemm<kfuse::f32, test_arch>;
  float w[4] = {};
  for (index_t kn : {big, 2 * big, index_t(1) << 40})
    CHECK_THROWS_WITH(G::pack(w, kn, kn, kfuse::b_layout::kn),
                      Contains("gemm pack") && Contains("overflows"));
  std::vector<float> wk(16 * 16), a(16 * 16), c(16 * 16);
  const auto pw = G::pack(wk.data(), 16, 16, kfuse::b_layout::kn);
  CHECK_THROWS_WITH(G::run(a.data(), index_t(1) << 62, 16, pw, c.data(), 16),
                    Contains("gemm") && Contains("overflows"));
  CHECK_THROWS_WITH(G::run(a.data(), 5, index_t(1) << 61, pw, c.data(), 16),
                    Contains("A's extent overflows"));

  kfuse::conv_shape s;
  s.c = s.k = index_t(1) << 20;
  s.r = s.s = index_t(1) << 12;
  s.h = s.w = index_t(1) << 12;
  using C = kfuse::conv2d<kfuse::f32, kfuse::nchw, test_arch>;
  CHECK_THROWS_WITH(C::pack(w, s), Contains("conv2d pack") && Contains("weight tensor") &&
                                       Contains("overflows a 64-bit count"));
  kfuse::conv_shape pads;
  pads.pad_top = pads.pad_bottom = index_t(1) << 62;
  CHECK_THROWS_WITH(C::pack(w, pads), Contains("padded height overflows"));

  float x[4] = {}, y[4] = {};
  const kfuse::dims4 huge{index_t(1) << 32, index_t(1) << 32, 2, 1};
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(kfuse::view<kfuse::nchw>(x, huge),
                                kfuse::view<kfuse::nchw>(y, huge), epilogue<kfuse::relu>{}),
      "eltwise: the tensor has too many elements (4294967296 x 4294967296 x 2 x 1 "
      "overflows a 64-bit count)");
  const index_t shape[3] = {big, big, 4};
  CHECK_THROWS_WITH(kfuse::softmax<test_arch>(x, y, shape, 1), Contains("too many elements"));
}

TEST_CASE("probes: null spans and empty objects are errors, not crashes", "[robustness]") {
  if (!cpu_can_run()) return;
  float x[5] = {1, 2, 3, 4, 5}, y[5];
  const auto v = kfuse::view<kfuse::nchw>(x, {1, 5, 1, 1});
  const auto o = kfuse::view<kfuse::nchw>(y, {1, 5, 1, 1});
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(
          v, o,
          epilogue<kfuse::bias>{{std::span<const float>(static_cast<const float*>(nullptr), 5)}}),
      "eltwise: stage 'bias': bias values is null but has 5 elements");
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(
          x, y, 5,
          epilogue<kfuse::add<>>{{std::span<const float>(static_cast<const float*>(nullptr), 5)}}),
      Contains("second tensor is null but has 5 elements"));
  const float* null_f = nullptr;
  CHECK_THROWS_WITH(kfuse::eltwise<test_arch>(null_f, y, 5, epilogue<kfuse::relu>{}),
                    Contains("input is null"));
  using G = kfuse::gemm<kfuse::f32, test_arch>;
  const G::weights empty;
  CHECK_THROWS_WITH(G::run(x, 1, 1, empty, y, 1), Contains("packed weights are empty"));
  const float* no_weights = nullptr;
  CHECK_THROWS_WITH(G::pack(no_weights, 4, 4, kfuse::b_layout::kn), Contains("B is null"));
}

TEST_CASE("probes: overlapping outputs are rejected, exact in-place eltwise is allowed",
          "[robustness]") {
  if (!cpu_can_run()) return;
  // conv2d 3x3 in place, NCHW and NHWC
  kfuse::conv_shape s;
  s.c = s.k = 4;
  s.h = s.w = 8;
  s.r = s.s = 3;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = 1;
  std::vector<float> w(4 * 4 * 9, 0.1f), buf(4 * 64, 1.f);
  {
    using C = kfuse::conv2d<kfuse::f32, kfuse::nchw, test_arch>;
    const auto pc = C::pack(w.data(), s);
    CHECK_THROWS_WITH(
        C::run(kfuse::view<kfuse::nchw>(static_cast<const float*>(buf.data()), {1, 4, 8, 8}), pc,
               kfuse::view<kfuse::nchw>(buf.data(), {1, 4, 8, 8})),
        Contains("conv2d: input and output overlap"));
  }
  {
    using C = kfuse::conv2d<kfuse::f32, kfuse::nhwc, test_arch>;
    const auto pc = C::pack(w.data(), s);
    CHECK_THROWS_WITH(
        C::run(kfuse::view<kfuse::nhwc>(static_cast<const float*>(buf.data()), {1, 4, 8, 8}), pc,
               kfuse::view<kfuse::nhwc>(buf.data() + 3, {1, 4, 8, 8})),
        Contains("cannot run in place"));
  }
  // gemm: C == A, C inside A
  using G = kfuse::gemm<kfuse::f32, test_arch>;
  std::vector<float> wk(16 * 16, 0.5f), a(16 * 16, 1.f);
  const auto pw = G::pack(wk.data(), 16, 16, kfuse::b_layout::kn);
  CHECK_THROWS_WITH(G::run(a.data(), 16, 16, pw, a.data(), 16),
                    "gemm: A and output overlap: this kernel cannot run in place (each output "
                    "reads several inputs); use a separate output buffer");
  CHECK_THROWS_WITH(G::run(a.data(), 8, 16, pw, a.data() + 100, 16), Contains("overlap"));
  // add<> operand partly overlapping the output; the output itself is allowed
  std::vector<float> x(64, 1.f), y(80, 2.f);
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(x.data(), y.data(), 64,
                                epilogue<kfuse::add<>>{{std::span<const float>(y.data() + 8, 64)}}),
      Contains("stage 'add': second tensor overlaps the output"));
  kfuse::eltwise<test_arch>(x.data(), y.data(), 64,
                            epilogue<kfuse::add<>>{{std::span<const float>(y.data(), 64)}});
  CHECK(y[0] == 3.f);
  CHECK(y[63] == 3.f);
  // a bias overlapping the gemm output
  using GB = kfuse::gemm<kfuse::f32, test_arch, epilogue<kfuse::bias>>;
  const auto pb = GB::pack(wk.data(), 16, 16, kfuse::b_layout::kn);
  std::vector<float> out(16 * 16);
  CHECK_THROWS_WITH(
      GB::run(a.data(), 16, 16, pb, out.data(), 16, {{std::span<const float>(out.data(), 16)}}),
      Contains("bias values overlap the output"));
  // eltwise: partial overlap rejected, exact in place allowed
  CHECK_THROWS_WITH(kfuse::eltwise<test_arch>(x.data(), x.data() + 1, 32, epilogue<kfuse::relu>{}),
                    Contains("overlap"));
  kfuse::eltwise<test_arch>(x.data(), x.data(), 64, epilogue<kfuse::scale>{{2.f}});
  CHECK(x[10] == 2.f);
  // layout conversion is a transposition: never in place
  std::vector<float> t(2 * 3 * 4 * 5);
  CHECK_THROWS_WITH(kfuse::nchw_to_nhwc(
                        kfuse::view<kfuse::nchw>(static_cast<const float*>(t.data()), {2, 3, 4, 5}),
                        kfuse::view<kfuse::nhwc>(t.data(), {2, 3, 4, 5})),
                    Contains("convert_layout: input and output overlap"));
}

TEST_CASE("probes: quantization parameters are validated", "[robustness]") {
  if (!cpu_can_run()) return;
  float x[8] = {};
  std::int8_t q[8];
  std::uint8_t u[8];
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(x, q, 8, epilogue<kfuse::quantize<kfuse::i8>>{{{0.1f, 1000}}}),
      "eltwise: stage 'quantize': zero point 1000 is outside the integer type's range [-128, 127]");
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(x, u, 8, epilogue<kfuse::quantize<kfuse::u8>>{{{0.1f, -1}}}),
      Contains("zero point -1 is outside"));
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(x, q, 8, epilogue<kfuse::quantize<kfuse::i8>>{{{NAN, 0}}}),
      Contains("scale must be positive and finite"));
  std::int32_t acc[8] = {};
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(acc, q, 8, epilogue<kfuse::requantize<kfuse::i8>>{{NAN, 0}}),
      Contains("stage 'requantize': multiplier must be positive and finite"));
  CHECK_THROWS_WITH(
      kfuse::eltwise<test_arch>(acc, q, 8, epilogue<kfuse::requantize<kfuse::i8>>{{0.5f, 300}}),
      Contains("zero point 300"));
  using G = kfuse::gemm<kfuse::i8, kfuse::arch::generic>;
  std::int8_t w[16] = {};
  const auto pw = G::pack(w, 4, 4, kfuse::b_layout::kn);
  std::uint8_t a[16] = {};
  std::int32_t c[16];
  CHECK_THROWS_WITH(G::run(a, 4, 4, pw, c, 4, {}, {}, 1000), Contains("zero point 1000"));
}

TEST_CASE("probes: empty tensors are a no-op in every kernel", "[robustness]") {
  if (!cpu_can_run()) return;
  float x[1] = {7.f}, y[1] = {-1.f};
  kfuse::eltwise<test_arch>(x, y, 0, epilogue<kfuse::relu>{});
  // C = 0 with a bias: an empty tensor reads no parameter (it used to say "no channel axis")
  kfuse::eltwise<test_arch>(kfuse::view<kfuse::nchw>(x, {1, 0, 4, 4}),
                            kfuse::view<kfuse::nchw>(y, {1, 0, 4, 4}),
                            epilogue<kfuse::bias>{{std::span<const float>()}});
  using G = kfuse::gemm<kfuse::f32, test_arch>;
  std::vector<float> wk(16, 1.f);
  const auto pw = G::pack(wk.data(), 4, 4, kfuse::b_layout::kn);
  G::run(x, 0, 4, pw, y, 4);
  // a batch of 0 through conv, depthwise and pooling
  kfuse::conv_shape s;
  s.n = 0;
  s.c = s.k = 4;
  s.h = s.w = 5;
  s.r = s.s = 3;
  std::vector<float> cw(4 * 4 * 9, 0.1f);
  using C = kfuse::conv2d<kfuse::f32, kfuse::nhwc, test_arch>;
  const auto pc = C::pack(cw.data(), s);
  C::run(kfuse::view<kfuse::nhwc>(static_cast<const float*>(x), {0, 4, 5, 5}), pc,
         kfuse::view<kfuse::nhwc>(y, {0, 4, 3, 3}));
  kfuse::pool_shape ps;
  ps.n = 0;
  ps.c = 4;
  ps.h = ps.w = 4;
  ps.r = ps.s = 2;
  ps.stride_h = ps.stride_w = 2;
  kfuse::pool2d<kfuse::f32, kfuse::nhwc, test_arch>::run(
      kfuse::view<kfuse::nhwc>(static_cast<const float*>(x), {0, 4, 4, 4}), ps,
      kfuse::view<kfuse::nhwc>(y, {0, 4, 2, 2}));
  CHECK(y[0] == -1.f);  // nothing written
  CHECK(x[0] == 7.f);
}

TEST_CASE("probes: NaN propagates through gemm + relu", "[robustness][nan]") {
  if (!cpu_can_run()) return;
  using G = kfuse::gemm<kfuse::f32, test_arch, epilogue<kfuse::relu>>;
  std::vector<float> wk(8 * 8, -1.f), a(3 * 8, 1.f), c(3 * 8);
  a[8 + 3] = NAN;  // row 1
  const auto pw = G::pack(wk.data(), 8, 8, kfuse::b_layout::kn);
  G::run(a.data(), 3, 8, pw, c.data(), 8);
  for (int j = 0; j < 8; ++j) {
    CHECK(c[std::size_t(j)] == 0.f);
    CHECK(std::isnan(c[std::size_t(8 + j)]));
  }
}

TEST_CASE("probes: NaN in a softmax, layer_norm or max-pool window reaches its outputs",
          "[robustness][nan]") {
  if (!cpu_can_run()) return;
  std::vector<float> x(3 * 20, 0.5f), y(x.size());
  x[20 + 7] = NAN;  // row 1
  kfuse::softmax<test_arch>(x.data(), y.data(), 3, 20);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(y[i]) == (i / 20 == 1));
  kfuse::layer_norm<test_arch>(x.data(), y.data(), 3, 20);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(y[i]) == (i / 20 == 1));
  kfuse::pool_shape ps;
  ps.c = 3;
  ps.h = 4;
  ps.w = 5;
  ps.r = ps.s = 2;
  ps.stride_h = ps.stride_w = 2;
  std::vector<float> out(3 * 2 * 2);
  kfuse::pool2d<kfuse::f32, kfuse::nchw, test_arch>::run(
      kfuse::view<kfuse::nchw>(static_cast<const float*>(x.data()), {1, 3, 4, 5}), ps,
      kfuse::view<kfuse::nchw>(out.data(), {1, 3, 2, 2}));
  // x[27] is channel 1, row 1, column 2: the window (0, 1) of channel 1
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(std::isnan(out[i]) == (i == 4 + 1));
}

TEST_CASE("probes: a negative thread count is an error naming the kernel", "[robustness]") {
  if (!cpu_can_run()) return;
  const kfuse::run_options bad{-4};
  std::vector<float> x(64, 1.f), y(64);
  CHECK_THROWS_WITH(kfuse::eltwise<test_arch>(x.data(), y.data(), 64, epilogue<kfuse::relu>{}, bad),
                    Contains("eltwise: threads = -4"));
  using G = kfuse::gemm<kfuse::f32, test_arch>;
  std::vector<float> wk(16, 1.f);
  const auto pw = G::pack(wk.data(), 4, 4, kfuse::b_layout::kn);
  CHECK_THROWS_WITH(G::run(x.data(), 4, 4, pw, y.data(), 4, epilogue<>{}, bad),
                    Contains("gemm: threads = -4"));
  kfuse::conv_shape s;
  s.c = s.k = 4;
  s.h = s.w = 3;
  s.r = s.s = 3;
  std::vector<float> cw(4 * 4 * 9, 0.1f);
  using C = kfuse::conv2d<kfuse::f32, kfuse::nhwc, test_arch>;
  const auto pc = C::pack(cw.data(), s);
  CHECK_THROWS_WITH(
      C::run(kfuse::view<kfuse::nhwc>(static_cast<const float*>(x.data()), {1, 4, 3, 3}), pc,
             kfuse::view<kfuse::nhwc>(y.data(), {1, 4, 1, 1}), epilogue<>{}, bad),
      Contains("conv2d: threads = -4"));
  CHECK(y[0] == 0.f);  // nothing written
  CHECK_THROWS_WITH(kfuse::pool_threads(-1, "my_kernel"), Contains("my_kernel: threads = -1"));
  CHECK_THROWS_WITH(kfuse::thread_pool(-2), Contains("thread_pool: threads = -2"));
}
