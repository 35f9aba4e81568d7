// batched_gemm, f32, bf16 and i8 recipes: random batch shapes with broadcast dimensions, A and B
// transposed through strides, a padded C (rows longer than N, poisoned between them), epilogues
// that read the bias per column and a residual per element (its flat index runs over the whole
// batch), 1 and 2 threads, against a double-precision reference of the values the recipe reads
// (bf16: the inputs rounded to bf16; i8: the exact integer sums, int64).
#include "kfuse/kernels/gemm/batched_gemm.hpp"

#include <cmath>

#include "support/test_support.hpp"

using namespace kt;
using kfuse::batched_gemm_problem;

namespace {

struct case_data {
  batched_gemm_problem p;
  std::vector<float> a, b, bias, residual;
  index_t a_len = 0, b_len = 0, c_len = 0;
};

index_t extent(const batched_gemm_problem& p, const std::array<index_t, 4>& st, index_t r,
               index_t rs, index_t c, index_t cs) {
  index_t last = (r - 1) * rs + (c - 1) * cs;
  for (int i = 0; i < p.batch_rank; ++i) last += (p.batch[std::size_t(i)] - 1) * st[std::size_t(i)];
  return last + 1;
}

/// A random problem: batch dims (some broadcast in A or B), A / B transposed or not, C's rows
/// padded by `pad` columns.
case_data make_case(std::mt19937& rng, index_t M, index_t K, index_t N, bool ta, bool tb,
                    index_t pad) {
  case_data d;
  batched_gemm_problem& p = d.p;
  p.m = M;
  p.k = K;
  p.n = N;
  std::uniform_int_distribution<int> rank(0, 3), dim(1, 3), coin(0, 3);
  p.batch_rank = rank(rng);
  for (int i = 0; i < p.batch_rank; ++i) p.batch[std::size_t(i)] = dim(rng);
  // Dense A [batch..., M, K] (or [.., K, M] when transposed), B likewise, each batch dim of an
  // operand broadcast (stride 0) one time in four.
  p.a_row = ta ? 1 : K;
  p.a_col = ta ? M : 1;
  p.b_row = tb ? 1 : N;
  p.b_col = tb ? K : 1;
  p.c_row = N + pad;
  index_t sa = M * K, sb = K * N, sc = M * p.c_row;
  for (int i = p.batch_rank - 1; i >= 0; --i) {
    const std::size_t s = std::size_t(i);
    const bool a_bc = coin(rng) == 0, b_bc = coin(rng) == 0;
    p.a_batch[s] = a_bc ? 0 : sa;
    p.b_batch[s] = b_bc ? 0 : sb;
    p.c_batch[s] = sc;
    sa *= a_bc ? 1 : p.batch[s];
    sb *= b_bc ? 1 : p.batch[s];
    sc *= p.batch[s];
  }
  d.a_len = extent(p, p.a_batch, M, p.a_row, K, p.a_col);
  d.b_len = extent(p, p.b_batch, K, p.b_row, N, p.b_col);
  d.c_len = extent(p, p.c_batch, M, p.c_row, N, 1);
  d.a.resize(std::size_t(d.a_len));
  d.b.resize(std::size_t(d.b_len));
  fill_random(d.a.data(), d.a_len, rng, -1.f, 1.f);
  fill_random(d.b.data(), d.b_len, rng, -1.f, 1.f);
  d.bias.resize(std::size_t(N));
  fill_random(d.bias.data(), N, rng, -1.f, 1.f);
  d.residual.resize(std::size_t(p.batches() * M * N));
  fill_random(d.residual.data(), index_t(d.residual.size()), rng, -1.f, 1.f);
  return d;
}

index_t offset_of(const batched_gemm_problem& p, const std::array<index_t, 4>& st, index_t b) {
  index_t off = 0;
  for (int i = p.batch_rank - 1; i >= 0; --i) {
    off += (b % p.batch[std::size_t(i)]) * st[std::size_t(i)];
    b /= p.batch[std::size_t(i)];
  }
  return off;
}

/// Runs recipe R on the case with epilogue bias + residual add and checks every element, the
/// padding between C's rows, and that 2 threads give the same bits as 1.
template <class R>
void check_case(const case_data& d, const char* what) {
  using K = kfuse::batched_gemm<R, test_arch, kfuse::epilogue<kfuse::bias, kfuse::add<>>>;
  const batched_gemm_problem& p = d.p;
  const bool lowp = std::is_same_v<R, kfuse::bf16>;
  auto rd = [&](float v) {
    return lowp ? double(kfuse::to_float(kfuse::from_float<kfuse::bf16_t>(v))) : double(v);
  };
  const float poison = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> c1(std::size_t(d.c_len), poison), c2(c1);
  const kfuse::epilogue<kfuse::bias, kfuse::add<>> ep{{d.bias}, {{d.residual}}};
  K::run(d.a.data(), d.b.data(), c1.data(), p, ep, {.threads = 1});
  K::run(d.a.data(), d.b.data(), c2.data(), p, ep, {.threads = 2});
  const index_t batches = p.batches();
  double worst = 0;
  for (index_t bi = 0; bi < batches; ++bi) {
    const float* a = d.a.data() + offset_of(p, p.a_batch, bi);
    const float* b = d.b.data() + offset_of(p, p.b_batch, bi);
    const index_t c0 = offset_of(p, p.c_batch, bi);
    for (index_t m = 0; m < p.m; ++m)
      for (index_t n = 0; n < p.n; ++n) {
        double s = 0, mag = 0;
        for (index_t k = 0; k < p.k; ++k) {
          const double x = rd(a[m * p.a_row + k * p.a_col]) * rd(b[k * p.b_row + n * p.b_col]);
          s += x;
          mag += std::fabs(x);
        }
        s += d.bias[std::size_t(n)] + d.residual[std::size_t((bi * p.m + m) * p.n + n)];
        // f32 accumulation of K products (and the two adds): K ulps of the magnitude.
        const double tol = 2e-7 * double(p.k + 4) * (mag + 2) + 1e-6;
        const float got = c1[std::size_t(c0 + m * p.c_row + n)];
        worst = std::max(worst, std::fabs(got - s) / tol);
        if (!(std::fabs(got - s) <= tol)) {
          INFO(what << " batch " << bi << " m " << m << " n " << n << " got " << got << " want "
                    << s);
          REQUIRE(std::fabs(got - s) <= tol);
        }
      }
  }
  // Padding columns of C stay untouched; 2 threads give the same bits.
  for (std::size_t i = 0; i < c1.size(); ++i) {
    const bool nan1 = std::isnan(c1[i]), nan2 = std::isnan(c2[i]);
    REQUIRE(nan1 == nan2);
    if (!nan1) REQUIRE(c1[i] == c2[i]);
  }
  INFO(what << ": worst error / tolerance " << worst);
}

// The i8 recipe runs where gemm<i8> has a micro-kernel that takes any s8 B (vpdpbusd, or
// generic's scalar one; not the 7-bit vpmaddubsw kernel of avx2 / avx512).
constexpr bool has_int8 =
    kfuse::detail::int8_weight_limit<test_arch,
                                     kfuse::simd::vec_for<test_arch, kfuse::backend::xsimd>>() >=
        128 &&
    kfuse::detail::int8_kernel_available<test_arch,
                                         kfuse::simd::vec_for<test_arch, kfuse::backend::xsimd>>();

/// i8: the case's shapes and strides with integer operands over their whole ranges (A u8 or s8
/// with a random zero point, B s8). The int32 output must equal the exact sums (int64
/// reference); the float output, through scale + bias, the exact value within the rounding of
/// the sum to float and of the two stages.
template <class TA>
void check_int8_case(const case_data& d, std::mt19937& rng, const char* what) {
  if constexpr (has_int8) {
    const batched_gemm_problem& p = d.p;
    std::uniform_int_distribution<int> av(std::numeric_limits<TA>::min(),
                                          std::numeric_limits<TA>::max()),
        bv(-128, 127);
    std::vector<TA> a(std::size_t(d.a_len));
    std::vector<std::int8_t> b(std::size_t(d.b_len));
    for (auto& x : a) x = TA(av(rng));
    for (auto& x : b) x = std::int8_t(bv(rng));
    const std::int32_t za = av(rng);
    constexpr std::int32_t poison = 0x7f7f7f7f;
    std::vector<std::int32_t> c1(std::size_t(d.c_len), poison), c2(c1);
    using KI = kfuse::batched_gemm<kfuse::i8, test_arch>;
    KI::run(a.data(), b.data(), c1.data(), p, {}, {.threads = 1}, za);
    KI::run(a.data(), b.data(), c2.data(), p, {}, {.threads = 2}, za);
    REQUIRE(c1 == c2);
    using KF =
        kfuse::batched_gemm<kfuse::i8, test_arch, kfuse::epilogue<kfuse::scale, kfuse::bias>>;
    const float sc = 1.f / 4096;
    std::vector<float> cf(std::size_t(d.c_len), std::numeric_limits<float>::quiet_NaN());
    KF::run(a.data(), b.data(), cf.data(), p, {{sc}, {d.bias}}, {.threads = 2}, za);
    std::vector<bool> written(std::size_t(d.c_len), false);
    for (index_t bi = 0; bi < p.batches(); ++bi) {
      const TA* ab = a.data() + offset_of(p, p.a_batch, bi);
      const std::int8_t* bb = b.data() + offset_of(p, p.b_batch, bi);
      const index_t c0 = offset_of(p, p.c_batch, bi);
      for (index_t m = 0; m < p.m; ++m)
        for (index_t n = 0; n < p.n; ++n) {
          std::int64_t s = 0;
          for (index_t k = 0; k < p.k; ++k)
            s += (std::int64_t(ab[m * p.a_row + k * p.a_col]) - za) *
                 std::int64_t(bb[k * p.b_row + n * p.b_col]);
          const std::size_t at = std::size_t(c0 + m * p.c_row + n);
          written[at] = true;
          if (c1[at] != s) {
            INFO(what << " batch " << bi << " m " << m << " n " << n << " got " << c1[at]
                      << " want " << s);
            REQUIRE(c1[at] == s);
          }
          // The sum rounded to float (exact below 2^24), times the scale, plus the bias.
          const double want = double(s) * sc + d.bias[std::size_t(n)];
          const double tol = 1.2e-7 * (std::fabs(double(s)) * sc * 2 + 1);
          if (!(std::fabs(cf[at] - want) <= tol)) {
            INFO(what << " float: batch " << bi << " m " << m << " n " << n << " got " << cf[at]
                      << " want " << want);
            REQUIRE(std::fabs(cf[at] - want) <= tol);
          }
        }
    }
    // C's padding columns are untouched.
    for (std::size_t i = 0; i < c1.size(); ++i)
      if (!written[i]) REQUIRE((c1[i] == poison && std::isnan(cf[i])));
  } else {
    (void)d, (void)rng, (void)what;
  }
}

}  // namespace

