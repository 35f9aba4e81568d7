// Epilogue stages: trait folding (needs_channel, output_elem, cost), user-defined stages fused
// with built-ins on every backend (and a scalar-only one on arch::generic), validate() messages,
// and run-time uses_channel detection.
#include "support/test_support.hpp"

using namespace kt;
using kfuse::epilogue;
using kfuse::epilogue_traits;

// ------------------------------------------------------------------ user stages, outside kfuse

/// y = x * x + a: a vector stage written only against kfuse::simd::vec operators.
struct square_plus {
  float a = 0.f;
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    return x * x + V(a);
  }
};

/// y = x + k * channel: a named user stage that reads the lane's channel and validates.
struct channel_ramp {
  static constexpr std::string_view name{"channel_ramp"};
  static constexpr bool needs_channel = true;
  static constexpr int cost = 5;
  const float* ramp = nullptr;  // one value per channel
  index_t count = 0;
  template <class V, class Ctx>
  V operator()(V x, const Ctx& ctx) const {
    return x + ctx.channel_param(ramp);
  }
  template <class Check>
  void validate(const Check& c) const {
    c.expect_per_channel(count, "ramp values");
  }
};

/// A stage with only a scalar operator(): usable on arch::generic, a compile error elsewhere.
struct scalar_cube {
  template <class Ctx>
  float operator()(float x, const Ctx&) const {
    return x * x * x;
  }
};

/// A user stage that changes the output type.
struct to_bf16_user {
  using output_elem = kfuse::bf16;
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    return kfuse::simd::round_to<kfuse::bf16_t>(x);
  }
};

// ------------------------------------------------------------------------- trait folding

static_assert(!epilogue_traits<epilogue<kfuse::scale, kfuse::relu>>::needs_channel);
static_assert(epilogue_traits<epilogue<kfuse::scale, kfuse::bias>>::needs_channel);
static_assert(epilogue_traits<epilogue<square_plus, channel_ramp>>::needs_channel);
// per-channel quantize is a run-time property, not a compile-time one
static_assert(!epilogue_traits<epilogue<kfuse::quantize<kfuse::i8>>>::needs_channel);
static_assert(!epilogue_traits<epilogue<>>::needs_channel);

static_assert(std::is_void_v<epilogue_traits<epilogue<kfuse::relu>>::output_elem>);
static_assert(std::is_void_v<epilogue_traits<epilogue<>>::output_elem>);
static_assert(
    std::is_same_v<epilogue_traits<epilogue<kfuse::quantize<kfuse::i8>>>::output_elem, kfuse::i8>);
static_assert(std::is_same_v<
              epilogue_traits<epilogue<kfuse::quantize<kfuse::u8>, kfuse::dequantize>>::output_elem,
              kfuse::f32>);
static_assert(
    std::is_same_v<epilogue_traits<epilogue<kfuse::dequantize, kfuse::relu,
                                            kfuse::cast<kfuse::bf16>, kfuse::scale>>::output_elem,
                   kfuse::bf16>);  // the last type-changing stage wins
static_assert(
    std::is_same_v<
        epilogue_traits<epilogue<kfuse::cast<kfuse::f16>, square_plus, to_bf16_user>>::output_elem,
        kfuse::bf16>);
static_assert(std::is_same_v<epilogue_traits<epilogue<kfuse::requantize<kfuse::u8>>>::output_elem,
                             kfuse::u8>);

static_assert(epilogue_traits<epilogue<>>::cost == 0);
static_assert(epilogue_traits<epilogue<kfuse::scale, kfuse::relu>>::cost == 2);  // default 1
static_assert(epilogue_traits<epilogue<kfuse::scale, kfuse::sigmoid>>::cost ==
              1 + kfuse::sigmoid::cost);
static_assert(epilogue_traits<epilogue<square_plus, channel_ramp, kfuse::gelu_erf>>::cost ==
              1 + 5 + kfuse::gelu_erf::cost);
static_assert(epilogue_traits<epilogue<square_plus, kfuse::bias, kfuse::relu>>::size == 3);

