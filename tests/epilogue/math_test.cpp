// Math stages (epilogue/math.hpp) on every backend of the arch under test and on arch::generic,
// against double references: special values (0, -0, +-Inf, NaN, tiny, huge), random values over
// each function's useful range, the eltwise kernel's tails, and operands per element / channel.
//
// Tolerances (relative to |reference|, plus an absolute floor near zeros of the function):
//  - exact stages (abs, floor, ceil, round, sign, max, min, prelu): bit-equal to the float result
//  - one IEEE operation (sqrt, reciprocal, div, softsign): 2^-23 (one rounding, two for softsign)
//  - exp, log: 4 ulp (xsimd's and Highway's exp / log are specified to 1-4 ulp); exp's results
//    below FLT_MIN may be 0
//  - erf: 1e-6 absolute (the erf of simd/erf.hpp, |error| < 3e-7 |x| over its range)
//  - softplus, mish, elu, celu, selu: 8 ulp of the result plus 1e-30 (compositions of exp / log,
//    with expm1 / log1p done without cancellation, so small arguments keep their accuracy)
//  - pow, power: (|y ln x| + 4) * 2^-23: exp(y ln|x|) carries the rounding of y ln x
#include "support/test_support.hpp"

using namespace kt;
namespace km = kfuse::math;

