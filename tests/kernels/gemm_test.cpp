// gemm, f32 and bf16 recipes: random shapes from the test's size set, both B layouts, fused
// epilogues (bias, activations, residual add, quantize to i8, a user stage), every backend of the
// arch under test, against a double-precision reference computed from the exact stored inputs.
#include "kfuse/kernels/gemm/gemm.hpp"

#include "support/test_support.hpp"

using namespace kt;

namespace {

const index_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 257, 1000};

struct shape3 {
  index_t m, n, k;
};

template <class T>
struct problem {
  index_t M, N, K;
  kfuse::b_layout layout;
  std::vector<T> a, b;
  std::vector<float> bias, residual;
  std::vector<double> ab;  // exact A.B
  problem(index_t m, index_t n, index_t k, kfuse::b_layout l, std::mt19937& rng)
      : M(m),
        N(n),
        K(k),
        layout(l),
        a(std::size_t(m * k)),
        b(std::size_t(k * n)),
        bias(std::size_t(n)),
        residual(std::size_t(m * n)),
        ab(std::size_t(m * n)) {
    fill_random(a.data(), m * k, rng, -1.f, 1.f);
    fill_random(b.data(), k * n, rng, -1.f, 1.f);
    fill_random(bias.data(), n, rng, -1.f, 1.f);
    fill_random(residual.data(), m * n, rng, -1.f, 1.f);
    recompute();
  }
  void recompute() {
    const index_t m = M, n = N, k = K;
    const kfuse::b_layout l = layout;
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) {
        double s = 0;
        for (index_t q = 0; q < k; ++q)
          s += double(kfuse::to_float(a[std::size_t(i * k + q)])) *
               kfuse::to_float(b[std::size_t(l == kfuse::b_layout::kn ? q * n + j : j * k + q)]);
        ab[std::size_t(i * n + j)] = s;
      }
  }
  // f32 accumulation error bound of a K-term dot product of values in [-1, 1].
  double dot_tol() const { return 2e-6 * double(K) + 1e-6; }
};

template <class T>
using recipe_of = kfuse::elem_of<T>;

// The micro-kernel each recipe must run on the arch under test.
template <class T, class G>
void check_micro_kernel(const kfuse::run_info& info, bool amx) {
  const std::string_view mk = info.micro_kernel;
  if (amx)
    CHECK(mk == "bf16 amx 32x32");
  else if constexpr (std::is_same_v<T, kfuse::bf16_t> && test_arch::native_bf16_dot)
    CHECK(mk.substr(0, 14) == "bf16 vdpbf16ps");
  else if constexpr (std::is_same_v<T, kfuse::bf16_t>)
    CHECK(mk.substr(0, 13) == "bf16->f32 fma");
  else
    CHECK(mk.substr(0, 7) == "f32 fma");
}

template <class B, class Out, class T, class Ep>
void check_gemm(const problem<T>& p, const Ep& ep, std::string_view what) {
  using G = kfuse::gemm<recipe_of<T>, test_arch, Ep, B>;
  const auto w = G::pack(p.b.data(), p.K, p.N, p.layout);
  CHECK(w.pack_seconds() >= 0);
  const index_t ldc = p.N + 3;  // a padded leading dimension: the padding must stay untouched
  guarded<Out> c(p.M * ldc, 0xA5);
  const auto info = G::run(p.a.data(), p.M, p.K, w, c.data, ldc, ep);
  CHECK(info.kernel == "gemm");
  CHECK(info.arch == test_arch::name);
  check_micro_kernel<T, G>(info, G::uses_amx(p.M, w));
  REQUIRE(c.guards_intact());
  int failures = 0;
  for (index_t i = 0; i < p.M && failures < 5; ++i) {
    for (index_t j = 0; j < ldc; ++j) {
      const Out got = c.data[i * ldc + j];
      if (j >= p.N) {  // padding between rows: never written
        unsigned char bytes[sizeof(Out)];
        std::memcpy(bytes, &got, sizeof(Out));
        for (unsigned char byte : bytes)
          if (byte != 0xA5 && failures++ < 5)
            UNSCOPED_INFO(what << ": padding written at " << i << "," << j);
        continue;
      }
      const double exact =
          ref_epilogue(ep, p.ab[std::size_t(i * p.N + j)], ref_ctx{i * p.N + j, j});
      // The dot product's rounding error passes through the epilogue (|slope| <= ~1.2 for the
      // stages used here, plus one quantization step for integer outputs).
      const double tol = tolerance<Out>(exact) + 1.5 * p.dot_tol();
      const double g = double(kfuse::to_float(got));
      if (!(std::fabs(g - representable<Out>(exact)) <= tol) && failures++ < 5)
        UNSCOPED_INFO(what << " M=" << p.M << " N=" << p.N << " K=" << p.K << " at " << i << ","
                           << j << " got " << g << " want " << exact);
    }
  }
  CHECK(failures == 0);
}