namespace {

const std::vector<float> bias_values = [] {
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[std::size_t(i)] = 0.125f * float(i % 11) - 0.5f;
  return v;
}();
const std::vector<float> ramp_values = [] {
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[std::size_t(i)] = 0.01f * float(i);
  return v;
}();

// y = relu(bias(channel_ramp(square_plus(scale(x))))) in double
double reference(double x, double s, double a, index_t c) {
  double y = x * s;
  y = y * y + a;
  y += ramp_values[std::size_t(c)];
  y += bias_values[std::size_t(c)];
  return y > 0 ? y : 0;
}

template <class A, class B, class L>
void check_user_chain(const kfuse::dims4& d, std::mt19937& rng) {
  const index_t n = kfuse::numel(d);
  const std::size_t C = std::size_t(d.c);
  std::vector<float> x(static_cast<std::size_t>(n));
  fill_random(x.data(), n, rng, -3.f, 3.f);
  const epilogue<kfuse::scale, square_plus, channel_ramp, kfuse::bias, kfuse::relu> ep{
      {0.75f}, {-1.25f}, {ramp_values.data(), d.c}, {{bias_values.data(), C}}, {}};
  guarded<float> out(n, 0xA5);
  const auto info =
      kfuse::eltwise<A, B>(kfuse::view<L>(x.data(), d), kfuse::view<L>(out.data, d), ep);
  CHECK(info.arch == A::name);
  REQUIRE(out.guards_intact());
  int failures = 0;
  for (index_t i = 0; i < n && failures < 5; ++i) {
    const index_t c = std::is_same_v<L, kfuse::nhwc> ? i % d.c : (i / (d.h * d.w)) % d.c;
    const double want = reference(x[std::size_t(i)], 0.75, -1.25, c);
    const double got = out.data[i];
    if (!(std::fabs(got - want) <= 1e-5 * std::fabs(want) + 1e-6)) {
      ++failures;
      UNSCOPED_INFO(L::name << " i=" << i << " c=" << c << " got " << got << " want " << want);
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("user stage fused with built-ins runs on every backend and matches double",
          "[epilogue][user]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(21);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const kfuse::dims4& d : {kfuse::dims4{1, 1, 1, 1}, kfuse::dims4{2, 3, 7, 5},
                                  kfuse::dims4{1, 17, 3, 3}, kfuse::dims4{1, 64, 2, 9}}) {
      INFO("dims " << d.n << "x" << d.c << "x" << d.h << "x" << d.w);
      check_user_chain<test_arch, B, kfuse::nchw>(d, rng);
      check_user_chain<test_arch, B, kfuse::nhwc>(d, rng);
      check_user_chain<kfuse::arch::generic, B, kfuse::nchw>(d, rng);
      check_user_chain<kfuse::arch::generic, B, kfuse::nhwc>(d, rng);
    }
    // flat, with a type-changing user stage last: equals the built-in cast<bf16>
    std::vector<float> x(1001);
    fill_random(x.data(), index_t(x.size()), rng);
    std::vector<kfuse::bf16_t> y1(x.size()), y2(x.size());
    kfuse::eltwise<test_arch, B>(x.data(), y1.data(), index_t(x.size()),
                                 epilogue<square_plus, to_bf16_user>{{0.5f}, {}});
    kfuse::eltwise<test_arch, B>(x.data(), y2.data(), index_t(x.size()),
                                 epilogue<square_plus, kfuse::cast<kfuse::bf16>>{{0.5f}, {}});
    CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(kfuse::bf16_t)) == 0);
    for (std::size_t i = 0; i < x.size(); ++i)
      REQUIRE(y1[i].bits == kfuse::to_bf16(x[i] * x[i] + 0.5f).bits);
  });
}

TEST_CASE("a scalar-only user stage runs on arch::generic", "[epilogue][user]") {
  std::vector<float> x(300), y(300);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.01f - 1.5f;
  const epilogue<kfuse::scale, scalar_cube, kfuse::relu> ep{{2.f}, {}, {}};
  const auto info = kfuse::eltwise<kfuse::arch::generic, kfuse::backend::xsimd>(
      x.data(), y.data(), index_t(x.size()), ep);
  CHECK(info.impl == std::string_view("scalar"));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float t = x[i] * 2.f;
    REQUIRE(y[i] == std::max(t * t * t, 0.f));
  }
  // the stage can also be applied directly to a one-lane vector
  using V1 = kfuse::simd::vec_for<kfuse::arch::generic, kfuse::backend::xsimd>;
  const kfuse::lane_ctx<V1, false> ctx{};
  CHECK(kfuse::apply(epilogue<scalar_cube>{{}}, V1(3.f), ctx).r == 27.f);
}

