// layer_norm / rms_norm against a double-precision reference: row lengths around the vector
// width, every affine combination, fused epilogues with per-column parameters, large means
// (1e4 + N(0, 1), an outlier first element), f32 and bf16 storage, threads, and every error.
//
// Tolerances (per output element, against the double reference from the stored input):
//   f32   1e-5 relative + 1e-6 absolute
//   bf16  one bf16 ulp of the output on top of that
#include "kfuse/kernels/norm.hpp"

#include "support/test_support.hpp"

using namespace kt;
using kfuse::bf16_t;
using kfuse::epilogue;

namespace {

using kt::impl_prefix;

const std::vector<float> gammas = [] {
  std::vector<float> v(40000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + 0.01f * float(i % 97);
  return v;
}();
const std::vector<float> betas = [] {
  std::vector<float> v(40000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = -1.f + 0.03f * float(i % 61);
  return v;
}();

struct affine {
  bool gamma, beta;
};

template <bool Rms, class In, class... S>
std::vector<double> ref_norm(const std::vector<In>& x, index_t rows, index_t cols, affine af,
                             float eps, const epilogue<S...>& ep) {
  std::vector<double> y(x.size());
  for (index_t r = 0; r < rows; ++r) {
    auto at = [&](index_t j) { return double(kfuse::to_float(x[std::size_t(r * cols + j)])); };
    double mean = 0, var = 0;
    if (!Rms) {
      for (index_t j = 0; j < cols; ++j) mean += at(j);
      mean /= double(cols);
    }
    for (index_t j = 0; j < cols; ++j) var += (at(j) - mean) * (at(j) - mean);
    var /= double(cols);
    const double rstd = 1.0 / std::sqrt(var + double(eps));
    for (index_t j = 0; j < cols; ++j) {
      double v = (at(j) - mean) * rstd;
      if (af.gamma) v *= gammas[std::size_t(j)];
      if (af.beta && !Rms) v += betas[std::size_t(j)];
      y[std::size_t(r * cols + j)] = ref_epilogue(ep, v, ref_ctx{r * cols + j, j});
    }
  }
  return y;
}

// Runs into guarded outputs poisoned with NaN and with 0xa5 (results must match), checks
// run_info, the guards and every element.
template <bool Rms, class B, class In, class Out, class... S>
void check_norm(const std::vector<In>& x, index_t rows, index_t cols, affine af, float eps,
                const epilogue<S...>& ep) {
  const index_t n = rows * cols;
  const auto g = af.gamma ? std::span<const float>(gammas.data(), std::size_t(cols))
                          : std::span<const float>();
  const auto b =
      af.beta ? std::span<const float>(betas.data(), std::size_t(cols)) : std::span<const float>();
  std::vector<Out> first(x.size());
  for (unsigned char poison : {0xff, 0xa5}) {
    guarded<Out> out(n, poison);
    kfuse::run_info info;
    if constexpr (Rms)
      info = kfuse::rms_norm<test_arch, B>(x.data(), out.data, rows, cols, {g, eps}, ep);
    else
      info = kfuse::layer_norm<test_arch, B>(x.data(), out.data, rows, cols, {g, b, eps}, ep);
    CHECK(info.kernel == (Rms ? "rms_norm" : "layer_norm"));
    CHECK(info.arch == test_arch::name);
    CHECK(std::string_view(info.impl).substr(0, impl_prefix<B>().size()) == impl_prefix<B>());
    REQUIRE(out.guards_intact());
    if (poison == 0xff) {
      std::copy(out.data, out.data + n, first.begin());
      continue;
    }
    if (n > 0) REQUIRE(std::memcmp(first.data(), out.data, sizeof(Out) * std::size_t(n)) == 0);
  }
  const auto ref = ref_norm<Rms>(x, rows, cols, Rms ? affine{af.gamma, false} : af, eps, ep);
  int bad = 0;
  for (index_t i = 0; i < n; ++i) {
    const double r = ref[std::size_t(i)];
    const double got = double(kfuse::to_float(first[std::size_t(i)]));
    if (!(std::fabs(got - r) <= tolerance<Out>(r)) && bad++ < 5)
      FAIL_CHECK((Rms ? "rms_norm" : "layer_norm")
                 << " rows " << rows << " cols " << cols << " gamma " << af.gamma << " beta "
                 << af.beta << " element " << i << ": got " << got << ", expected " << r);
  }
  CHECK(bad == 0);
}

template <class T>
std::vector<T> random_values(index_t n, std::mt19937& rng, float lo, float hi) {
  std::vector<T> v(static_cast<std::size_t>(n));
  fill_random(v.data(), n, rng, lo, hi);
  return v;
}

const index_t lengths[] = {1, 7, 15, 16, 17, 33, 100, 1000, 1024, 4099};

}  // namespace

TEST_CASE("layer_norm: row lengths, every affine combination, epilogues", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(21);
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    for (index_t cols : lengths) {
      const auto x = random_values<float>(3 * cols, rng, -3.f, 5.f);
      for (affine af :
           {affine{false, false}, affine{true, true}, affine{true, false}, affine{false, true}})
        check_norm<false, B, float, float>(x, 3, cols, af, 1e-5f, epilogue<>{});
      const epilogue<kfuse::bias, kfuse::gelu_tanh> ep{{{betas.data(), std::size_t(cols)}}, {}};
      check_norm<false, B, float, float>(x, 3, cols, {true, true}, 1e-3f, ep);
    }
  });
}