template <class B, class T>
void random_shapes(int count, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, int(std::size(sizes)) - 1);
  std::vector<float> scales(1000, 0.02f);
  for (int t = 0; t < count; ++t) {
    index_t M = sizes[pick(rng)], N = sizes[pick(rng)], K = sizes[pick(rng)];
    if (M * N * K > 4'000'000) M = std::min<index_t>(M, 17);  // keep the double reference quick
    const auto layout = t % 2 ? kfuse::b_layout::nk : kfuse::b_layout::kn;
    const problem<T> p(M, N, K, layout, rng);
    const std::span<const float> bias(p.bias), res(p.residual);
    check_gemm<B, float>(p, kfuse::epilogue<>{}, "bare");
    check_gemm<B, float>(p, kfuse::epilogue<kfuse::bias, kfuse::gelu_tanh>{{bias}, {}},
                         "bias+gelu_tanh");
    check_gemm<B, float>(p, kfuse::epilogue<kfuse::add<>, kfuse::relu>{{{res}}, {}},
                         "residual+relu");
    check_gemm<B, float>(p, kfuse::epilogue<kfuse::scale, user_square, kfuse::silu>{{0.5f}, {}, {}},
                         "user stage");
    // An out-of-line epilogue runs on the saved tile: apply_tile once per tile, the inline
    // stages vector by vector.
    std::atomic<long> tile_calls{0};
    check_gemm<B, float>(
        p, kfuse::epilogue<user_tile_bias, kfuse::relu>{{p.bias.data(), &tile_calls}, {}},
        "out-of-line user stage + relu");
    CHECK(tile_calls.load() >= (M > 0 && N > 0 ? 1 : 0));
    check_gemm<B, std::int8_t>(p,
                               kfuse::epilogue<kfuse::bias, kfuse::quantize<kfuse::i8>>{
                                   {bias}, {{0.f, 0, {scales.data(), std::size_t(N)}}}},
                               "bias+quantize<i8> per channel");
    check_gemm<B, kfuse::bf16_t>(
        p, kfuse::epilogue<kfuse::gelu_erf, kfuse::cast<kfuse::bf16>>{{}, {}}, "gelu_erf->bf16");
  }
}

}  // namespace

TEMPLATE_TEST_CASE("gemm: random shapes, both B layouts, fused epilogues", "[gemm]", float,
                   kfuse::bf16_t) {
  if (!cpu_can_run()) return;
  std::mt19937 rng(2024);
  for_each_backend([&](auto b) { random_shapes<decltype(b), TestType>(12, rng); });
}

// Where the CPU has AMX, the bf16 and i8 recipes run on tiles from M = 16 on: the vector
// kernels and the tile path both against the reference, and the tile path's thread splits
// (chunks of row blocks, panels) bitwise equal for 1 and 2 threads.
TEST_CASE("gemm bf16: the vector kernels with AMX off", "[gemm][amx]") {
  if (!cpu_can_run()) return;
  const amx_off off;
  std::mt19937 rng(2025);
  for_each_backend([&](auto b) { random_shapes<decltype(b), kfuse::bf16_t>(6, rng); });
}

// i8, exact: s8 activations on tdpbssd (AMX) and flipped to u8 on vpdpbusd give the same sums.
// A template, so that gemm<i8> is never instantiated on an arch without an int8 kernel.
template <class A>
void int8_amx_cross(std::mt19937& rng) {
  using Q = kfuse::gemm<kfuse::i8, A>;
  if constexpr (kfuse::detail::int8_kernel_available<
                    A, kfuse::simd::vec_for<A, kfuse::backend::xsimd>>()) {
    std::vector<std::int8_t> a(40 * 100), b(100 * 50);
    fill_random(a.data(), index_t(a.size()), rng);
    fill_random(b.data(), index_t(b.size()), rng);
    if constexpr (Q::int8_weight_limit < 128)
      for (std::int8_t& v : b) v = std::int8_t(v / 3);
    const auto w = Q::pack(b.data(), 100, 50, kfuse::b_layout::nk);
    std::vector<std::int32_t> on(40 * 50), off_c(on.size());
    Q::run(a.data(), 40, 100, w, on.data(), 50, {}, {}, -7);
    {
      const amx_off off;
      Q::run(a.data(), 40, 100, w, off_c.data(), 50, {}, {}, -7);
    }
    CHECK(on == off_c);
  }
}