TEST_CASE("stage validate() messages name the kernel, the stage and the problem",
          "[epilogue][validate]") {
  using Catch::Matchers::Contains;
  using Catch::Matchers::Equals;
  const std::vector<float> s4{0.5f, 1.f, 2.f, 4.f}, s3{0.5f, 1.f, 2.f};
  const std::vector<float> bad_scales{0.5f, 0.f, 2.f, 4.f};
  const std::vector<std::int32_t> z2{1, 2};
  const auto v = [](const auto& ep, index_t numel, index_t channels) {
    kfuse::validate(ep, "kern", numel, channels);
  };
  CHECK_THROWS_WITH(v(epilogue<kfuse::bias>{{{bias_values.data(), 13}}}, 64, 16),
                    Equals("kern: stage 'bias': 13 bias values for 16 channels"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::bias>{{{bias_values.data(), 16}}}, 64, 0),
                    Contains("kern: stage 'bias': bias values is per channel but the tensor has "
                             "no channel axis"));
  CHECK_NOTHROW(v(epilogue<kfuse::bias>{{{bias_values.data(), 16}}}, 64, 16));
  // quantize / dequantize parameters
  CHECK_THROWS_WITH(v(epilogue<kfuse::quantize<kfuse::i8>>{{{0.f, 0}}}, 8, 0),
                    Equals("kern: stage 'quantize': scale must be positive and finite"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::quantize<kfuse::i8>>{{{-1.f, 0}}}, 8, 0),
                    Contains("scale must be positive"));
  CHECK_THROWS_WITH(
      v(epilogue<kfuse::dequantize>{{{std::numeric_limits<float>::infinity(), 0}}}, 8, 0),
      Equals("kern: stage 'dequantize': scale must be positive and finite"));
  CHECK_THROWS_WITH(
      v(epilogue<kfuse::quantize<kfuse::u8>>{{{std::numeric_limits<float>::quiet_NaN(), 0}}}, 8, 0),
      Contains("scale must be positive"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::quantize<kfuse::i8>>{{{1.f, 0, s3}}}, 64, 4),
                    Equals("kern: stage 'quantize': 3 scales for 4 channels"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::quantize<kfuse::i8>>{{{1.f, 0, s4, z2}}}, 64, 4),
                    Equals("kern: stage 'quantize': 2 zero points for 4 scales"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::dequantize>{{{1.f, 0, bad_scales}}}, 64, 4),
                    Equals("kern: stage 'dequantize': every scale must be positive and finite"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::quantize<kfuse::i8>>{{{1.f, 0, s4}}}, 64, 0),
                    Contains("scales is per channel but the tensor has no channel axis"));
  CHECK_NOTHROW(v(epilogue<kfuse::quantize<kfuse::i8>>{{{1.f, 0, s4}}}, 64, 4));
  CHECK_THROWS_WITH(v(epilogue<kfuse::requantize<kfuse::i8>>{{1.f, 0, s3}}, 64, 4),
                    Equals("kern: stage 'requantize': 3 multipliers for 4 channels"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::clamp>{{2.f, 1.f}}, 8, 0),
                    Equals("kern: stage 'clamp': lo must not exceed hi"));
  // second tensors
  const std::vector<float> other(10);
  CHECK_THROWS_WITH(v(epilogue<kfuse::add<>>{{{std::span<const float>(other)}}}, 64, 0),
                    Equals("kern: stage 'add': second tensor has 10 elements, the output 64"));
  CHECK_THROWS_WITH(v(epilogue<kfuse::mul<>>{{{std::span<const float>(other), true}}}, 64, 4),
                    Equals("kern: stage 'mul': 10 operand values for 4 channels"));
  // a user stage: its own name; the first failing stage of the chain is reported
  CHECK_THROWS_WITH(v(epilogue<square_plus, channel_ramp>{{}, {ramp_values.data(), 5}}, 64, 4),
                    Equals("kern: stage 'channel_ramp': 5 ramp values for 4 channels"));
  CHECK_THROWS_WITH(v(
                        epilogue<kfuse::relu, kfuse::bias, kfuse::quantize<kfuse::i8>>{
                            {}, {{bias_values.data(), 3}}, {{0.f, 0}}},
                        64, 4),
                    Contains("stage 'bias'"));
  // and through a kernel
  std::vector<float> x(64), y(64);
  CHECK_THROWS_AS(kfuse::eltwise(kfuse::view<kfuse::nchw>(x.data(), kfuse::dims4{1, 4, 4, 4}),
                                 kfuse::view<kfuse::nchw>(y.data(), kfuse::dims4{1, 4, 4, 4}),
                                 epilogue<channel_ramp>{{ramp_values.data(), 5}}),
                  kfuse::error);
}