TEST_CASE("layer_norm: large means keep their precision", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(22);
  std::normal_distribution<float> normal(0.f, 1.f);
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    for (index_t cols : {17, 256, 1000, 4099}) {
      std::vector<float> x(std::size_t(4 * cols));
      for (index_t j = 0; j < cols; ++j) {
        x[std::size_t(j)] = 1e4f + normal(rng);
        x[std::size_t(cols + j)] = -3e4f + 0.01f * normal(rng);
        x[std::size_t(2 * cols + j)] = normal(rng);
        x[std::size_t(3 * cols + j)] = 5e3f + normal(rng);
      }
      x[std::size_t(2 * cols)] = 1e5f;  // an outlier where the shift is taken
      x[std::size_t(3 * cols + cols / 2)] = -1e5f;
      check_norm<false, B, float, float>(x, 4, cols, {true, true}, 1e-5f, epilogue<>{});
      check_norm<true, B, float, float>(x, 4, cols, {true, false}, 1e-6f, epilogue<>{});
    }
  });
}

TEST_CASE("layer_norm: long rows merge the moments of their chunks", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(26);
  std::normal_distribution<float> normal(0.f, 1.f);
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    const index_t cols = 4 * kfuse::detail::norm_chunk + 37;
    std::vector<float> x(std::size_t(2 * cols));
    for (index_t j = 0; j < cols; ++j) {
      x[std::size_t(j)] = 1e4f + normal(rng);
      x[std::size_t(cols + j)] = 3.f * normal(rng) - 1.f;
    }
    check_norm<false, B, float, float>(x, 2, cols, {false, false}, 1e-5f, epilogue<>{});
    x[std::size_t(cols + 3 * kfuse::detail::norm_chunk + 5)] = 1e5f;  // an outlier in a chunk
    check_norm<false, B, float, float>(x, 2, cols, {true, true}, 1e-5f, epilogue<>{});
    check_norm<true, B, float, float>(x, 2, cols, {false, false}, 1e-6f, epilogue<>{});
  });
}

TEST_CASE("rms_norm: row lengths, gamma, epilogues", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(23);
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    for (index_t cols : lengths) {
      const auto x = random_values<float>(3 * cols, rng, -4.f, 4.f);
      check_norm<true, B, float, float>(x, 3, cols, {false, false}, 1e-6f, epilogue<>{});
      check_norm<true, B, float, float>(x, 3, cols, {true, false}, 1e-6f, epilogue<>{});
      const epilogue<kfuse::scale, kfuse::bias, kfuse::silu> ep{
          {0.5f}, {{betas.data(), std::size_t(cols)}}, {}};
      check_norm<true, B, float, float>(x, 3, cols, {true, false}, 1e-6f, ep);
    }
  });
}

