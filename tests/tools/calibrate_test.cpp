// calibrate: quant_params_for on known ranges (zero exact, ends within one step), the min/max and
// percentile observers against exact sorted quantiles of seeded data with outliers, and errors.
#include "kfuse/tools/calibrate.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace {

using kfuse::quant_scheme;

// Quantize / dequantize as the int8 plan does: q = clamp(round(x / s) + zp), x' = s (q - zp).
template <class E>
double roundtrip(double x, const kfuse::quant_params& q) {
  const double lo = kfuse::elem_traits<E>::min, hi = kfuse::elem_traits<E>::max;
  const double qi = std::clamp(std::nearbyint(x / q.scale) + q.zero_point, lo, hi);
  return q.scale * (qi - q.zero_point);
}

// Exact quantile (nearest rank) of a sample.
double exact_quantile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  const auto k = std::size_t(std::clamp(q * double(v.size()), 0.0, double(v.size() - 1)));
  return v[k];
}

}  // namespace

TEST_CASE("quant_params_for: affine and symmetric, u8 and i8", "[tools][calibrate]") {
  SECTION("affine u8 of a ReLU range [0, 6]") {
    const auto q = kfuse::quant_params_for<kfuse::u8>({0.f, 6.f}, quant_scheme::affine);
    CHECK(q.scale == Approx(6.0 / 255));
    CHECK(q.zero_point == 0);
  }
  SECTION("affine u8 and i8 of [-1, 3]: zero is an integer, ends within half a step") {
    const auto qu = kfuse::quant_params_for<kfuse::u8>({-1.f, 3.f}, quant_scheme::affine);
    const auto qs = kfuse::quant_params_for<kfuse::i8>({-1.f, 3.f}, quant_scheme::affine);
    CHECK(qu.scale == Approx(4.0 / 255));
    CHECK(qs.scale == Approx(4.0 / 255));
    CHECK(qu.zero_point == 64);  // round(1 / (4/255)) = round(63.75)
    CHECK(qs.zero_point == -64);
    CHECK(roundtrip<kfuse::u8>(0.0, qu) == 0.0);
    CHECK(roundtrip<kfuse::i8>(0.0, qs) == 0.0);
    for (double x : {-1.0, 3.0, 0.37, -0.52}) {
      CHECK(std::fabs(roundtrip<kfuse::u8>(x, qu) - x) <= 0.5 * qu.scale + 1e-6);
      CHECK(std::fabs(roundtrip<kfuse::i8>(x, qs) - x) <= 0.5 * qs.scale + 1e-6);
    }
  }
  SECTION("affine widens to contain zero") {
    const auto q = kfuse::quant_params_for<kfuse::u8>({2.f, 4.f}, quant_scheme::affine);
    CHECK(q.scale == Approx(4.0 / 255));
    CHECK(q.zero_point == 0);
  }
  SECTION("symmetric: i8 zero point 0, u8 zero point 128, scale amax / 127") {
    const auto qs = kfuse::quant_params_for<kfuse::i8>({-2.f, 5.f}, quant_scheme::symmetric);
    const auto qu = kfuse::quant_params_for<kfuse::u8>({-2.f, 5.f}, quant_scheme::symmetric);
    CHECK(qs.scale == Approx(5.0 / 127));
    CHECK(qs.zero_point == 0);
    CHECK(qu.scale == Approx(5.0 / 127));
    CHECK(qu.zero_point == 128);
    CHECK(roundtrip<kfuse::i8>(5.0, qs) == Approx(5.0));
    CHECK(roundtrip<kfuse::u8>(-5.0, qu) == Approx(-5.0));
  }
  SECTION("all-zero range: scale 1") {
    CHECK(kfuse::quant_params_for<kfuse::i8>({0.f, 0.f}, quant_scheme::affine).scale == 1.f);
    CHECK(kfuse::quant_params_for<kfuse::u8>({0.f, 0.f}, quant_scheme::symmetric).scale == 1.f);
  }
  SECTION("bad ranges throw naming calibrate") {
    CHECK_THROWS_WITH(kfuse::quant_params_for<kfuse::u8>({3.f, 1.f}, quant_scheme::affine),
                      Catch::Contains("calibrate") && Catch::Contains("not a finite, ordered"));
    CHECK_THROWS_AS(kfuse::quant_params_for<kfuse::i8>({0.f, INFINITY}, quant_scheme::affine),
                    kfuse::error);
  }
}

