// attention: the fused kernel against a double-precision softmax(Q.K^T * scale + bias) . V on
// random problems: head dims 32, 64, 80, 128 and odd ones, sequences shorter and longer than a
// key block, grouped-query heads, a key-padding bias with -inf and -30 entries, causal masks,
// one query against a KV cache, 1 and 2 threads (bitwise equal), a fully masked row (zeros), NaN
// propagation and the errors; every problem again with bf16 Q, K, V and output, and with the
// products in bf16 (Math = bf16: vdpbf16ps, or its emulation on archs without it).
//
// Tolerance: the output is a convex combination of V's rows (|v| <= 1): the f32 dot products
// of d terms, the exp approximation (3e-7 relative) and the f32 sums over the keys keep the
// error near 1e-6; 1e-5 + 2e-7 (d + Sk) leaves a margin and still catches a wrong key or head.
// (A -10000 mask, as BERT exports add, rounds the scores to 1e-3 in f32 in PyTorch as here: the
// model tests cover it against PyTorch; this one uses -30, which a double reference can follow.)
#include "kfuse/kernels/attention.hpp"

#include <cmath>

#include "support/test_support.hpp"

using namespace kt;
using kfuse::attention_problem;

namespace {

struct att_case {
  attention_problem p;
  std::vector<float> q, k, v, bias;  // bias [B, 1, 1, Sk] when not empty
};

att_case make(std::mt19937& rng, index_t B, index_t H, index_t Hkv, index_t Sq, index_t Sk,
              index_t d, bool with_bias, bool causal) {
  att_case c;
  c.p = attention_problem::bshd(B, H, Sq, Sk, d, Hkv);
  c.p.causal = causal;
  c.q.resize(std::size_t(B * Sq * H * d));
  c.k.resize(std::size_t(B * Sk * Hkv * d));
  c.v.resize(c.k.size());
  fill_random(c.q.data(), index_t(c.q.size()), rng, -1.f, 1.f);
  fill_random(c.k.data(), index_t(c.k.size()), rng, -1.f, 1.f);
  fill_random(c.v.data(), index_t(c.v.size()), rng, -1.f, 1.f);
  if (with_bias) {
    c.bias.assign(std::size_t(B * Sk), 0.f);
    std::uniform_int_distribution<int> pick(0, 5);
    for (float& x : c.bias) {
      const int r = pick(rng);
      x = r == 0 ? -std::numeric_limits<float>::infinity() : r == 1 ? -30.f : 0.1f * float(r);
    }
    c.p.bias_strides = {Sk, 0, 0, 1};
  }
  return c;
}

std::vector<double> reference(const att_case& c) {
  const attention_problem& p = c.p;
  const index_t d = p.head_dim, group = p.heads / p.kv_heads;
  std::vector<double> out(std::size_t(p.batch * p.q_len * p.heads * d));
  const double scale = p.scale_or_default();
  for (index_t b = 0; b < p.batch; ++b)
    for (index_t h = 0; h < p.heads; ++h)
      for (index_t i = 0; i < p.q_len; ++i) {
        std::vector<double> s(std::size_t(p.kv_len));
        double m = -INFINITY;
        for (index_t j = 0; j < p.kv_len; ++j) {
          double dot = 0;
          for (index_t x = 0; x < d; ++x)
            dot += double(c.q[std::size_t(((b * p.q_len + i) * p.heads + h) * d + x)]) *
                   c.k[std::size_t(((b * p.kv_len + j) * p.kv_heads + h / group) * d + x)];
          double v = dot * scale;
          if (!c.bias.empty()) v += c.bias[std::size_t(b * p.kv_len + j)];
          if (p.causal && j > i + (p.kv_len - p.q_len)) v = -INFINITY;
          s[std::size_t(j)] = v;
          m = std::max(m, v);
        }
        double sum = 0;
        for (double& v : s) sum += (v = m == -INFINITY ? 0 : std::exp(v - m));
        for (index_t x = 0; x < d; ++x) {
          double o = 0;
          for (index_t j = 0; j < p.kv_len; ++j)
            o += s[std::size_t(j)] *
                 c.v[std::size_t(((b * p.kv_len + j) * p.kv_heads + h / group) * d + x)];
          out[std::size_t(((b * p.q_len + i) * p.heads + h) * d + x)] = sum > 0 ? o / sum : 0;
        }
      }
  return out;
}

void check(const att_case& c, const char* what) {
  using K = kfuse::attention_kernel<test_arch>;
  const std::size_t n = c.q.size();
  std::vector<float> o1(n, std::nanf("")), o2(n, std::nanf(""));
  const float* bias = c.bias.empty() ? nullptr : c.bias.data();
  K::run(c.q.data(), c.k.data(), c.v.data(), bias, o1.data(), c.p, {.threads = 1});
  K::run(c.q.data(), c.k.data(), c.v.data(), bias, o2.data(), c.p, {.threads = 2});
  const std::vector<double> want = reference(c);
  const double tol = 1e-5 + 2e-7 * double(c.p.head_dim + c.p.kv_len);
  for (std::size_t i = 0; i < n; ++i) {
    INFO(what << " element " << i << " got " << o1[i] << " want " << want[i]);
    REQUIRE(std::fabs(o1[i] - want[i]) <= tol);
    REQUIRE(o1[i] == o2[i]);
  }
}

/// x rounded to bf16: the values returned, and x itself rounded (the reference sees them).
std::vector<kfuse::bf16_t> to_bf16(std::vector<float>& x) {
  std::vector<kfuse::bf16_t> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    r[i] = kfuse::from_float<kfuse::bf16_t>(x[i]);
    x[i] = kfuse::to_float(r[i]);
  }
  return r;
}