// Weights packed with AMX off (K padded to the k group only) run on the vector kernels even with
// AMX on; weights packed for the tiles (K padded to the tile depth) run on either path.
TEST_CASE("gemm bf16 / i8: weights packed with AMX on or off run either way", "[gemm][amx]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(6);
  const problem<kfuse::bf16_t> p(40, 70, 45, kfuse::b_layout::nk, rng);
  using G = kfuse::gemm<kfuse::bf16, test_arch>;
  for (const bool pack_on : {true, false}) {
    const auto w = [&] {
      const amx_off off(!pack_on);
      return G::pack(p.b.data(), p.K, p.N, p.layout);
    }();
    for (const bool run_on : {true, false}) {
      const amx_off off(!run_on);
      CHECK(G::uses_amx(p.M, w) == (G::has_amx && kfuse::amx_enabled() && pack_on));
      std::vector<float> c(std::size_t(p.M * p.N), std::nanf(""));
      G::run(p.a.data(), p.M, p.K, w, c.data(), p.N);
      int bad = 0;
      for (std::size_t i = 0; i < c.size(); ++i)
        bad += !(std::fabs(c[i] - p.ab[i]) <= 1.5 * p.dot_tol());
      CHECK(bad == 0);
    }
  }
  int8_amx_cross<test_arch>(rng);
}

TEST_CASE("gemm bf16 / i8: the AMX tile path splits over threads bit for bit", "[gemm][amx]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(5);
  for (const shape3 s : {shape3{33, 257, 100}, shape3{300, 64, 1000}, shape3{16, 1000, 33}}) {
    const problem<kfuse::bf16_t> p(s.m, s.n, s.k, kfuse::b_layout::nk, rng);
    using G = kfuse::gemm<kfuse::bf16, test_arch>;
    const auto w = G::pack(p.b.data(), p.K, p.N, p.layout);
    std::vector<float> c1(std::size_t(p.M * p.N)), c2(c1.size());
    G::run(p.a.data(), p.M, p.K, w, c1.data(), p.N, {}, {1});
    G::run(p.a.data(), p.M, p.K, w, c2.data(), p.N, {}, {2});
    CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
  }
}

TEMPLATE_TEST_CASE("gemm: every small M streams one row tile and matches", "[gemm]", float,
                   kfuse::bf16_t) {
  if (!cpu_can_run()) return;
  std::mt19937 rng(9);
  for_each_backend([&](auto b) {
    for (index_t M = 1; M <= 9; ++M) {
      // K > 512 takes the K-chunked path; an odd K the bf16 pair tail.
      const problem<TestType> p(M, 200, 1101, kfuse::b_layout::nk, rng);
      const std::span<const float> bias(p.bias);
      check_gemm<decltype(b), float>(p, kfuse::epilogue<kfuse::bias, kfuse::relu>{{bias}, {}},
                                     "small M");
    }
  });
}

TEST_CASE("gemm f32: 1 and 2 threads are bitwise identical", "[gemm][threads]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(4);
  const problem<float> p(100, 257, 300, kfuse::b_layout::kn, rng);
  using G = kfuse::gemm<kfuse::f32, test_arch>;
  const auto w = G::pack(p.b.data(), p.K, p.N, p.layout);
  std::vector<float> c1(static_cast<std::size_t>(p.M * p.N)), c2(c1.size());
  G::run(p.a.data(), p.M, p.K, w, c1.data(), p.N, {}, {1});
  G::run(p.a.data(), p.M, p.K, w, c2.data(), p.N, {}, {2});
  CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
}