TEST_CASE("activation_observer: min/max over several batches", "[tools][calibrate]") {
  kfuse::activation_observer obs;  // minmax by default
  const std::vector<float> a{0.5f, -1.25f, 2.f}, b{7.f, 0.f}, empty;
  obs.observe(a);
  obs.observe(empty);
  obs.observe(b);
  CHECK(obs.count() == 5);
  CHECK(obs.min() == -1.25f);
  CHECK(obs.max() == 7.f);
  CHECK(obs.range(quant_scheme::affine).lo == -1.25f);
  CHECK(obs.range(quant_scheme::affine).hi == 7.f);
  CHECK(obs.range(quant_scheme::symmetric).lo == -7.f);
  const auto q = obs.params<kfuse::u8>(quant_scheme::affine);
  CHECK(q.scale == Approx(8.25 / 255));
}

TEST_CASE("activation_observer: percentile clips outliers, matches exact quantiles",
          "[tools][calibrate]") {
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> all;
  kfuse::activation_observer p({kfuse::observer_method::percentile, 99.9});
  kfuse::activation_observer mm({kfuse::observer_method::minmax});
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<float> x(20000);
    for (auto& v : x) v = nd(rng);
    if (batch == 3) x[17] = 1000.f;  // a rare outlier: min/max follows it, the percentile not
    if (batch == 7) x[5] = -250.f;
    p.observe(x);
    mm.observe(x);
    all.insert(all.end(), x.begin(), x.end());
  }
  CHECK(mm.range(quant_scheme::affine).hi == 1000.f);
  CHECK(mm.range(quant_scheme::affine).lo == -250.f);

  std::vector<float> mag(all.size());
  std::transform(all.begin(), all.end(), mag.begin(), [](float v) { return std::fabs(v); });
  const double t_exact = exact_quantile(mag, 0.999);
  const auto sym = p.range(quant_scheme::symmetric);
  INFO("symmetric " << sym.hi << " exact " << t_exact);
  CHECK(sym.hi == Approx(t_exact).epsilon(0.01));  // bins are 1/128 octave (< 0.8%)
  CHECK(sym.lo == -sym.hi);
  CHECK(sym.hi > 3.0);  // ~3.29 for a standard normal
  CHECK(sym.hi < 3.6);

  const double lo_exact = exact_quantile(all, 0.0005), hi_exact = exact_quantile(all, 0.9995);
  const auto aff = p.range(quant_scheme::affine);
  INFO("affine [" << aff.lo << ", " << aff.hi << "] exact [" << lo_exact << ", " << hi_exact
                  << "]");
  CHECK(aff.lo == Approx(lo_exact).epsilon(0.01));
  CHECK(aff.hi == Approx(hi_exact).epsilon(0.01));

  // The clipped range quantizes the bulk ~300x finer than min/max would.
  const auto q_p = p.params<kfuse::i8>(quant_scheme::symmetric);
  const auto q_m = mm.params<kfuse::i8>(quant_scheme::symmetric);
  CHECK(q_m.scale / q_p.scale > 250);
}

TEST_CASE("activation_observer: percentile with ReLU zeros and a constant tensor",
          "[tools][calibrate]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(50000);
  for (auto& v : x) v = std::max(0.f, nd(rng));  // half zeros
  kfuse::activation_observer p({kfuse::observer_method::percentile, 99.99});
  p.observe(x);
  const auto r = p.range(quant_scheme::affine);
  CHECK(r.lo == 0.f);
  CHECK(r.hi > 3.0f);
  CHECK(r.hi <= p.max());
  CHECK(p.params<kfuse::u8>(quant_scheme::affine).zero_point == 0);

  kfuse::activation_observer c({kfuse::observer_method::percentile, 99.0});
  const std::vector<float> same(100, 2.5f);
  c.observe(same);
  CHECK(c.range(quant_scheme::affine).hi == Approx(2.5).epsilon(0.01));
  CHECK(c.range(quant_scheme::affine).hi <= 2.5f);
  kfuse::activation_observer z({kfuse::observer_method::percentile, 99.0});
  const std::vector<float> zeros(10, 0.f);
  z.observe(zeros);
  CHECK(z.range(quant_scheme::symmetric).hi == 0.f);
  CHECK(z.params<kfuse::i8>(quant_scheme::symmetric).scale == 1.f);
}

TEST_CASE("activation_observer: errors name calibrate", "[tools][calibrate]") {
  kfuse::activation_observer obs;
  CHECK_THROWS_WITH(obs.range(quant_scheme::affine), Catch::Contains("saw no values"));
  const std::vector<float> bad{1.f, NAN};
  CHECK_THROWS_WITH(obs.observe(bad), Catch::Contains("non-finite"));
  CHECK_THROWS_WITH(kfuse::activation_observer({kfuse::observer_method::percentile, 30.0}),
                    Catch::Contains("outside (50, 100]"));
  CHECK_THROWS_AS(kfuse::activation_observer({kfuse::observer_method::percentile, 100.5}),
                  kfuse::error);
}