/// The same problem with Q, K, V and the output in bf16: against the reference of the rounded
/// inputs, the f32 tolerance plus the output's rounding (half a bf16 ulp: 2^-8 relative).
void check_bf16(att_case c, const char* what) {
  using K = kfuse::attention_kernel<test_arch>;
  using kfuse::bf16_t;
  const std::vector<bf16_t> q = to_bf16(c.q), k = to_bf16(c.k), v = to_bf16(c.v);
  const std::size_t n = c.q.size();
  std::vector<bf16_t> o1(n, kfuse::from_float<bf16_t>(std::nanf(""))), o2 = o1;
  const float* bias = c.bias.empty() ? nullptr : c.bias.data();
  const auto info = K::run(q.data(), k.data(), v.data(), bias, o1.data(), c.p, {.threads = 1});
  CHECK(std::string(info.micro_kernel) == "bf16 in, f32 arithmetic");
  K::run(q.data(), k.data(), v.data(), bias, o2.data(), c.p, {.threads = 2});
  const std::vector<double> want = reference(c);
  const double tol = 1e-5 + 2e-7 * double(c.p.head_dim + c.p.kv_len);
  for (std::size_t i = 0; i < n; ++i) {
    const float got = kfuse::to_float(o1[i]);
    INFO(what << " (bf16) element " << i << " got " << got << " want " << want[i]);
    REQUIRE(std::fabs(got - want[i]) <= tol + std::fabs(want[i]) * 0x1p-8);
    REQUIRE(kfuse::to_float(o1[i]) == kfuse::to_float(o2[i]));
  }
}

/// The products in bf16 (f32 and bf16 in / out): against the reference of Q, K, V rounded to bf16
/// (the kernel rounds them once). What remains is the probabilities' rounding (2^-9 relative
/// each, so at most 2^-9 max|v| = 2^-9 on the convex combination; the f32 sums normalize the
/// unrounded ones), the f32 tolerance and, for bf16 out, the output's rounding: tolerance
/// 2^-8 absolute (twice the probabilities' bound) on top of check_bf16's.
void check_bf16_math(att_case c, const char* what) {
  using K = kfuse::attention_kernel<test_arch, kfuse::backend::xsimd, kfuse::bf16>;
  using kfuse::bf16_t;
  const std::vector<float> qf = c.q, kf = c.k, vf = c.v;  // f32 in: the kernel rounds them
  const std::vector<bf16_t> q = to_bf16(c.q), k = to_bf16(c.k), v = to_bf16(c.v);
  const std::size_t n = c.q.size();
  const float* bias = c.bias.empty() ? nullptr : c.bias.data();
  std::vector<float> f1(n, std::nanf("")), f2 = f1;
  std::vector<bf16_t> o1(n, kfuse::from_float<bf16_t>(std::nanf(""))), o2 = o1;
  const auto info = K::run(qf.data(), kf.data(), vf.data(), bias, f1.data(), c.p, {.threads = 1});
  CHECK(info.micro_kernel == K::base::micro_kernel());
  K::run(qf.data(), kf.data(), vf.data(), bias, f2.data(), c.p, {.threads = 2});
  K::run(q.data(), k.data(), v.data(), bias, o1.data(), c.p, {.threads = 1});
  K::run(q.data(), k.data(), v.data(), bias, o2.data(), c.p, {.threads = 2});
  const std::vector<double> want = reference(c);
  const double tol = 1e-5 + 2e-7 * double(c.p.head_dim + c.p.kv_len) + 0x1p-8;
  for (std::size_t i = 0; i < n; ++i) {
    const float got = kfuse::to_float(o1[i]);
    INFO(what << " (bf16 products) element " << i << " f32 out " << f1[i] << " bf16 out " << got
              << " want " << want[i]);
    REQUIRE(std::fabs(f1[i] - want[i]) <= tol);
    REQUIRE(std::fabs(got - want[i]) <= tol + std::fabs(want[i]) * 0x1p-8);
    REQUIRE(f1[i] == f2[i]);
    REQUIRE(kfuse::to_float(o1[i]) == kfuse::to_float(o2[i]));
  }
}

}  // namespace