TEST_CASE("gemm f32: bad inputs throw kfuse::error naming the problem", "[gemm][errors]") {
  using Catch::Matchers::Contains;
  using G = kfuse::gemm<kfuse::f32, test_arch, kfuse::epilogue<kfuse::bias>>;
  std::vector<float> a(64 * 64, 1.f), b(64 * 32, 1.f), c(64 * 32), bias(31);
  const auto w = G::pack(b.data(), 64, 32, kfuse::b_layout::kn);
  const kfuse::epilogue<kfuse::bias> ep{{{bias.data(), 32}}};
  CHECK_THROWS_WITH(G::run(a.data(), 4, 63, w, c.data(), 32, ep),
                    Contains("lda (63) is less than K of the packed weights (64)"));
  CHECK_THROWS_WITH(G::run(static_cast<const float*>(nullptr), 4, 64, w, c.data(), 32, ep),
                    Contains("A is null"));
  CHECK_THROWS_WITH(G::run(a.data(), 4, 64, w, static_cast<float*>(nullptr), 32, ep),
                    Contains("C is null"));
  CHECK_THROWS_WITH(G::run(a.data(), 4, 64, w, c.data(), 31, ep),
                    Contains("ldc (31) is less than N (32)"));
  CHECK_THROWS_WITH(
      G::run(a.data(), 4, 64, w, c.data(), 32, kfuse::epilogue<kfuse::bias>{{{bias.data(), 31}}}),
      Contains("stage 'bias': 31 bias values for 32 channels"));
  CHECK_THROWS_WITH(G::run(a.data(), 4, 64, G::weights{}, c.data(), 32, ep),
                    Contains("packed weights are empty"));
  CHECK_THROWS_WITH(G::pack(b.data(), 0, 32, kfuse::b_layout::kn),
                    Contains("K and N must be positive"));
  CHECK_THROWS_WITH(G::pack(static_cast<const float*>(nullptr), 64, 32, kfuse::b_layout::kn),
                    Contains("B is null"));
}

// ------------------------------------------------------------------------------ f16 weights
TEST_CASE("gemm f16w: f32 activations x f16 weights", "[gemm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(31);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const shape3 s : {shape3{1, 33, 100}, shape3{7, 257, 1000}, shape3{64, 100, 64}}) {
      problem<float> p(s.m, s.n, s.k, kfuse::b_layout::nk, rng);
      // The weights are stored as f16: the reference uses the rounded values.
      for (float& x : p.b) x = kfuse::to_float(kfuse::to_f16(x));
      p.recompute();
      using G = kfuse::gemm<kfuse::f16w, test_arch, kfuse::epilogue<kfuse::relu>, B>;
      const auto w = G::pack(p.b.data(), p.K, p.N, p.layout);
      std::vector<float> c(static_cast<std::size_t>(p.M * p.N), std::nanf(""));
      const auto info = G::run(p.a.data(), p.M, p.K, w, c.data(), p.N, {{}});
      CHECK(std::string_view(info.micro_kernel).substr(0, 13) == "f16w->f32 fma");
      int failures = 0;
      for (std::size_t i = 0; i < c.size(); ++i)
        if (!(std::fabs(c[i] - std::max(0.0, p.ab[i])) <= 1.5 * p.dot_tol() + 1e-6)) ++failures;
      CHECK(failures == 0);
    }
  });
}

// ------------------------------------------------------------------------------------- int8
// Exact against an integer reference (int32 output), within one step when requantized.
template <class A, class TA>
void check_int8(index_t M, index_t N, index_t K, std::int32_t za, std::mt19937& rng,
                int threads = 0) {
  using G = kfuse::gemm<kfuse::i8, A>;
  std::vector<TA> a(static_cast<std::size_t>(M * K));
  std::vector<std::int8_t> b(static_cast<std::size_t>(K * N));
  fill_random(a.data(), M * K, rng);
  fill_random(b.data(), K * N, rng);
  // vpmaddubsw archs take 7-bit weights (|w| <= 63): the extremes of that range, often.
  if constexpr (G::int8_weight_limit < 128)
    for (std::int8_t& v : b) v = std::int8_t(v % 3 == 0 ? (v < 0 ? -63 : 63) : v % 64);
  std::vector<std::int64_t> ref(static_cast<std::size_t>(M * N));
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) {
      std::int64_t s = 0;
      for (index_t k = 0; k < K; ++k)
        s += std::int64_t(a[std::size_t(i * K + k)] - za) * b[std::size_t(j * K + k)];
      ref[std::size_t(i * N + j)] = s;
    }
  const auto w = G::pack(b.data(), K, N, kfuse::b_layout::nk);
  guarded<std::int32_t> c(M * N, 0xA5);
  const auto info = G::run(a.data(), M, K, w, c.data, N, {}, {threads}, za);
  if (G::uses_amx(M, w))
    CHECK(std::string_view(info.micro_kernel) == "i8 amx 32x32");
  else if constexpr (A::native_int8_dot && A::is_x86)
    CHECK(std::string_view(info.micro_kernel).substr(0, 11) == "i8 vpdpbusd");
  else if constexpr (G::int8_weight_limit < 128)
    CHECK(std::string_view(info.micro_kernel).substr(0, 13) == "i8 vpmaddubsw");
  else
    CHECK(std::string_view(info.micro_kernel).substr(0, 9) == "i8 scalar");
  REQUIRE(c.guards_intact());
  int bad = 0;
  for (index_t i = 0; i < M * N; ++i) bad += c.data[i] != ref[std::size_t(i)];
  CHECK(bad == 0);

  // Per-output-channel weight scales and requantization to u8, fused: within one step.
  std::vector<float> mult(static_cast<std::size_t>(N));
  for (index_t j = 0; j < N; ++j) mult[std::size_t(j)] = 1.f / float(40 * K + 17 * j);
  using R = kfuse::gemm<kfuse::i8, A, kfuse::epilogue<kfuse::requantize<kfuse::u8>>>;
  const auto w2 = R::pack(b.data(), K, N, kfuse::b_layout::nk);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(M * N));
  R::run(a.data(), M, K, w2, q.data(), N, {{1.f, 128, {mult.data(), std::size_t(N)}}}, {threads},
         za);
  bad = 0;
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) {
      const double want = std::clamp(
          std::nearbyint(double(ref[std::size_t(i * N + j)]) * mult[std::size_t(j)]) + 128, 0.0,
          255.0);
      bad += std::fabs(q[std::size_t(i * N + j)] - want) > 1;
    }
  CHECK(bad == 0);
}

