// batch_norm (inference) against a double-precision reference of the unfolded formula, both
// layouts, with and without gamma / beta, fused epilogues, f32 and bf16 storage, and every error.
//
// Tolerances: the kernel computes x * scale + shift in f32 (batch norm folded at the call), so
// on top of kt::tolerance<Out>(ref) (f32 1e-5 relative + 1e-6; bf16 one ulp more) it may lose
// f32 rounding of the two folded terms: 4e-7 (|x * scale| + |shift|).
#include "kfuse/kernels/batch_norm.hpp"

#include "support/test_support.hpp"

using namespace kt;
using kfuse::bf16_t;
using kfuse::epilogue;

namespace {

std::string shape_name(const kfuse::dims4& d) {
  return "[" + std::to_string(d.n) + ", " + std::to_string(d.c) + ", " + std::to_string(d.h) +
         ", " + std::to_string(d.w) + "]";
}

using kt::impl_prefix;

struct bn_data {
  std::vector<float> mean, var, gamma, beta;
  explicit bn_data(index_t c, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-2.f, 2.f), pos(0.05f, 3.f);
    for (index_t i = 0; i < c; ++i) {
      mean.push_back(u(rng));
      var.push_back(i == 0 ? 0.f : pos(rng));  // a zero variance: eps alone
      gamma.push_back(u(rng));
      beta.push_back(u(rng));
    }
  }
};

template <class B, class L, class In, class Out, class... S>
void check_bn(const kfuse::dims4& d, bool affine, const epilogue<S...>& ep, std::mt19937& rng) {
  const index_t n = kfuse::numel(d);
  const bn_data bn(d.c, rng);
  std::vector<In> x(static_cast<std::size_t>(n));
  fill_random(x.data(), n, rng);
  kfuse::batch_norm_params p{bn.mean, bn.var, {}, {}, 1e-3f};
  if (affine) {
    p.gamma = bn.gamma;
    p.beta = bn.beta;
  }
  std::vector<Out> first(x.size());
  for (unsigned char poison : {0xff, 0xa5}) {
    guarded<Out> out(n, poison);
    const auto info = kfuse::batch_norm<test_arch, B>(kfuse::view<L>(x.data(), d),
                                                      kfuse::view<L>(out.data, d), p, ep);
    CHECK(info.kernel == "batch_norm");
    CHECK(info.arch == test_arch::name);
    if (n > 0) {
      CHECK(std::string_view(info.impl).substr(0, impl_prefix<B>().size()) == impl_prefix<B>());
    }
    REQUIRE(out.guards_intact());
    if (poison == 0xff) {
      std::copy(out.data, out.data + n, first.begin());
      continue;
    }
    if (n > 0) REQUIRE(std::memcmp(first.data(), out.data, sizeof(Out) * std::size_t(n)) == 0);
  }
  int bad = 0;
  for (index_t a = 0; a < d.n; ++a)
    for (index_t c = 0; c < d.c; ++c)
      for (index_t h = 0; h < d.h; ++h)
        for (index_t w = 0; w < d.w; ++w) {
          const index_t i = kfuse::offset_of<L>(d, a, c, h, w);
          const double xv = double(kfuse::to_float(x[std::size_t(i)]));
          const double g = affine ? bn.gamma[std::size_t(c)] : 1.0;
          const double b = affine ? bn.beta[std::size_t(c)] : 0.0;
          const double s = g / std::sqrt(double(bn.var[std::size_t(c)]) + 1e-3);
          const double v = (xv - bn.mean[std::size_t(c)]) * s + b;
          const double r = ref_epilogue(ep, v, ref_ctx{i, c});
          const double tol =
              tolerance<Out>(r) +
              4e-7 * (std::fabs(xv * s) + std::fabs(b - bn.mean[std::size_t(c)] * s));
          const double got = double(kfuse::to_float(first[std::size_t(i)]));
          if (!(std::fabs(got - r) <= tol) && bad++ < 5)
            FAIL_CHECK(shape_name(d) << " " << L::name << " affine " << affine << " element " << i
                                     << ": got " << got << ", expected " << r);
        }
  CHECK(bad == 0);
}

}  // namespace

const kfuse::dims4 shapes[] = {{1, 1, 1, 1},  {2, 13, 7, 7}, {1, 3, 1, 33},
                               {3, 17, 5, 1}, {1, 64, 4, 4}, {0, 5, 3, 3}};

