// conv2d and fold_batch_norm: every bad input throws kfuse::error with a message naming the
// problem (channel mismatch, non-positive output size, groups not dividing channels, wrong weight
// count or shape, null pointers, layout / zero point / epilogue parameter mistakes).
#include "kfuse/kernels/conv/conv2d.hpp"
#include "kfuse/kernels/conv/fold_batch_norm.hpp"
#include "support/test_support.hpp"

using namespace kt;
using Catch::Matchers::Contains;
using kfuse::conv_shape;

namespace {

conv_shape shape_3x3() {
  conv_shape s;
  s.n = 1, s.c = 8, s.h = 6, s.w = 6, s.k = 4, s.r = 3, s.s = 3;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = 1;
  return s;
}

template <class L>
void layout_errors() {
  using C = kfuse::conv2d<kfuse::f32, L, test_arch, kfuse::epilogue<kfuse::bias>>;
  const conv_shape s = shape_3x3();
  std::vector<float> w(std::size_t(s.weight_count()), 0.5f), x(8 * 36, 1.f), y(4 * 36),
      bias(4, 0.f);
  const auto pw = C::pack(w.data(), s);
  const kfuse::epilogue<kfuse::bias> ep{{bias}};
  const auto xv = kfuse::view<L>(static_cast<const float*>(x.data()), s.in_dims());
  const auto yv = kfuse::view<L>(y.data(), s.out_dims());
  CHECK_NOTHROW(C::run(xv, pw, yv, ep));

  // Channel mismatch between the tensors and the packed weights.
  CHECK_THROWS_WITH(
      C::run(kfuse::view<L>(static_cast<const float*>(x.data()), {1, 7, 6, 6}), pw, yv, ep),
      Contains("conv2d: channel mismatch: the input has 7 channels") && Contains("C = 8"));
  CHECK_THROWS_WITH(C::run(xv, pw, kfuse::view<L>(y.data(), {1, 3, 6, 6}), ep),
                    Contains("channel mismatch: the output has 3 channels") && Contains("K = 4"));
  CHECK_THROWS_WITH(C::run(xv, pw, kfuse::view<L>(y.data(), {1, 4, 5, 6}), ep),
                    Contains("the output shape is not N x K x OH x OW = 1 x 4 x 6 x 6"));
  CHECK_THROWS_WITH(
      C::run(kfuse::view<L>(static_cast<const float*>(x.data()), {1, 8, 5, 6}), pw, yv, ep),
      Contains("the input is 5x6, the weights were packed for 6x6"));
  // Null pointers.
  CHECK_THROWS_WITH(
      C::run(kfuse::view<L>(static_cast<const float*>(nullptr), s.in_dims()), pw, yv, ep),
      Contains("conv2d: input is null"));
  CHECK_THROWS_WITH(C::run(xv, pw, kfuse::view<L>(static_cast<float*>(nullptr), s.out_dims()), ep),
                    Contains("conv2d: output is null"));
  CHECK_THROWS_WITH(C::pack(static_cast<const float*>(nullptr), s),
                    Contains("conv2d pack: weights is null"));
  // Weight count / shape.
  CHECK_THROWS_WITH(C::pack(w.data(), s, s.weight_count() - 1),
                    Contains("wrong weight count: 287 values given") && Contains("= 288"));
  CHECK_THROWS_WITH(C::run(xv, typename C::weights{}, yv, ep),
                    Contains("packed weights are empty"));
  // Epilogue parameters, zero point, overlap.
  CHECK_THROWS_WITH(C::run(xv, pw, yv, kfuse::epilogue<kfuse::bias>{{{bias.data(), 3}}}),
                    Contains("stage 'bias': 3 bias values for 4 channels"));
  CHECK_THROWS_WITH(C::run(xv, pw, yv, ep, {}, 3),
                    Contains("a zero point is only meaningful for the i8 recipe"));
  CHECK_THROWS_WITH(C::run(kfuse::view<L>(static_cast<const float*>(y.data() + 1), s.in_dims()), pw,
                           kfuse::view<L>(y.data(), {1, 4, 6, 6}), ep),
                    Contains("overlap"));
}

}  // namespace

TEMPLATE_TEST_CASE("conv2d: bad inputs throw kfuse::error naming the problem", "[conv2d][errors]",
                   kfuse::nhwc, kfuse::nchw) {
  layout_errors<TestType>();
}