TEST_CASE("batched_gemm: random batches, broadcasts, transposes and padded rows", "[gemm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(2026);
  const index_t sizes[] = {1, 2, 5, 7, 8, 9, 16, 17, 33, 64, 65};
  std::uniform_int_distribution<int> pick(0, int(std::size(sizes)) - 1);
  for (int t = 0; t < 60; ++t) {
    const index_t M = sizes[pick(rng)], K = sizes[pick(rng)], N = sizes[pick(rng)];
    const bool ta = t % 3 == 1, tb = t % 2 == 1;
    const case_data d = make_case(rng, M, K, N, ta, tb, t % 4 == 3 ? 3 : 0);
    check_case<kfuse::f32>(d, "f32");
    check_case<kfuse::bf16>(d, "bf16");
    if (t % 2 == 0)
      check_int8_case<std::uint8_t>(d, rng, "i8 u8 A");
    else
      check_int8_case<std::int8_t>(d, rng, "i8 s8 A");
  }
}

TEST_CASE("batched_gemm: attention shapes (K transposed as strides, long K)", "[gemm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(7);
  // Q [2, 3, 40, 32] . K^T and P [2, 3, 40, 600] . V [2, 3, 600, 32]: K beyond one 512 chunk.
  for (const auto& [M, K, N, tb] : {std::tuple{index_t(40), index_t(32), index_t(40), true},
                                    std::tuple{index_t(40), index_t(600), index_t(32), false},
                                    std::tuple{index_t(8), index_t(600), index_t(70), false}}) {
    case_data d = make_case(rng, M, K, N, false, tb, 0);
    check_case<kfuse::f32>(d, "attention f32");
    check_case<kfuse::bf16>(d, "attention bf16");
    check_int8_case<std::uint8_t>(d, rng, "attention i8");
  }
}

