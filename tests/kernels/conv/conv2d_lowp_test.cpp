// conv2d bf16 and int8: bf16 activations and weights (vdpbf16ps on avx512_bf16, the conversion
// path elsewhere) with f32 and bf16 outputs; u8 / s8 activations with a zero point x s8 weights
// (vpdpbusd on VNNI, the exact scalar kernel on generic), exact through dequantize and within one
// step through requantize<u8>; both layouts, against the double-precision reference.
#include "kernels/conv/conv_reference.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "support/test_support.hpp"

using namespace kt;
using kfuse::conv_shape;

// One layout per executable (compile time): this file tests NHWC; conv2d_*_nchw_test.cpp
// includes it with CONV_TEST_LAYOUT = kfuse::nchw.
#ifndef CONV_TEST_LAYOUT
#define CONV_TEST_LAYOUT kfuse::nhwc
#endif

namespace {

using kt::make;

std::vector<conv_shape> lowp_shapes() {
  return {
      make(1, 3, 7, 7, 5, 3, 3, 1, {1, 1, 1, 1}),       // odd channels (odd bf16 pairs, int8 quads)
      make(2, 13, 9, 11, 17, 3, 3, 2, {0, 1, 1, 0}),    // stride 2, asymmetric pads
      make(1, 16, 7, 7, 70, 1, 1, 1),                   // 1x1 gemm
      make(1, 20, 7, 9, 36, 1, 1, 2),                   // 1x1 stride 2
      make(1, 8, 12, 10, 8, 3, 3, 1, {2, 2, 2, 2}, 2),  // dilation 2
      make(1, 8, 14, 14, 12, 5, 5, 1, {2, 1, 2, 1}, 1, 4),  // groups 4
      make(1, 3, 28, 28, 16, 7, 7, 2, {3, 3, 3, 3}),        // 7x7 stride 2
      make(1, 66, 9, 9, 20, 3, 3, 1, {1, 1, 1, 1}),         // several panel chunks (nchw)
      make(1, 64, 1, 1, 40, 3, 3, 1, {1, 1, 1, 1}),         // 1x1 image, padded taps only
      make(2, 5, 6, 4, 7, 3, 3, 1),                         // nhwc tiles over 4 output rows
      make(1, 6, 9, 3, 10, 3, 1, 1, {1, 0, 1, 0}),          // pads on top and bottom only
      make(2, 9, 5, 5, 18, 3, 3, 2, {1, 1, 1, 1}),          // stride 2 on 5x5
      // Few channels (NHWC im2col patches): dilation 2 (no row runs), 4 channels with
      // asymmetric pads, batch 2 with blocks spanning images, a 1-row map.
      make(1, 2, 9, 8, 6, 3, 3, 1, {2, 2, 2, 2}, 2),
      make(2, 4, 11, 13, 19, 5, 5, 2, {2, 1, 0, 2}),
      make(3, 3, 30, 30, 24, 3, 3, 2, {1, 1, 1, 1}),
      make(1, 1, 1, 9, 8, 1, 3, 1, {0, 1, 0, 1}),
      // AMX tiles (where the CPU has them): K tails of the tile depth, row tiles of 1..16 rows,
      // column halves past N.
      make(2, 40, 9, 9, 70, 3, 3, 1, {1, 1, 1, 1}),
      make(1, 72, 7, 9, 33, 1, 1, 1),
  };
}

// Whether conv C runs shape s on AMX tiles: the dense NHWC GEMM paths (1x1, im2col patches) of
// 16 output pixels or more, where the CPU has AMX and it is on, and the GEMM's K (the channels,
// or a patch row's R x S x C rounded up to the k group) is gemm::uses_amx's: 64 bytes or more,
// or 32 or more in whole 4-byte groups.
template <class C, class L>
bool expect_amx(const conv_shape& s) {
  using TX = typename C::gemm_type::a_type;
  constexpr index_t g = 4 / index_t(sizeof(TX));
  const index_t k = s.is_pointwise() ? s.c : (s.c * s.r * s.s + g - 1) / g * g;
  const index_t bytes = k * index_t(sizeof(TX));
  return C::gemm_type::has_amx && kfuse::amx_enabled() && std::is_same_v<L, kfuse::nhwc> &&
         s.groups == 1 && !s.is_depthwise() && s.n * s.out_h() * s.out_w() >= 16 &&
         (bytes >= 64 || (bytes >= 32 && bytes % 4 == 0));
}
// Whether conv C packs shape s for the im2col patch path.
template <class C, class L>
bool expect_patches(const conv_shape& s) {
  return std::is_same_v<L, kfuse::nhwc> &&
         (kfuse::detail::patch_shape(s) ||
          (C::gemm_type::has_amx && kfuse::amx_enabled() && s.groups == 1 && !s.is_pointwise() &&
           !s.is_depthwise()));
}

template <class L>
index_t channel_of(const conv_shape& s, index_t i) {
  const kfuse::dims4 d = s.out_dims();
  return std::is_same_v<L, kfuse::nhwc> ? i % d.c : (i / (d.h * d.w)) % d.c;
}

// ------------------------------------------------------------------------------------- bf16
template <class L, class B, class Out, class Ep>
void check_bf16(const conv_shape& s, std::mt19937& rng, const Ep& ep, std::string_view what) {
  using C = kfuse::conv2d<kfuse::bf16, L, test_arch, Ep, B>;
  const auto x = random_activations<kfuse::bf16_t>(kfuse::numel(s.in_dims()), rng);
  auto w = random_weights_oihw<float>(s, rng);
  // The weights are stored as bf16: the reference uses the rounded values.
  for (float& v : w) v = kfuse::to_float(kfuse::from_float<kfuse::bf16_t>(v));
  const auto exact = ref_conv2d<L>(s, x.data(), w.data());
  const auto scale = ref_conv2d_abs<L>(s, x.data(), w.data());
  const auto pw = C::pack(w.data(), s);
  const index_t n_out = kfuse::numel(s.out_dims());
  guarded<Out> y(n_out, 0xFF);
  const auto info = C::run(kfuse::view<L>(static_cast<const kfuse::bf16_t*>(x.data()), s.in_dims()),
                           pw, kfuse::view<L>(y.data, s.out_dims()), ep);
  const std::string_view mk = info.micro_kernel;
  if (expect_amx<C, L>(s))
    CHECK(mk.find("bf16 amx 32x32") != std::string_view::npos);
  else if constexpr (test_arch::native_bf16_dot && test_arch::is_x86)
    CHECK(mk.find("bf16 vdpbf16ps") != std::string_view::npos);
  else
    CHECK(mk.find("bf16->f32 fma") != std::string_view::npos);
  CHECK((mk.substr(0, 22) == "conv patches gemm nhwc") == expect_patches<C, L>(s));
  REQUIRE(y.guards_intact());
  int failures = 0;
  for (index_t i = 0; i < n_out && failures < 5; ++i) {
    const double want = ref_epilogue(ep, exact[std::size_t(i)], ref_ctx{i, channel_of<L>(s, i)});
    const double tol = tolerance<Out>(want) + 3e-6 * scale[std::size_t(i)];
    const double got = double(kfuse::to_float(y.data[i]));
    if (!(std::fabs(got - representable<Out>(want)) <= tol) && failures++ < 5)
      UNSCOPED_INFO(what << " " << L::name << " C" << s.c << " " << s.h << "x" << s.w << " K" << s.k
                         << " " << s.r << "x" << s.s << " at " << i << ": got " << got << " want "
                         << want);
  }
  CHECK(failures == 0);
}

template <class L, class B>
void bf16_shapes(std::mt19937& rng) {
  for (const conv_shape& s : lowp_shapes()) {
    std::vector<float> bias = random_activations<float>(s.k, rng);
    const std::span<const float> b(bias);
    if constexpr (std::is_same_v<B, kfuse::backend::xsimd>)  // one backend: compile time
      check_bf16<L, B, float>(s, rng, kfuse::epilogue<>{}, "bare");
    check_bf16<L, B, kfuse::bf16_t>(
        s, rng, kfuse::epilogue<kfuse::bias, kfuse::relu, kfuse::cast<kfuse::bf16>>{{b}, {}, {}},
        "bias+relu->bf16");
  }
}

// ------------------------------------------------------------------------------------- int8
template <class A, class L, class TX>
void check_int8(const conv_shape& s, std::int32_t za, std::mt19937& rng) {
  const auto x = random_activations<TX>(kfuse::numel(s.in_dims()), rng, -128.f, 255.f);
  // vpmaddubsw archs take 7-bit weights: their whole range there.
  constexpr int wl = kfuse::conv2d<kfuse::i8, L, A>::int8_weight_limit;
  const auto w = random_weights_oihw<std::int8_t>(s, rng, wl >= 128 ? -128.f : -float(wl),
                                                  wl >= 128 ? 127.f : float(wl));
  const auto exact = ref_conv2d<L>(s, x.data(), w.data(), double(za));
  const index_t n_out = kfuse::numel(s.out_dims());
  const auto xv = kfuse::view<L>(static_cast<const TX*>(x.data()), s.in_dims());
  {  // exact: integer sums through dequantize (scale 1) into f32 (|sum| < 2^24 here)
    using C = kfuse::conv2d<kfuse::i8, L, A, kfuse::epilogue<kfuse::dequantize>>;
    const auto pw = C::pack(w.data(), s);
    guarded<float> y(n_out, 0xFF);
    const auto info = C::run(xv, pw, kfuse::view<L>(y.data, s.out_dims()),
                             {{kfuse::quant_params{1.f, 0, {}, {}}}}, {}, za);
    if (expect_amx<C, L>(s))
      CHECK(std::string_view(info.micro_kernel).find("i8 amx 32x32") != std::string_view::npos);
    else if constexpr (A::native_int8_dot && A::is_x86)
      CHECK(std::string_view(info.micro_kernel).find("i8 vpdpbusd") != std::string_view::npos);
    else if constexpr (C::int8_weight_limit < 128)
      CHECK(std::string_view(info.micro_kernel).find("i8 vpmaddubsw") != std::string_view::npos);
    else
      CHECK(std::string_view(info.micro_kernel).find("i8 scalar") != std::string_view::npos);
    CHECK((std::string_view(info.micro_kernel).substr(0, 22) == "conv patches gemm nhwc") ==
          expect_patches<C, L>(s));
    REQUIRE(y.guards_intact());
    int failures = 0;
    for (index_t i = 0; i < n_out; ++i)
      if (!(double(y.data[i]) == exact[std::size_t(i)]) && failures++ < 5)
        UNSCOPED_INFO(L::name << " C" << s.c << " K" << s.k << " za " << za << " at " << i
                              << ": got " << y.data[i] << " want " << exact[std::size_t(i)]);
    CHECK(failures == 0);
  }
  {  // bias + relu + requantize<u8> with per-channel multipliers: within one step
    using Ep = kfuse::epilogue<kfuse::bias, kfuse::relu, kfuse::requantize<kfuse::u8>>;
    using C = kfuse::conv2d<kfuse::i8, L, A, Ep>;
    const auto pw = C::pack(w.data(), s);
    std::vector<float> bias = random_activations<float>(s.k, rng, -3000.f, 3000.f);
    std::vector<float> mult = random_activations<float>(s.k, rng, 1e-4f, 4e-3f);
    const Ep ep{{bias}, {}, {0.f, 7, mult}};
    guarded<std::uint8_t> y(n_out, 0xA5);
    C::run(xv, pw, kfuse::view<L>(y.data, s.out_dims()), ep, {}, za);
    REQUIRE(y.guards_intact());
    int failures = 0;
    for (index_t i = 0; i < n_out; ++i) {
      const double want = ref_epilogue(ep, exact[std::size_t(i)], ref_ctx{i, channel_of<L>(s, i)});
      if (!(std::fabs(double(y.data[i]) - want) <= 1.0) && failures++ < 5)
        UNSCOPED_INFO(L::name << " requantize at " << i << ": got " << int(y.data[i]) << " want "
                              << want);
    }
    CHECK(failures == 0);
  }
}

// A template, so that conv2d<i8> is never instantiated on an arch without an int8 kernel.
template <class A, class L>
void int8_shapes(std::mt19937& rng) {
  if constexpr (kfuse::detail::int8_kernel_available<
                    A, kfuse::simd::vec_for<A, kfuse::backend::xsimd>>()) {
    for (const conv_shape& s : lowp_shapes()) {
      check_int8<A, L, std::uint8_t>(s, 128, rng);
      check_int8<A, L, std::uint8_t>(s, 3, rng);
      check_int8<A, L, std::int8_t>(s, -5, rng);
    }
    using C = kfuse::conv2d<kfuse::i8, L, A>;
    if constexpr (C::int8_weight_limit < 128) {
      // vpmaddubsw's 16-bit pair sums would saturate on a wider weight: pack refuses it.
      const conv_shape s = lowp_shapes().front();
      std::vector<std::int8_t> w(std::size_t(s.weight_count()), 1);
      w.back() = -64;
      CHECK_THROWS_WITH(C::pack(w.data(), s), Catch::Contains("conv2d pack") &&
                                                  Catch::Contains("weight -64") &&
                                                  Catch::Contains("outside [-63, 63]"));
    }
  } else {
    SUCCEED("conv2d<i8> is a compile error on this arch (no int8 dot product)");
  }
}

}  // namespace