TEST_CASE("layer_norm / rms_norm: bf16 storage and mixed types", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(24);
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    for (index_t cols : {7, 16, 100, 1024}) {
      const auto xb = random_values<bf16_t>(3 * cols, rng, -3.f, 5.f);
      const auto xf = random_values<float>(3 * cols, rng, -3.f, 5.f);
      check_norm<false, B, bf16_t, bf16_t>(xb, 3, cols, {true, true}, 1e-5f, epilogue<>{});
      check_norm<false, B, bf16_t, float>(xb, 3, cols, {true, false}, 1e-5f, epilogue<>{});
      check_norm<false, B, float, bf16_t>(xf, 3, cols, {false, false}, 1e-5f,
                                          epilogue<kfuse::relu>{{}});
      check_norm<true, B, bf16_t, bf16_t>(xb, 3, cols, {true, false}, 1e-6f, epilogue<>{});
      check_norm<true, B, float, bf16_t>(xf, 3, cols, {false, false}, 1e-6f, epilogue<>{});
    }
  });
}

TEST_CASE("layer_norm: in place, spans and threads", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(25);
  const index_t rows = 64, cols = 1000;
  const auto x = random_values<float>(rows * cols, rng, -3.f, 3.f);
  std::vector<float> y1(x.size()), y2(x.size());
  const kfuse::layer_norm_params p{{gammas.data(), std::size_t(cols)},
                                   {betas.data(), std::size_t(cols)}};
  const auto one =
      kfuse::layer_norm<test_arch>(x.data(), y1.data(), rows, cols, p, epilogue<>{}, {1});
  const auto two = kfuse::layer_norm<test_arch>(std::span<const float>(x), std::span<float>(y2),
                                                cols, p, epilogue<>{}, {2});
  CHECK(one.threads == 1);
  CHECK(two.threads == std::min(2, kfuse::pool_threads(2)));
  CHECK(y1 == y2);
  auto z = x;
  kfuse::layer_norm<test_arch>(z.data(), z.data(), rows, cols, p);
  CHECK(z == y1);
  std::vector<float> r1(x.size()), r2 = x;
  kfuse::rms_norm<test_arch>(std::span<const float>(x), std::span<float>(r1), cols);
  kfuse::rms_norm<test_arch>(r2.data(), r2.data(), rows, cols);
  CHECK(r1 == r2);
}

TEST_CASE("layer_norm / rms_norm: bad inputs throw naming the problem", "[norm]") {
  std::vector<float> x(24), y(24), g(6);
  auto throws = [](auto&& f, const std::string& kernel, const std::string& what) {
    try {
      f();
      FAIL("no error for: " << what);
    } catch (const kfuse::error& e) {
      const std::string msg = e.what();
      CHECK(msg.rfind(kernel + ": ", 0) == 0);
      CHECK(msg.find(what) != std::string::npos);
    }
  };
  const std::span<const float> g6(g), g5(g.data(), 5);
  throws(
      [&] {
        kfuse::layer_norm<test_arch>(x.data(), y.data(), 4, 6, {g6, g6, 0.f});
      },
      "layer_norm", "eps must be positive");
  throws(
      [&] {
        kfuse::layer_norm<test_arch>(x.data(), y.data(), 4, 6, {{}, {}, NAN});
      },
      "layer_norm", "eps must be positive");
  throws(
      [&] {
        kfuse::rms_norm<test_arch>(x.data(), y.data(), 4, 6, {g6, -1e-6f});
      },
      "rms_norm", "eps must be positive");
  throws(
      [&] {
        kfuse::layer_norm<test_arch>(x.data(), y.data(), 4, 6, {g5, g6});
      },
      "layer_norm", "gamma has 5 values for rows of 6");
  throws(
      [&] {
        kfuse::layer_norm<test_arch>(x.data(), y.data(), 4, 6, {g6, g5});
      },
      "layer_norm", "beta has 5 values for rows of 6");
  throws([&] { kfuse::rms_norm<test_arch>(x.data(), y.data(), 4, 6, {g5}); }, "rms_norm",
         "gamma has 5 values");
  throws([&] { kfuse::layer_norm<test_arch>(x.data(), y.data(), 4, 0); }, "layer_norm",
         "must be positive");
  throws([&] { kfuse::layer_norm<test_arch>(x.data(), y.data(), -1, 6); }, "layer_norm",
         "negative row count");
  throws([&] { kfuse::layer_norm<test_arch>(static_cast<const float*>(nullptr), y.data(), 4, 6); },
         "layer_norm", "input is null");
  throws([&] { kfuse::rms_norm<test_arch>(x.data(), static_cast<float*>(nullptr), 4, 6); },
         "rms_norm", "output is null");
  throws([&] { kfuse::layer_norm<test_arch>(x.data(), x.data() + 2, 2, 6); }, "layer_norm",
         "overlap");
  throws(
      [&] { kfuse::layer_norm<test_arch>(std::span<float>(x), std::span<float>(y.data(), 18), 6); },
      "layer_norm", "input has 24 elements, the output 18");
  throws([&] { kfuse::rms_norm<test_arch>(std::span<float>(x), std::span<float>(y), 5); },
         "rms_norm", "not a multiple of the row length 5");
  throws(
      [&] {
        kfuse::layer_norm<test_arch>(x.data(), y.data(), 4, 6, {},
                                     epilogue<kfuse::bias>{{{g.data(), 5}}});
      },
      "layer_norm", "stage 'bias': 5 bias values for 6 channels");
}