namespace {

constexpr double ulp = 1.0 / (1 << 23);
const float inf = std::numeric_limits<float>::infinity();
const float nan = std::numeric_limits<float>::quiet_NaN();

/// Special values every unary stage sees.
std::vector<float> specials() {
  return {0.f,    -0.f,   1.f,     -1.f,    0.5f, -0.5f, 2.f,  -2.f,  3.f,   -3.f,       1e-7f,
          -1e-7f, 1e-30f, -1e-30f, 1e-40f,  20.f, -20.f, 80.f, -80.f, 87.f,  -87.f,      -100.f,
          -200.f, 1e30f,  -1e30f,  3.4e38f, inf,  -inf,  nan,  2.5f,  -2.5f, 0.49999997f};
}

/// got against ref (double) with the stated tolerance; NaN must be NaN, Inf the same Inf.
void expect_close(float x, double ref, float got, double rel, double abs_tol, const char* what) {
  INFO(what << "(" << x << "): got " << got << ", reference " << ref);
  const float r = float(ref);
  if (std::isnan(r)) {
    CHECK(std::isnan(got));
  } else if (std::isinf(r) || std::isinf(got)) {
    CHECK(got == r);
  } else {
    CHECK(std::fabs(double(got) - double(r)) <= rel * std::fabs(double(r)) + abs_tol);
  }
}

double softplus_d(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
double expm1_d(double x) { return std::expm1(x); }

/// Runs stage s over xs lane group by lane group on vector type V.
template <class V, class S>
std::vector<float> run_unary(const S& s, const std::vector<float>& xs) {
  std::vector<float> in(xs), out(xs.size());
  const kfuse::lane_ctx<V, false> ctx{0, 0, V::lanes};
  std::size_t i = 0;
  for (; i + V::lanes <= in.size(); i += V::lanes)
    kfuse::simd::store(out.data() + i, s(kfuse::simd::load<V>(in.data() + i), ctx));
  for (; i < in.size(); ++i) {  // the rest one lane at a time: broadcast, take lane 0
    float lanes[64];
    kfuse::simd::store(lanes, s(V(in[i]), ctx));
    out[i] = lanes[0];
  }
  return out;
}

template <class V, class F>
std::vector<float> run_binary(const std::vector<float>& xs, const std::vector<float>& ys) {
  std::vector<float> out(xs.size());
  std::size_t i = 0;
  for (; i + V::lanes <= xs.size(); i += V::lanes)
    kfuse::simd::store(out.data() + i, F::apply(kfuse::simd::load<V>(xs.data() + i),
                                                kfuse::simd::load<V>(ys.data() + i)));
  for (; i < xs.size(); ++i) {
    float lanes[64];
    kfuse::simd::store(lanes, F::apply(V(xs[i]), V(ys[i])));
    out[i] = lanes[0];
  }
  return out;
}

template <class V, class S, class Ref>
void check_unary(const S& s, Ref ref, double rel, double abs_tol, float lo, float hi,
                 std::mt19937& rng) {
  std::vector<float> xs = specials();
  std::uniform_real_distribution<float> u(lo, hi);
  for (int k = 0; k < 301; ++k) xs.push_back(u(rng));
  const std::vector<float> got = run_unary<V>(s, xs);
  for (std::size_t i = 0; i < xs.size(); ++i)
    expect_close(xs[i], ref(double(xs[i])), got[i], rel, abs_tol, S::name.data());
}

template <class V>
void check_all_unary(std::mt19937& rng) {
  check_unary<V>(
      km::exp{}, [](double x) { return std::exp(x); }, 4 * ulp, 1.2e-38, -90, 90, rng);
  check_unary<V>(
      km::log{}, [](double x) { return std::log(x); }, 4 * ulp, 0, 1e-6f, 1e6f, rng);
  check_unary<V>(
      km::log{}, [](double x) { return std::log(x); }, 4 * ulp, 1e-7, 0.5f, 2.f, rng);
  check_unary<V>(
      km::sqrt{}, [](double x) { return std::sqrt(x); }, ulp, 0, 0, 1e4f, rng);
  check_unary<V>(
      km::reciprocal{}, [](double x) { return 1 / x; }, ulp, 0, -10, 10, rng);
  check_unary<V>(
      km::abs{}, [](double x) { return std::fabs(x); }, 0, 0, -10, 10, rng);
  check_unary<V>(
      km::floor{}, [](double x) { return std::floor(x); }, 0, 0, -10, 10, rng);
  check_unary<V>(
      km::ceil{}, [](double x) { return std::ceil(x); }, 0, 0, -10, 10, rng);
  check_unary<V>(
      km::round{}, [](double x) { return std::nearbyint(x); }, 0, 0, -10, 10, rng);
  check_unary<V>(
      km::sign{}, [](double x) { return x != x ? x : double((x > 0) - (x < 0)); }, 0, 0, -2, 2,
      rng);
  check_unary<V>(
      km::erf{}, [](double x) { return std::erf(x); }, 0, 1e-6, -5, 5, rng);
  check_unary<V>(
      km::logical_not{}, [](double x) { return double(x == 0); }, 0, 0, -2, 2, rng);
  check_unary<V>(km::softplus{}, softplus_d, 8 * ulp, 1e-30, -30, 30, rng);
  check_unary<V>(
      km::softsign{}, [](double x) { return x / (1 + std::fabs(x)); }, 2 * ulp, 0, -10, 10, rng);
  check_unary<V>(
      km::mish{}, [](double x) { return x * std::tanh(softplus_d(x)); }, 8 * ulp, 1e-30, -20, 20,
      rng);
  for (float a : {1.f, 0.3f, 2.5f}) {
    check_unary<V>(
        km::elu{a}, [a](double x) { return x > 0 ? x : a * expm1_d(x); }, 8 * ulp, 1e-30, -10, 10,
        rng);
    check_unary<V>(
        km::celu{a}, [a](double x) { return x > 0 ? x : a * expm1_d(x / a); }, 8 * ulp, 1e-30, -10,
        10, rng);
  }
  check_unary<V>(
      km::selu{},
      [](double x) {
        const double a = double(km::selu{}.alpha), g = double(km::selu{}.gamma);
        return g * (x > 0 ? x : a * expm1_d(x));
      },
      8 * ulp, 1e-30, -10, 10, rng);
  for (float p : {2.f, 3.f, 0.5f, 1.f, -1.f, 1.5f, -2.f, 0.f, 4.f}) {
    check_unary<V>(
        km::power{p}, [p](double x) { return std::pow(x, double(p)); },
        (std::fabs(p) * 90 + 4) * ulp, 1e-37, -4, 4, rng);
  }
}

template <class V>
void check_all_binary(std::mt19937& rng) {
  std::vector<float> xs, ys;
  const std::vector<float> sp = specials();
  for (float a : sp)  // every pair of special values
    for (float b : {0.f, -0.f, 1.f, -1.f, 2.f, -2.f, 0.5f, 3.f, -3.f, inf, -inf, nan}) {
      xs.push_back(a);
      ys.push_back(b);
    }
  std::uniform_real_distribution<float> u(-8, 8);
  for (int k = 0; k < 400; ++k) {
    xs.push_back(u(rng));
    ys.push_back(k % 3 == 0 ? std::round(u(rng)) : u(rng));  // integer exponents for pow
  }
  const auto div = run_binary<V, km::div<>>(xs, ys);
  const auto mx = run_binary<V, km::max<>>(xs, ys);
  const auto mn = run_binary<V, km::min<>>(xs, ys);
  const auto pw = run_binary<V, km::pow<>>(xs, ys);
  const auto pr = run_binary<V, km::prelu<>>(xs, ys);
  const auto eq = run_binary<V, km::equal<>>(xs, ys);
  const auto lt = run_binary<V, km::less<>>(xs, ys);
  const auto le = run_binary<V, km::less_equal<>>(xs, ys);
  const auto gt = run_binary<V, km::greater<>>(xs, ys);
  const auto ge = run_binary<V, km::greater_equal<>>(xs, ys);
  const auto land = run_binary<V, km::logical_and<>>(xs, ys);
  const auto lor = run_binary<V, km::logical_or<>>(xs, ys);
  const auto lxor = run_binary<V, km::logical_xor<>>(xs, ys);
  const auto kif = run_binary<V, km::keep_if<>>(xs, ys);
  const auto kun = run_binary<V, km::keep_unless<>>(xs, ys);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], y = ys[i];
    INFO("y = " << y);
    expect_close(xs[i], x / y, div[i], ulp, 0, "div");
    const bool any_nan = x != x || y != y;
    expect_close(xs[i], any_nan ? double(nan) : std::max(x, y), mx[i], 0, 0, "max");
    expect_close(xs[i], any_nan ? double(nan) : std::min(x, y), mn[i], 0, 0, "min");
    const double p = std::pow(x, y);
    const double lx = std::fabs(y * std::log(std::fabs(x)));
    // Beyond float's range the float pow is 0 or Inf: compare with the rounded reference.
    expect_close(xs[i], p, pw[i], ((std::isfinite(lx) ? lx : 0) + 4) * ulp, 1e-37, "pow");
    expect_close(xs[i], x < 0 ? double(float(x * y)) : x, pr[i], 0, 0, "prelu");
    // Comparisons and logic: exactly 1 or 0 (C's truth: NaN is true, compares false).
    expect_close(xs[i], double(x == y), eq[i], 0, 0, "equal");
    expect_close(xs[i], double(x < y), lt[i], 0, 0, "less");
    expect_close(xs[i], double(x <= y), le[i], 0, 0, "less_equal");
    expect_close(xs[i], double(x > y), gt[i], 0, 0, "greater");
    expect_close(xs[i], double(x >= y), ge[i], 0, 0, "greater_equal");
    expect_close(xs[i], double(x != 0 && y != 0), land[i], 0, 0, "logical_and");
    expect_close(xs[i], double(x != 0 || y != 0), lor[i], 0, 0, "logical_or");
    expect_close(xs[i], double((x != 0) != (y != 0)), lxor[i], 0, 0, "logical_xor");
    expect_close(xs[i], y != 0 ? x : 0.0, kif[i], 0, 0, "keep_if");
    expect_close(xs[i], y == 0 ? x : 0.0, kun[i], 0, 0, "keep_unless");
  }
}

}  // namespace