TEMPLATE_TEST_CASE("conv2d bf16: geometries, f32 and bf16 outputs", "[conv2d][bf16]",
                   CONV_TEST_LAYOUT) {
  if (!cpu_can_run()) return;
  std::mt19937 rng(21);
  for_each_backend([&](auto b) {
    for (const bool amx : {true, false}) {  // the tile path where the CPU has it, then without
      const amx_off off(!amx);
      bf16_shapes<TestType, decltype(b)>(rng);
    }
  });
}

TEMPLATE_TEST_CASE("conv2d i8: u8 / s8 activations with zero points, exact and requantized",
                   "[conv2d][int8]", CONV_TEST_LAYOUT) {
  if (!cpu_can_run()) return;
  std::mt19937 rng(22);
  for (const bool amx : {true, false}) {
    const amx_off off(!amx);
    int8_shapes<test_arch, TestType>(rng);
  }
}

// The squeeze-excite gate fused into an int8 1x1 conv (run_gated, NHWC only): f32 x times the
// gate, quantized to u8 as the conv loads it. Exact: the bytes are those of a multiply and then
// quantize<u8> (float division, ties to even, saturated: some values land outside [0, 255]),
// and the integer sums pass through dequantize (scale 1) into f32 (|sum| < 2^24 here).
template <class A>
void check_int8_gated(std::mt19937& rng) {
  using L = kfuse::nhwc;
  using C = kfuse::conv2d<kfuse::i8, L, A, kfuse::epilogue<kfuse::dequantize, kfuse::bias>>;
  const float scale = 3.f / 255;
  for (const std::int32_t zp : {128, 0, 255}) {
    for (const conv_shape& s : gated_shapes()) {
      for (const index_t stride : {s.c, index_t(0)}) {
        INFO("N" << s.n << " C" << s.c << " " << s.h << "x" << s.w << " K" << s.k << " zp " << zp
                 << " gate stride " << stride);
        REQUIRE(C::takes_channel_gate(s));
        const auto x = random_activations<float>(kfuse::numel(s.in_dims()), rng, -2.5f, 2.5f);
        const auto gate = random_activations<float>(s.n * s.c, rng, 0.f, 1.2f);
        const auto bias = random_activations<float>(s.k, rng, -50.f, 50.f);
        const auto w = random_weights_oihw<std::int8_t>(s, rng, -63.f, 63.f);
        const auto gx = gated_input(s, x.data(), gate.data(), stride);
        std::vector<std::uint8_t> q(gx.size());
        for (std::size_t i = 0; i < q.size(); ++i)
          q[i] = std::uint8_t(std::clamp(std::nearbyint(gx[i] / scale) + float(zp), 0.f, 255.f));
        const auto exact = ref_conv2d<L>(s, q.data(), w.data(), double(zp));
        const auto pw = C::pack(w.data(), s);
        const index_t n_out = kfuse::numel(s.out_dims());
        const typename C::epilogue_type ep{{kfuse::quant_params{1.f, 0, {}, {}}},
                                           {std::span<const float>(bias)}};
        for (const int threads : {1, 2}) {
          guarded<float> y(n_out, 0xFF);
          const kfuse::workspace_buffer ws(C::gated_workspace_size(pw, threads));
          C::run_gated(kfuse::view<L>(static_cast<const float*>(x.data()), s.in_dims()),
                       gate.data(), stride, scale, zp, pw, kfuse::view<L>(y.data, s.out_dims()), ep,
                       ws.view(), {threads});
          REQUIRE(y.guards_intact());
          int failures = 0;
          for (index_t i = 0; i < n_out; ++i) {
            const double want = exact[std::size_t(i)] + double(bias[std::size_t(i % s.k)]);
            if (!(std::fabs(double(y.data[i]) - want) <= 1e-6 * (1 + std::fabs(want))) &&
                failures++ < 5)
              UNSCOPED_INFO("at " << i << ": got " << y.data[i] << " want " << want);
          }
          CHECK(failures == 0);
        }
      }
    }
  }
  // Bad calls: each names the kernel and the problem.
  const conv_shape s = gated_shapes().front();
  const auto x = random_activations<float>(kfuse::numel(s.in_dims()), rng);
  const auto gate = random_activations<float>(s.n * s.c, rng, 0.f, 1.f);
  const auto w = random_weights_oihw<std::int8_t>(s, rng, -63.f, 63.f);
  const auto pw = C::pack(w.data(), s);
  std::vector<float> y(std::size_t(kfuse::numel(s.out_dims())));
  const std::vector<float> bias(std::size_t(s.k));
  const typename C::epilogue_type ep{{kfuse::quant_params{1.f, 0, {}, {}}},
                                     {std::span<const float>(bias)}};
  const kfuse::workspace_buffer ws(C::gated_workspace_size(pw, 1));
  auto call = [&](float sc, std::int32_t z, kfuse::workspace wv) {
    C::run_gated(kfuse::view<L>(static_cast<const float*>(x.data()), s.in_dims()), gate.data(), s.c,
                 sc, z, pw, kfuse::view<L>(y.data(), s.out_dims()), ep, wv, {1});
  };
  CHECK_THROWS_WITH(call(0.f, 0, ws.view()),
                    Catch::Contains("conv2d") && Catch::Contains("scale must be positive"));
  CHECK_THROWS_WITH(call(std::nanf(""), 0, ws.view()), Catch::Contains("scale must be positive"));
  CHECK_THROWS_WITH(call(0.1f, 256, ws.view()), Catch::Contains("zero point 256"));
  CHECK_THROWS_WITH(call(0.1f, 0, kfuse::workspace{ws.view().data, 16}),
                    Catch::Contains("conv2d") && Catch::Contains("workspace"));
}