TEST_CASE("batched_gemm: bad problems, buffers and workspaces are errors", "[gemm]") {
  if (!cpu_can_run()) return;
  using K = kfuse::batched_gemm<kfuse::f32, test_arch>;
  auto p = batched_gemm_problem::dense({2}, 3, 4, 5);
  std::vector<float> a(2 * 3 * 4, 1.f), b(2 * 4 * 5, 1.f), c(2 * 3 * 5);
  K::run(a.data(), b.data(), c.data(), p);
  CHECK(c[0] == 4.f);

  batched_gemm_problem bad = p;
  bad.m = -1;
  CHECK_FALSE(K::can_implement(bad).ok());
  CHECK_THROWS_WITH(K::initialize(bad), Catch::Contains("negative size"));
  bad = p;
  bad.batch_rank = 5;
  CHECK_THROWS_WITH(K::initialize(bad), Catch::Contains("batch rank 5"));
  bad = p;
  bad.c_row = 4;
  CHECK_THROWS_WITH(K::initialize(bad), Catch::Contains("row stride at least N"));
  bad = p;
  bad.b_batch[0] = -20;
  CHECK_THROWS_WITH(K::initialize(bad), Catch::Contains("negative batch stride"));
  // C overlapping A, null buffers, K = 0 with outputs, a workspace too small or misaligned.
  CHECK_THROWS_WITH(K::run(a.data(), b.data(), a.data(), p), Catch::Contains("overlap"));
  CHECK_THROWS(K::run(static_cast<const float*>(nullptr), b.data(), c.data(), p));
  auto p0 = batched_gemm_problem::dense({2}, 3, 0, 5);
  CHECK_THROWS_WITH(K::run(a.data(), b.data(), c.data(), p0), Catch::Contains("K is 0"));
  const auto packed = K::initialize(p);
  kfuse::workspace_buffer small(64);
  CHECK_THROWS_WITH(K::run(a.data(), b.data(), packed, c.data(), {}, small, {.threads = 1}),
                    Catch::Contains("smaller than"));
  kfuse::workspace_buffer ws(K::workspace_size(p, 1) + 64);
  const kfuse::workspace shifted{ws.view().data + 8, K::workspace_size(p, 1)};
  CHECK_THROWS_WITH(K::run(a.data(), b.data(), packed, c.data(), {}, shifted, {.threads = 1}),
                    Catch::Contains("aligned"));
  // An empty batch is nothing to do.
  auto pe = batched_gemm_problem::dense({0}, 3, 4, 5);
  CHECK_NOTHROW(K::run(a.data(), b.data(), c.data(), pe));
  // A zero point is the i8 recipe's, and within A's element range.
  CHECK_THROWS_WITH(K::run(a.data(), b.data(), c.data(), p, {}, {}, 3),
                    Catch::Contains("only meaningful for the i8 recipe"));
  if constexpr (has_int8) {
    using KI = kfuse::batched_gemm<kfuse::i8, test_arch>;
    std::vector<std::uint8_t> au(a.size(), 1);
    std::vector<std::int8_t> as(a.size(), 1), bs(b.size(), 1);
    std::vector<std::int32_t> ci(c.size());
    CHECK_THROWS_WITH(KI::run(au.data(), bs.data(), ci.data(), p, {}, {}, 256),
                      Catch::Contains("zero point 256 is outside"));
    CHECK_THROWS_WITH(KI::run(as.data(), bs.data(), ci.data(), p, {}, {}, -129),
                      Catch::Contains("zero point -129 is outside"));
    KI::run(as.data(), bs.data(), ci.data(), p, {}, {}, -1);
    CHECK(ci[0] == 8);  // sum over K = 4 of (1 - (-1)) * 1
  }
}