TEST_CASE("layer_norm / rms_norm: large aligned f32 outputs use streaming stores", "[norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(27);
  const index_t rows = 2048, cols = 1024, n = rows * cols;  // 8 MiB of output
  const auto x = random_values<float>(n, rng, -3.f, 5.f);
  // Streaming from stream_min_bytes() on (ctest sets KFUSE_STREAM_MIN_BYTES to 8 MiB for these
  // tests, so that this size streams on every machine).
  const bool streams = !std::is_same_v<test_arch, kfuse::arch::generic> &&
                       n * index_t(sizeof(float)) >= kfuse::detail::stream_min_bytes();
  const kfuse::layer_norm_params p{{gammas.data(), std::size_t(cols)},
                                   {betas.data(), std::size_t(cols)}};
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    guarded<float> aligned(n, 0xff, 0), unaligned(n, 0xff, 1);
    const epilogue<kfuse::relu> relu{{}};
    const auto s = kfuse::layer_norm<test_arch, B>(x.data(), aligned.data, rows, cols, p, relu);
    const auto u = kfuse::layer_norm<test_arch, B>(x.data(), unaligned.data, rows, cols, p, relu);
    CHECK(u.micro_kernel == "rows (shifted sums)");
    CHECK(s.micro_kernel ==
          (streams ? "rows (shifted sums), streaming stores" : "rows (shifted sums)"));
    REQUIRE(aligned.guards_intact());
    CHECK(std::memcmp(aligned.data, unaligned.data, sizeof(float) * std::size_t(n)) == 0);
    const auto rs = kfuse::rms_norm<test_arch, B>(x.data(), aligned.data, rows, cols);
    const auto ru = kfuse::rms_norm<test_arch, B>(x.data(), unaligned.data, rows, cols);
    CHECK(ru.micro_kernel == "rms rows");
    CHECK(rs.micro_kernel == (streams ? "rms rows, streaming stores" : "rms rows"));
    CHECK(std::memcmp(aligned.data, unaligned.data, sizeof(float) * std::size_t(n)) == 0);
  });
  // One full check against the reference (the streaming path).
  std::vector<float> xs(x.begin(), x.begin() + 4 * cols);
  guarded<float> y(n, 0xff, 0);
  kfuse::layer_norm<test_arch>(x.data(), y.data, rows, cols, p);
  const auto ref = ref_norm<false>(xs, 4, cols, {true, true}, 1e-5f, epilogue<>{});
  int bad = 0;
  for (index_t i = 0; i < 4 * cols; ++i)
    bad += !(std::fabs(y.data[i] - ref[std::size_t(i)]) <= tolerance<float>(ref[std::size_t(i)]));
  CHECK(bad == 0);
}