TEST_CASE("math stages: special and random values on every backend against double",
          "[epilogue][math]") {
  std::mt19937 rng(5);
  SECTION("generic") {
    using V = kfuse::simd::vec_for<kfuse::arch::generic, kfuse::backend::xsimd>;
    check_all_unary<V>(rng);
    check_all_binary<V>(rng);
  }
  if (!cpu_can_run()) return;
  for_each_backend([&](auto b) {
    using V = kfuse::simd::vec_for<test_arch, decltype(b)>;
    check_all_unary<V>(rng);
    check_all_binary<V>(rng);
  });
}

TEST_CASE("math stages in the eltwise kernel: tails, per-element and per-channel operands",
          "[epilogue][math]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(7);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (index_t n : test_lengths(kfuse::simd::vec_for<test_arch, B>::lanes)) {
      INFO("n = " << n);
      std::vector<float> x(std::size_t(n) + 1), o(std::size_t(n) + 1);
      fill_random(x.data(), n, rng, 1.5f, 8.f);  // log(x) > 0: pow of it is real
      fill_random(o.data(), n, rng, -3.f, 3.f);
      guarded<float> y(n, 0xAB);
      kfuse::eltwise<test_arch, B>(
          x.data(), y.data, n,
          kfuse::epilogue<km::log, km::pow<>>{{}, {{std::span<const float>(o.data(), n)}}});
      CHECK(y.guards_intact());
      for (index_t i = 0; i < n; ++i) {
        const double ref = std::pow(std::log(double(x[i])), double(o[i]));
        INFO("i = " << i);
        CHECK(std::fabs(y.data[i] - ref) <= 1e-5 * std::fabs(ref) + 1e-6);
      }
    }
    // One slope per channel (ONNX PRelu), NHWC and NCHW.
    const kfuse::dims4 d{2, 5, 3, 7};
    const index_t count = d.n * d.c * d.h * d.w;
    std::vector<float> x(static_cast<std::size_t>(count)), y(x.size());
    const std::vector<float> slope{-0.5f, 0.f, 0.25f, 1.f, 2.f};
    fill_random(x.data(), count, rng);
    const km::prelu<> pr{{std::span<const float>(slope), true}};
    kfuse::eltwise<test_arch, B>(kfuse::tensor_view<const float, kfuse::nhwc>{x.data(), d},
                                 kfuse::tensor_view<float, kfuse::nhwc>{y.data(), d},
                                 kfuse::epilogue<km::prelu<>>{pr});
    for (index_t i = 0; i < count; ++i) {
      const float s = slope[std::size_t(i % d.c)];
      REQUIRE(y[std::size_t(i)] ==
              (x[std::size_t(i)] < 0 ? x[std::size_t(i)] * s : x[std::size_t(i)]));
    }
    kfuse::eltwise<test_arch, B>(kfuse::tensor_view<const float, kfuse::nchw>{x.data(), d},
                                 kfuse::tensor_view<float, kfuse::nchw>{y.data(), d},
                                 kfuse::epilogue<km::prelu<>>{pr});
    for (index_t i = 0; i < count; ++i) {
      const float s = slope[std::size_t((i / (d.h * d.w)) % d.c)];
      REQUIRE(y[std::size_t(i)] ==
              (x[std::size_t(i)] < 0 ? x[std::size_t(i)] * s : x[std::size_t(i)]));
    }
  });
}

TEST_CASE("math stages: a wrong operand or parameter is a kfuse::error naming the stage",
          "[epilogue][math]") {
  std::vector<float> x(10), y(10), o(9);
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH((kfuse::eltwise<kfuse::arch::generic>(
                        x.data(), y.data(), 10,
                        kfuse::epilogue<km::div<>>{{{std::span<const float>(o.data(), 9)}}})),
                    Contains("'div'") && Contains("second tensor has 9 elements"));
  CHECK_THROWS_WITH((kfuse::eltwise<kfuse::arch::generic>(x.data(), y.data(), 10,
                                                          kfuse::epilogue<km::celu>{{0.f}})),
                    Contains("'celu'") && Contains("alpha must not be 0"));
}