TEST_CASE("attention: random problems against a double reference", "[attention]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(99);
  struct shape {
    index_t B, H, Hkv, Sq, Sk, d;
  };
  const shape shapes[] = {{1, 2, 2, 5, 5, 32},    {2, 3, 3, 17, 17, 64},  {1, 4, 2, 9, 70, 80},
                          {2, 2, 1, 1, 130, 128}, {1, 1, 1, 7, 3, 7},     {1, 2, 2, 66, 200, 64},
                          {3, 2, 2, 1, 1, 16},    {1, 2, 2, 20, 150, 32}, {1, 1, 1, 13, 100, 48}};
  for (const shape& s : shapes)
    for (int variant = 0; variant < 4; ++variant) {
      const bool bias = variant & 1, causal = variant & 2;
      const att_case c = make(rng, s.B, s.H, s.Hkv, s.Sq, s.Sk, s.d, bias, causal);
      const std::string what = std::string("B") + std::to_string(s.B) + " H" + std::to_string(s.H) +
                               " Sq" + std::to_string(s.Sq) + " Sk" + std::to_string(s.Sk) + " d" +
                               std::to_string(s.d) + (bias ? " bias" : "") +
                               (causal ? " causal" : "");
      check(c, what.c_str());
      check_bf16(c, what.c_str());
      check_bf16_math(c, what.c_str());
    }
}

namespace {
template <class K>
void masked_row_and_nan() {
  std::mt19937 rng(3);
  att_case c = make(rng, 2, 2, 2, 4, 6, 32, true, false);
  for (index_t j = 0; j < 6; ++j) c.bias[std::size_t(j)] = -INFINITY;  // batch 0 sees no key
  std::vector<float> o(c.q.size(), std::nanf(""));
  K::run(c.q.data(), c.k.data(), c.v.data(), c.bias.data(), o.data(), c.p);
  for (std::size_t i = 0; i < o.size() / 2; ++i) REQUIRE(o[i] == 0.f);
  for (std::size_t i = o.size() / 2; i < o.size(); ++i) REQUIRE(std::isfinite(o[i]));
  c.v[std::size_t(6 * 2 * 32 + 5)] = std::nanf("");  // batch 1, key 0, head 0, dim 5
  K::run(c.q.data(), c.k.data(), c.v.data(), c.bias.data(), o.data(), c.p);
  const float b1h0 = o[std::size_t(4 * 2 * 32 + 5)];
  CHECK((std::isnan(b1h0) || c.bias[6] == -INFINITY));
}
}  // namespace

TEST_CASE("attention: a fully masked row gives zeros and NaN propagates", "[attention]") {
  if (!cpu_can_run()) return;
  masked_row_and_nan<kfuse::attention_kernel<test_arch>>();
  masked_row_and_nan<kfuse::attention_kernel<test_arch, kfuse::backend::xsimd, kfuse::bf16>>();
}

TEST_CASE("attention: bad problems and buffers are errors", "[attention]") {
  if (!cpu_can_run()) return;
  using K = kfuse::attention_kernel<test_arch>;
  attention_problem p = attention_problem::bshd(1, 4, 3, 3, 8, 3);
  CHECK_THROWS_WITH(K::initialize(p), Catch::Contains("do not group over"));
  p = attention_problem::bshd(1, 2, 3, 3, 0);
  CHECK_THROWS_WITH(K::initialize(p), Catch::Contains("must be positive"));
  p = attention_problem::bshd(1, 2, 3, 0, 8);
  std::vector<float> q(48), k(48), v(48), o(48);
  CHECK_THROWS_WITH(K::run(q.data(), k.data(), v.data(), nullptr, o.data(), p),
                    Catch::Contains("no keys"));
  p = attention_problem::bshd(1, 2, 3, 3, 8);
  CHECK_THROWS_WITH(K::run(q.data(), k.data(), v.data(), nullptr, q.data(), p),
                    Catch::Contains("overlap"));
  p.scale = std::nanf("");
  CHECK_THROWS_WITH(K::initialize(p), Catch::Contains("not finite"));
}