// A template, so that the discarded branch (gemm<i8> on an arch without an int8 micro-kernel,
// a compile error) is never instantiated.
template <class A>
void int8_cases() {
  // native_int8_dot on NEON (sdot) has no gemm<i8> micro-kernel yet: a compile error there too.
  using V = kfuse::simd::vec_for<A, kfuse::backend::xsimd>;
  if constexpr (kfuse::detail::int8_kernel_available<A, V>()) {
    std::mt19937 rng(77);
    // M from 16 on runs on AMX tiles where the CPU has them: K tails of the 64-byte tile
    // depth, row tiles of 1..16 rows, 1 and 2 threads; then the vector kernels with AMX off.
    for (const bool amx : {true, false}) {
      const amx_off off(!amx);
      for (const shape3 s :
           {shape3{1, 1, 1}, shape3{3, 17, 7}, shape3{8, 100, 1001}, shape3{33, 257, 64},
            shape3{100, 64, 257}, shape3{16, 31, 63}, shape3{47, 130, 200}, shape3{20, 70, 40}}) {
        check_int8<A, std::uint8_t>(s.m, s.n, s.k, 3, rng, 1);
        check_int8<A, std::int8_t>(s.m, s.n, s.k, -5, rng, 2);
      }
    }
    using G = kfuse::gemm<kfuse::i8, A>;
    if constexpr (G::int8_weight_limit < 128) {
      // The worst case of vpmaddubsw's 16-bit pair sums: u8 255 against +-63 everywhere.
      const index_t M = 7, N = 19, K = 67;
      const std::vector<std::uint8_t> a(std::size_t(M * K), 255);
      std::vector<std::int8_t> b(std::size_t(K * N));
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = (i / 3) % 2 ? 63 : -63;
      const auto w = G::pack(b.data(), K, N, kfuse::b_layout::nk);
      std::vector<std::int32_t> c(std::size_t(M * N));
      G::run(a.data(), M, K, w, c.data(), N);
      int bad = 0;
      for (index_t j = 0; j < N; ++j) {
        std::int32_t want = 0;
        for (index_t k = 0; k < K; ++k) want += 255 * b[std::size_t(j * K + k)];
        for (index_t i = 0; i < M; ++i) bad += c[std::size_t(i * N + j)] != want;
      }
      CHECK(bad == 0);
      // A wider weight would saturate: pack refuses it, naming the element and the range.
      b[40] = 64;
      REQUIRE_THROWS_WITH(G::pack(b.data(), K, N, kfuse::b_layout::nk),
                          Catch::Contains("weight 64 (element 40) is outside [-63, 63]"));
    }
  } else {
    SUCCEED("gemm<i8> is a compile error on this arch (no int8 dot product)");
  }
}

TEST_CASE("gemm i8: u8 and s8 activations x s8 weights, exact int32 and requantized", "[gemm]") {
  if (!cpu_can_run()) return;
  int8_cases<test_arch>();
}