TEST_CASE("batch_norm: both layouts, affine or not, f32", "[batch_norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(31);
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    for (const auto& d : shapes)
      for (bool affine : {false, true}) {
        check_bn<B, kfuse::nchw, float, float>(d, affine, epilogue<>{}, rng);
        check_bn<B, kfuse::nhwc, float, float>(d, affine, epilogue<>{}, rng);
      }
  });
}

TEST_CASE("batch_norm: fused epilogues and bf16 storage", "[batch_norm]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(32);
  std::vector<float> bias(64);
  for (int i = 0; i < 64; ++i) bias[std::size_t(i)] = 0.1f * float(i % 7) - 0.3f;
  for_each_backend([&](auto bk) {
    using B = decltype(bk);
    for (const auto& d : shapes) {
      const epilogue<kfuse::relu> relu{{}};
      check_bn<B, kfuse::nchw, float, float>(d, true, relu, rng);
      check_bn<B, kfuse::nhwc, float, float>(d, true, relu, rng);
      check_bn<B, kfuse::nchw, bf16_t, bf16_t>(d, true, relu, rng);
      check_bn<B, kfuse::nhwc, bf16_t, float>(d, true, epilogue<>{}, rng);
      check_bn<B, kfuse::nhwc, float, bf16_t>(d, false, epilogue<>{}, rng);
      const epilogue<kfuse::bias, kfuse::clamp> more{{{bias.data(), std::size_t(d.c)}}, {0.f, 6.f}};
      check_bn<B, kfuse::nchw, float, float>(d, true, more, rng);
      check_bn<B, kfuse::nhwc, float, float>(d, true, more, rng);
    }
  });
}

TEST_CASE("batch_norm: bad inputs throw naming the problem", "[batch_norm]") {
  const kfuse::dims4 d{1, 4, 2, 3};
  std::vector<float> x(24), y(24), four(4, 1.f), three(3, 1.f), neg{1.f, -1.f, 1.f, 1.f};
  auto throws = [](auto&& f, const std::string& what) {
    try {
      f();
      FAIL("no error for: " << what);
    } catch (const kfuse::error& e) {
      const std::string msg = e.what();
      CHECK(msg.rfind("batch_norm: ", 0) == 0);
      CHECK(msg.find(what) != std::string::npos);
    }
  };
  auto run = [&](const kfuse::batch_norm_params& p) {
    kfuse::batch_norm<test_arch>(kfuse::view<kfuse::nchw>(x.data(), d),
                                 kfuse::view<kfuse::nchw>(y.data(), d), p);
  };
  throws([&] { run({three, four}); }, "mean has 3 values for 4 channels");
  throws([&] { run({four, three}); }, "var has 3 values for 4 channels");
  throws([&] { run({four, four, three}); }, "gamma has 3 values");
  throws([&] { run({four, four, four, three}); }, "beta has 3 values");
  throws([&] { run({four, four, {}, {}, 0.f}); }, "eps must be positive");
  throws([&] { run({four, neg}); }, "variance of channel 1 is negative");
  throws(
      [&] {
        kfuse::batch_norm<test_arch>(kfuse::view<kfuse::nchw>(x.data(), d),
                                     kfuse::view<kfuse::nchw>(y.data(), kfuse::dims4{1, 4, 3, 2}),
                                     {four, four});
      },
      "shapes differ");
  throws(
      [&] {
        kfuse::batch_norm<test_arch>(kfuse::view<kfuse::nhwc>(static_cast<float*>(nullptr), d),
                                     kfuse::view<kfuse::nhwc>(y.data(), d), {four, four});
      },
      "input is null");
  throws(
      [&] {
        kfuse::batch_norm<test_arch>(kfuse::view<kfuse::nhwc>(x.data(), d),
                                     kfuse::view<kfuse::nhwc>(x.data() + 1, d), {four, four});
      },
      "overlap");
  throws(
      [&] {
        kfuse::batch_norm<test_arch>(kfuse::view<kfuse::nhwc>(x.data(), d),
                                     kfuse::view<kfuse::nhwc>(y.data(), d), {four, four},
                                     epilogue<kfuse::bias>{{{three.data(), 3}}});
      },
      "stage 'bias': 3 bias values for 4 channels");
}