TEST_CASE("conv2d i8: run_gated quantizes x * gate as it loads it, = conv of the u8 product",
          "[conv2d][int8]") {
  if (!cpu_can_run()) return;
  if constexpr (std::is_same_v<CONV_TEST_LAYOUT, kfuse::nhwc> &&
                kfuse::detail::int8_kernel_available<
                    test_arch, kfuse::simd::vec_for<test_arch, kfuse::backend::xsimd>>()) {
    std::mt19937 rng(24);
    check_int8_gated<test_arch>(rng);
  }
}

// The squeeze-excite gate fused into a bf16 1x1 conv (run_gated, NHWC only): bf16 x times
// gate * w rounded to bf16 once, w rounded once when packed: two roundings of 2^-9 relative,
// so |got - conv(x * gate)| <= 4e-3 * sum |x w gate| (+ f32 accumulation).
TEST_CASE("conv2d bf16: run_gated = conv(x * gate) within two bf16 roundings", "[conv2d][bf16]") {
  if (!cpu_can_run()) return;
  if constexpr (std::is_same_v<CONV_TEST_LAYOUT, kfuse::nhwc>) {
    using L = kfuse::nhwc;
    std::mt19937 rng(23);
    using Ep = kfuse::epilogue<kfuse::bias, kfuse::relu>;
    using C = kfuse::conv2d<kfuse::bf16, L, test_arch, Ep>;
    for (const conv_shape& s : gated_shapes()) {
      for (const index_t stride : {s.c, index_t(0)}) {
        INFO("N" << s.n << " C" << s.c << " " << s.h << "x" << s.w << " K" << s.k << " gate stride "
                 << stride);
        REQUIRE(C::takes_channel_gate(s));
        const auto x = random_activations<kfuse::bf16_t>(kfuse::numel(s.in_dims()), rng);
        const auto w = random_weights_oihw<float>(s, rng);
        const auto gate = random_activations<float>(s.n * s.c, rng, 0.f, 1.f);
        const auto bias = random_activations<float>(s.k, rng);
        const auto gx = gated_input(s, x.data(), gate.data(), stride);
        const auto exact = ref_conv2d<L>(s, gx.data(), w.data());
        const auto scale = ref_conv2d_abs<L>(s, gx.data(), w.data());
        const auto pw = C::pack(w.data(), s);
        const index_t n_out = kfuse::numel(s.out_dims());
        guarded<float> y(n_out, 0xFF);
        const kfuse::workspace_buffer ws(C::gated_workspace_size(pw, 2));
        const Ep ep{{std::span<const float>(bias)}, {}};
        C::run_gated(kfuse::view<L>(static_cast<const kfuse::bf16_t*>(x.data()), s.in_dims()),
                     gate.data(), stride, pw, kfuse::view<L>(y.data, s.out_dims()), ep, ws.view(),
                     {2});
        REQUIRE(y.guards_intact());
        int failures = 0;
        for (index_t i = 0; i < n_out; ++i) {
          const double want = ref_epilogue(ep, exact[std::size_t(i)], ref_ctx{i, i % s.k});
          const double tol = 1e-6 + 4e-3 * scale[std::size_t(i)];
          if (!(std::fabs(double(y.data[i]) - want) <= tol) && failures++ < 5)
            UNSCOPED_INFO("at " << i << ": got " << y.data[i] << " want " << want);
        }
        CHECK(failures == 0);
      }
    }
  }
}