TEST_CASE("conv2d: bad geometry throws at pack time", "[conv2d][errors]") {
  using C = kfuse::conv2d<kfuse::f32, kfuse::nhwc, test_arch>;
  std::vector<float> w(4096, 0.f);
  conv_shape s = shape_3x3();
  s.groups = 3;
  CHECK_THROWS_WITH(C::pack(w.data(), s),
                    Contains("conv2d pack: groups (3) do not divide the input channels (8)"));
  s = shape_3x3();
  s.groups = 8;  // divides C = 8 but not K = 4
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("do not divide the output channels (4)"));
  s = shape_3x3();
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = 0;
  s.h = 2;
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("output size is not positive") &&
                                              Contains("smaller than the dilated"));
  s = shape_3x3();
  s.dilation_h = 4;  // 9 rows of kernel on 8 padded rows
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("output size is not positive"));
  s = shape_3x3();
  s.stride_w = 0;
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("strides must be positive"));
  s = shape_3x3();
  s.k = 0;
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("output channel count K must be positive"));
  s = shape_3x3();
  s.pad_left = -1;
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("padding must not be negative"));
  s = shape_3x3();
  s.diagonal = 3;  // C = 8, K = 4
  CHECK_THROWS_WITH(C::pack(w.data(), s),
                    Contains("diagonal blocks (3) do not divide a group's 8 input and 4 output"));
  s.diagonal = 0;
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("diagonal blocks (0)"));
  s = shape_3x3();
  s.phantom_blocks = 1;  // without diagonal blocks
  CHECK_THROWS_WITH(C::pack(w.data(), s),
                    Contains("phantom blocks (1) must be fewer than the 1 diagonal blocks"));
  s.diagonal = 2;  // a group of 4 output channels: not the diagonal tiles' vectors
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("phantom blocks run on the diagonal tiles"));
  s = shape_3x3();
  s.diagonal = 2;
  s.block_groups = 3;  // a diagonal block of 4 input and 2 output channels
  CHECK_THROWS_WITH(C::pack(w.data(), s),
                    Contains("block groups (3) do not divide a diagonal block's 4 input and 2 "
                             "output channels"));
  s.block_groups = 0;
  CHECK_THROWS_WITH(C::pack(w.data(), s), Contains("block groups (0)"));
  // Block-diagonal weights must be zero outside the blocks (diagonal: C = 8, K = 4 as two
  // blocks of 4 inputs and 2 outputs; block groups: each block as 2 groups of 2 and 1).
  s = shape_3x3();
  s.diagonal = 2;
  std::vector<float> blocks(std::size_t(s.weight_count()), 0.f);
  blocks[std::size_t((0 * 8 + 5) * 9)] = 1.f;  // output 0 (block 0), input 5 (block 1)
  CHECK_THROWS_WITH(
      C::pack(blocks.data(), s),
      Contains("weight (output 0, input 5) is outside its block (2 diagonal blocks of "
               "1 groups each) but not zero"));
  blocks.assign(blocks.size(), 0.f);
  blocks[std::size_t((0 * 8 + 3) * 9 + 4)] = 1.f;  // output 0, input 3: its block, another group
  s.block_groups = 2;
  CHECK_THROWS_WITH(C::pack(blocks.data(), s), Contains("weight (output 0, input 3) is outside"));
  blocks.assign(blocks.size(), 0.f);
  blocks[std::size_t((0 * 8 + 1) * 9 + 4)] = 1.f;  // output 0, input 1: its own group
  CHECK_NOTHROW(C::pack(blocks.data(), s));
}

TEST_CASE("conv2d: weights packed for one layout are refused by the other", "[conv2d][errors]") {
  // The packed weights of the two layouts are distinct types (each embeds its layout's depthwise
  // packing), so handing NHWC weights to the NCHW kernel does not compile; run() also checks the
  // layout recorded at pack time.
  using CH = kfuse::conv2d<kfuse::f32, kfuse::nhwc, test_arch>;
  using CC = kfuse::conv2d<kfuse::f32, kfuse::nchw, test_arch>;
  STATIC_REQUIRE(!std::is_same_v<CH::weights, CC::weights>);
  const conv_shape s = shape_3x3();
  std::vector<float> w(std::size_t(s.weight_count()), 1.f);
  CHECK(CH::pack(w.data(), s).shape() == s);
}

TEST_CASE("conv2d i8: zero point outside the activation range", "[conv2d][errors]") {
  {  // the generic arch's exact scalar int8 kernel exists in every TU
    using C = kfuse::conv2d<kfuse::i8, kfuse::nhwc, kfuse::arch::generic,
                            kfuse::epilogue<kfuse::requantize<kfuse::u8>>>;
    const conv_shape s = shape_3x3();
    std::vector<std::int8_t> w(std::size_t(s.weight_count()), 1);
    std::vector<std::uint8_t> x(8 * 36), y(4 * 36);
    const auto pw = C::pack(w.data(), s);
    const auto xv =
        kfuse::view<kfuse::nhwc>(static_cast<const std::uint8_t*>(x.data()), s.in_dims());
    CHECK_THROWS_WITH(C::run(xv, pw, kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), {}, {}, 256),
                      Contains("the input zero point 256 is outside its element range"));
    CHECK_THROWS_WITH(C::run(xv, pw, kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), {}, {}, -1),
                      Contains("zero point -1"));
  }
}

TEST_CASE("fold_batch_norm: bad parameters throw", "[conv2d][batch_norm][errors]") {
  const conv_shape s = shape_3x3();
  std::vector<float> w(std::size_t(s.weight_count()), 1.f), b(4, 0.f), g(4, 1.f), beta(4, 0.f),
      mean(4, 0.f), var(4, 1.f), three(3, 1.f), neg(4, -2.f);
  CHECK_NOTHROW(kfuse::fold_batch_norm(s, w, b, {mean, var, g, beta, 1e-5f}));
  CHECK_THROWS_WITH(
      kfuse::fold_batch_norm(s, std::span<float>(w).first(10), b, {mean, var, g, beta, 1e-5f}),
      Contains("fold_batch_norm: wrong weight count: 10 values given"));
  CHECK_THROWS_WITH(
      kfuse::fold_batch_norm(s, w, std::span<float>(b).first(3), {mean, var, g, beta, 1e-5f}),
      Contains("3 bias values for K = 4"));
  CHECK_THROWS_WITH(kfuse::fold_batch_norm(s, w, b, {mean, var, three, beta, 1e-5f}),
                    Contains("mean and var (and gamma, beta when given) need K = 4 values each"));
  CHECK_THROWS_WITH(kfuse::fold_batch_norm(s, w, b, {mean, neg, g, beta, 1e-5f}),
                    Contains("var + eps must be positive (channel 0)"));
  CHECK_THROWS_WITH(kfuse::fold_batch_norm(s, w, b, {mean, var, g, beta, -1.f}),
                    Contains("eps must not be negative"));
}
