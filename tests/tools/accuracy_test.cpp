// accuracy: exact figures on hand-made outputs, bf16 rounding stays within one bf16 ulp, top-1
// per row, NaN handling, thresholds and the errors.
#include "kfuse/tools/accuracy.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

TEST_CASE("compare_outputs: identical outputs", "[tools][accuracy]") {
  const std::vector<float> ref{1.f, -2.f, 3.f, 0.f, 5.f, -6.f};
  const auto r = kfuse::compare_outputs(ref, ref, 2);
  CHECK(r.count == 6);
  CHECK(r.max_abs == 0);
  CHECK(r.max_rel == 0);
  CHECK(r.mean_rel == 0);
  CHECK(r.cosine == Approx(1.0));
  CHECK(r.top1_agree == 2);
  CHECK(r.top1 == 1.0);
  CHECK(kfuse::meets(r, {0, 0, 0, 0.999999, 1.0}));
}

TEST_CASE("compare_outputs: exact error figures", "[tools][accuracy]") {
  // rms(ref) = sqrt((4 + 16 + 0 + 1) / 4); floor = 1e-3 * rms.
  const std::vector<float> ref{2.f, -4.f, 0.f, 1.f};
  const std::vector<float> got{2.5f, -4.f, 0.001f, 1.f};
  const auto r = kfuse::compare_outputs(ref, got);
  const double rms = std::sqrt(21.0 / 4), floor = 1e-3 * rms;
  CHECK(r.ref_rms == Approx(rms));
  CHECK(r.max_abs == Approx(0.5));
  CHECK(r.max_abs_at == 0);
  const double rel0 = 0.25, rel2 = 0.001 / floor;
  CHECK(r.max_rel == Approx(std::max(rel0, rel2)).epsilon(1e-5));
  CHECK(r.mean_rel == Approx((rel0 + rel2) / 4).epsilon(1e-5));
  const double dot = 2 * 2.5 + 16 + 0 + 1, n1 = std::sqrt(21.0),
               n2 = std::sqrt(2.5 * 2.5 + 16 + 1e-6 + 1);
  CHECK(r.cosine == Approx(dot / (n1 * n2)).epsilon(1e-9));
  CHECK(r.rows == 0);
  CHECK(kfuse::to_string(r).find("top-1") == std::string::npos);

  const std::vector<float> a{1.f, 0.f}, b{0.f, 1.f};
  CHECK(kfuse::compare_outputs(a, b).cosine == Approx(0.0).margin(1e-12));
  const std::vector<float> z{0.f, 0.f};
  CHECK(kfuse::compare_outputs(z, z).cosine == 1.0);
}

TEST_CASE("compare_outputs: bf16 outputs stay within one bf16 rounding", "[tools][accuracy]") {
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> ref(4096);
  std::vector<kfuse::bf16_t> got(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ref[i] = nd(rng);
    got[i] = kfuse::from_float<kfuse::bf16_t>(ref[i]);
  }
  const auto r = kfuse::compare_outputs(ref, got, 64);
  INFO(kfuse::to_string(r));
  CHECK(r.nonfinite == 0);
  CHECK(r.max_rel <= std::ldexp(1.0, -8) * 1.0001);  // RNE: half of bf16's 2^-7 spacing
  CHECK(r.cosine > 0.99999);
  CHECK(r.top1 >= 0.95);  // a rounding tie can flip an argmax, rarely
}

TEST_CASE("compare_outputs: top-1 per row", "[tools][accuracy]") {
  // 3 rows of 4 classes; row 1's argmax moves from class 2 to class 0.
  const std::vector<float> ref{0.1f, 0.7f, 0.1f, 0.1f, 0.2f,  0.1f,
                               0.6f, 0.1f, 0.9f, 0.0f, 0.05f, 0.05f};
  std::vector<float> got = ref;
  got[4] = 0.65f;
  const auto r = kfuse::compare_outputs(ref, got, 3);
  CHECK(r.top1_agree == 2);
  CHECK(r.top1 == Approx(2.0 / 3));
  CHECK(kfuse::to_string(r).find("top-1 2/3 (66.7%)") != std::string::npos);
  CHECK_FALSE(kfuse::meets(r, {.min_top1 = 0.9}));
  CHECK(kfuse::meets(r, {.max_abs = 0.5, .min_top1 = 0.6}));
}

TEST_CASE("compare_outputs: non-finite outputs and bad arguments", "[tools][accuracy]") {
  const std::vector<float> ref{1.f, 2.f, 3.f};
  const std::vector<float> got{1.f, NAN, 3.f};
  const auto r = kfuse::compare_outputs(ref, got);
  CHECK(r.nonfinite == 1);
  CHECK(std::isinf(r.max_abs));
  CHECK(r.max_abs_at == 1);
  CHECK_FALSE(kfuse::meets(r, {}));
  CHECK(kfuse::to_string(r).find("NON-FINITE 1") != std::string::npos);

  const std::vector<float> short_out{1.f, 2.f};
  CHECK_THROWS_WITH(kfuse::compare_outputs(ref, short_out),
                    Catch::Contains("accuracy") && Catch::Contains("3 values, the output 2"));
  CHECK_THROWS_WITH(kfuse::compare_outputs(ref, ref, 2), Catch::Contains("do not form 2 rows"));
  const std::vector<float> none;
  CHECK(kfuse::compare_outputs(none, none).count == 0);
}