TEST_CASE("uses_channel detects per-channel parameters at run time", "[epilogue][channel]") {
  const std::vector<float> s4{0.5f, 1.f, 2.f, 4.f};
  const std::vector<float> other(4);
  CHECK_FALSE(kfuse::uses_channel(epilogue<>{}));
  CHECK_FALSE(kfuse::uses_channel(epilogue<kfuse::scale, kfuse::relu, square_plus>{}));
  CHECK(kfuse::uses_channel(epilogue<kfuse::scale, kfuse::bias>{{}, {{s4.data(), 4}}}));
  CHECK(kfuse::uses_channel(epilogue<channel_ramp>{{}}));
  CHECK_FALSE(kfuse::uses_channel(epilogue<kfuse::add<>>{{{std::span<const float>(other)}}}));
  CHECK(kfuse::uses_channel(epilogue<kfuse::add<>>{{{std::span<const float>(other), true}}}));
  CHECK(kfuse::uses_channel(
      epilogue<kfuse::relu, kfuse::mul<>>{{}, {{std::span<const float>(other), true}}}));
  CHECK_FALSE(kfuse::uses_channel(epilogue<kfuse::quantize<kfuse::i8>>{{{0.5f, 1}}}));
  CHECK(kfuse::uses_channel(epilogue<kfuse::quantize<kfuse::i8>>{{{1.f, 0, s4}}}));
  CHECK_FALSE(kfuse::uses_channel(epilogue<kfuse::dequantize>{{{0.5f, 1}}}));
  CHECK(kfuse::uses_channel(epilogue<kfuse::dequantize>{{{1.f, 0, s4}}}));
  CHECK_FALSE(kfuse::uses_channel(epilogue<kfuse::requantize<kfuse::u8>>{{2.f, 3}}));
  CHECK(kfuse::uses_channel(epilogue<kfuse::requantize<kfuse::u8>>{{1.f, 0, s4}}));
}

namespace {
/// x values whose quotient by s is a near-tie (k + 1/2, a few ulps either side), an integer, or
/// anywhere in 2^-24 .. 2^24, with both signs: where a quotient one ulp off changes the result.
std::vector<float> quotient_probes(float s, std::mt19937& rng) {
  std::vector<float> x;
  std::uniform_int_distribution<int> k(-300, 300);
  std::uniform_real_distribution<float> e(-24.f, 24.f);
  for (int i = 0; i < 4000; ++i) {
    const float tie = (float(k(rng)) + 0.5f) * s;
    for (int u = -3; u <= 3; ++u) {
      float v = tie;
      for (int j = 0; j < std::abs(u); ++j) v = std::nextafter(v, u < 0 ? -INFINITY : INFINITY);
      x.push_back(v);
    }
    x.push_back(float(k(rng)) * s);
    x.push_back((i % 2 ? -1.f : 1.f) * std::exp2(e(rng)) * s);
  }
  return x;
}

template <class A, class B, class E>
void check_quantize_rounding(float s, std::int32_t zp, const std::vector<float>& x) {
  using Q = kfuse::storage_t<E>;
  std::vector<Q> got(x.size());
  kfuse::eltwise<A, B>(x.data(), got.data(), index_t(x.size()),
                       epilogue<kfuse::quantize<E>>{{{s, zp}}});
  const double lo = double(kfuse::elem_traits<E>::min), hi = double(kfuse::elem_traits<E>::max);
  int failures = 0;
  for (std::size_t i = 0; i < x.size() && failures < 5; ++i) {
    const float quot = x[i] / s;  // the division the stage must round as
    const double want = std::clamp(double(std::nearbyint(quot)) + zp, lo, hi);
    if (double(got[i]) != want) {
      ++failures;
      UNSCOPED_INFO(A::name << " scale " << s << " x " << x[i] << " got " << double(got[i])
                            << " want " << want);
    }
  }
  CHECK(failures == 0);
}
}  // namespace

TEST_CASE("quantize rounds x / scale exactly as the division, near ties too",
          "[epilogue][quantize]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(5);
  // An all-ones mantissa, a power of two, typical activation scales and a tiny one.
  for (float s : {0x1.fffffep-4f, 0.0625f, 0.0236f, 0.1f, 3.7e-3f, 1.f / 3.f, 1e-6f}) {
    INFO("scale " << s);
    const std::vector<float> x = quotient_probes(s, rng);
    for_each_backend([&](auto b) {
      using B = decltype(b);
      check_quantize_rounding<test_arch, B, kfuse::u8>(s, 128, x);
      check_quantize_rounding<test_arch, B, kfuse::i8>(s, 0, x);
      check_quantize_rounding<kfuse::arch::generic, B, kfuse::u8>(s, 128, x);
    });
  }
}
