// reduce: every reduce_kind over every subset of axes of tensors of rank 1 to 5 (extents 1,
// vector tails, long runs), against a double reference; NaN and -inf handling, 1 and 2 threads
// bitwise equal, bf16 input, the kernel contract, errors.
//
// Tolerances: max / min exact. sum, mean, l1, l2, sum_square: f32 accumulation in lanes, so
// |error| <= count * 2^-23 * sum |terms| (the bound of a serial f32 sum), with the terms' sum from
// the reference. prod: inputs in [0.8, 1.25], relative count * 2^-23. log_sum_exp: 4e-6 * (1 +
// |result|) (exp and log at 1-4 ulp, the sum as above).
#include "support/test_support.hpp"

using namespace kt;
using kfuse::reduce_kind;

namespace {

constexpr reduce_kind all_kinds[] = {
    reduce_kind::sum, reduce_kind::mean,       reduce_kind::max,
    reduce_kind::min, reduce_kind::prod,       reduce_kind::l1,
    reduce_kind::l2,  reduce_kind::sum_square, reduce_kind::log_sum_exp};

const char* kind_name(reduce_kind k) {
  static const char* names[] = {"sum", "mean", "max",        "min",        "prod",
                                "l1",  "l2",   "sum_square", "log_sum_exp"};
  return names[int(k)];
}

struct ref_result {
  std::vector<double> value, terms;  // terms: sum of |term| per output (the error scale)
};

ref_result reference(const std::vector<float>& x, const std::vector<index_t>& shape,
                     const std::vector<bool>& axes, reduce_kind k) {
  const int r = int(shape.size());
  index_t outputs = 1, count = 1;
  for (int d = 0; d < r; ++d) (axes[std::size_t(d)] ? count : outputs) *= shape[std::size_t(d)];
  ref_result res;
  const double inf = std::numeric_limits<double>::infinity();
  const double init = k == reduce_kind::max || k == reduce_kind::log_sum_exp ? -inf
                      : k == reduce_kind::min                                ? inf
                      : k == reduce_kind::prod                               ? 1.0
                                                                             : 0.0;
  res.value.assign(std::size_t(outputs), init);
  res.terms.assign(std::size_t(outputs), 0.0);
  std::vector<bool> nan(std::size_t(outputs), false);
  auto out_of = [&](index_t i) {
    index_t o = 0, stride = 1;
    for (int d = r - 1; d >= 0; --d) {
      const index_t c = i % shape[std::size_t(d)];
      i /= shape[std::size_t(d)];
      if (!axes[std::size_t(d)]) {
        o += c * stride;
        stride *= shape[std::size_t(d)];
      }
    }
    return std::size_t(o);
  };
  for (std::size_t i = 0; i < x.size(); ++i) {  // pass 1 (the max, for log_sum_exp)
    const std::size_t o = out_of(index_t(i));
    const double v = x[i];
    double& a = res.value[o];
    if (v != v) nan[o] = true;
    switch (k) {
      case reduce_kind::max:
      case reduce_kind::log_sum_exp:
        a = std::max(a, v);
        break;
      case reduce_kind::min:
        a = std::min(a, v);
        break;
      case reduce_kind::prod:
        a *= v;
        break;
      case reduce_kind::l1:
        a += std::fabs(v);
        break;
      case reduce_kind::l2:
      case reduce_kind::sum_square:
        a += v * v;
        break;
      default:
        a += v;
    }
    res.terms[o] += k == reduce_kind::l2 || k == reduce_kind::sum_square ? v * v : std::fabs(v);
  }
  if (k == reduce_kind::log_sum_exp) {
    std::vector<double> s(std::size_t(outputs), 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t o = out_of(index_t(i));
      if (std::isfinite(res.value[o])) s[o] += std::exp(double(x[i]) - res.value[o]);
    }
    for (std::size_t o = 0; o < s.size(); ++o)
      if (std::isfinite(res.value[o])) res.value[o] += std::log(s[o]);
  }
  for (std::size_t o = 0; o < res.value.size(); ++o) {
    if (k == reduce_kind::mean) res.value[o] /= double(count);
    if (k == reduce_kind::l2) res.value[o] = std::sqrt(res.value[o]);
    if (nan[o] && k != reduce_kind::prod && k != reduce_kind::l1)
      res.value[o] = std::numeric_limits<double>::quiet_NaN();
  }
  return res;
}

template <class A, class B>
void check_shape(const std::vector<index_t>& shape, std::mt19937& rng, bool with_nan) {
  index_t n = 1;
  for (index_t e : shape) n *= e;
  const int r = int(shape.size());
  for (unsigned mask = 0; mask < (1u << r); ++mask) {
    std::vector<bool> axes(static_cast<std::size_t>(r));
    bool ax[8] = {};
    index_t outputs = 1, count = 1;
    for (int d = 0; d < r; ++d) {
      axes[std::size_t(d)] = ax[d] = (mask >> d) & 1u;
      (ax[d] ? count : outputs) *= shape[std::size_t(d)];
    }
    for (reduce_kind k : all_kinds) {
      std::vector<float> x(static_cast<std::size_t>(n));
      if (k == reduce_kind::prod)
        fill_random(x.data(), n, rng, 0.8f, 1.25f);
      else
        fill_random(x.data(), n, rng, -4.f, 4.f);
      if (with_nan && n > 3) {
        x[std::size_t(n / 3)] = std::nanf("");
        x[std::size_t(n / 2)] = -std::numeric_limits<float>::infinity();
      }
      const ref_result want = reference(x, shape, axes, k);
      std::vector<float> y1(std::size_t(outputs), 12345.f), y2(y1);
      kfuse::reduce<A, B>(x.data(), y1.data(), shape, std::span<const bool>(ax, std::size_t(r)), k,
                          {.threads = 1});
      kfuse::reduce<A, B>(x.data(), y2.data(), shape, std::span<const bool>(ax, std::size_t(r)), k,
                          {.threads = 2});
      for (std::size_t o = 0; o < y1.size(); ++o) {
        INFO(kind_name(k) << " axes mask " << mask << " shape rank " << r << " output " << o
                          << ": got " << y1[o] << ", want " << want.value[o]);
        const double w = want.value[o];
        REQUIRE(std::memcmp(&y1[o], &y2[o], sizeof(float)) == 0);
        if (w != w) {
          REQUIRE(y1[o] != y1[o]);
        } else if (std::isinf(w)) {
          REQUIRE(double(y1[o]) == w);
        } else if (k == reduce_kind::max || k == reduce_kind::min) {
          REQUIRE(double(y1[o]) == w);
        } else if (k == reduce_kind::log_sum_exp) {
          REQUIRE(std::fabs(y1[o] - w) <= 4e-6 * (1 + std::fabs(w)));
        } else if (k == reduce_kind::prod) {
          REQUIRE(std::fabs(y1[o] - w) <= double(count + 2) * 1.2e-7 * std::fabs(w));
        } else {
          double scale = want.terms[o];
          if (k == reduce_kind::mean) scale /= double(count);
          if (k == reduce_kind::l2) scale = std::sqrt(scale);
          REQUIRE(std::fabs(y1[o] - w) <= double(count + 2) * 1.2e-7 * scale + 1e-30);
        }
      }
    }
  }
}

template <class A, class B>
void check_all_shapes(std::mt19937& rng) {
  using V = kfuse::simd::vec_for<A, B>;
  const index_t L = V::lanes;
  for (const std::vector<index_t>& s : std::vector<std::vector<index_t>>{{1},
                                                                         {L - 1 > 0 ? L - 1 : 1},
                                                                         {4 * L + 3},
                                                                         {300},
                                                                         {3, 5},
                                                                         {2, 4 * L + 1},
                                                                         {17, 1, 9},
                                                                         {2, 3, 4, 5},
                                                                         {3, 1, 2 * L + 1, 2},
                                                                         {2, 3, 1, 4, 3},
                                                                         {1, 1, 1},
                                                                         {600, 3},
                                                                         {5, 200}}) {
    INFO("rank " << s.size() << " last extent " << s.back());
    check_shape<A, B>(s, rng, false);
  }
  check_shape<A, B>({3, 7, 5}, rng, true);
}

}  // namespace

TEST_CASE("reduce: every kind over every axis subset against double", "[reduce]") {
  std::mt19937 rng(31);
  SECTION("generic") { check_all_shapes<kfuse::arch::generic, kfuse::backend::xsimd>(rng); }
  if (!cpu_can_run()) return;
  for_each_backend([&](auto b) { check_all_shapes<test_arch, decltype(b)>(rng); });
}

TEST_CASE("reduce: bf16 input, the kernel contract, errors", "[reduce]") {
  const std::vector<index_t> shape{4, 33};
  std::vector<float> x(4 * 33);
  std::mt19937 rng(3);
  fill_random(x.data(), 4 * 33, rng);
  std::vector<kfuse::bf16_t> xb(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = kfuse::to_bf16(x[i]);
  const bool last[] = {false, true};
  std::vector<float> y(4);
  kfuse::reduce(xb.data(), y.data(), shape, last, reduce_kind::sum);
  for (int r = 0; r < 4; ++r) {
    double want = 0;
    for (int c = 0; c < 33; ++c) want += double(kfuse::to_float(xb[std::size_t(r * 33 + c)]));
    CHECK(std::fabs(y[std::size_t(r)] - want) <= 1e-4);
  }
  using K = kfuse::reduce_kernel<>;
  K::problem p;
  p.rank = 2;
  p.shape[0] = 4;
  p.shape[1] = 33;
  p.axes[0] = true;
  p.kind = reduce_kind::max;
  const K::packed k = K::initialize(p);
  std::vector<float> cols(33);
  K::run(kfuse::flat_view<const float>{x.data(), 4 * 33}, k,
         kfuse::flat_view<float>{cols.data(), 33}, {}, {});
  for (int c = 0; c < 33; ++c) {
    float m = x[std::size_t(c)];
    for (int r = 1; r < 4; ++r) m = std::max(m, x[std::size_t(r * 33 + c)]);
    CHECK(cols[std::size_t(c)] == m);
  }
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(K::run(kfuse::flat_view<const float>{x.data(), 4 * 33}, k,
                           kfuse::flat_view<float>{cols.data(), 32}, {}, {}),
                    Contains("reduce") && Contains("views of 132 and 32 elements"));
  const bool three[] = {true, false, true};
  CHECK_THROWS_WITH(kfuse::reduce(x.data(), y.data(), shape, three, reduce_kind::sum),
                    Contains("3 axis flags for a 2-D tensor"));
  const std::vector<index_t> zero{4, 0};
  CHECK_THROWS_WITH(kfuse::reduce(x.data(), y.data(), zero, last, reduce_kind::sum),
                    Contains("must be positive"));
  CHECK_THROWS_WITH(kfuse::reduce(x.data(), x.data() + 2, shape, last, reduce_kind::sum),
                    Contains("overlap"));
  p.kind = reduce_kind(42);
  CHECK_FALSE(K::can_implement(p).ok());
}

// arg_reduce (kernels/arg_reduce.hpp): exact indices on every axis of ranks 1 to 4, ties to the
// first or the last, NaN wins, bf16 input, 1 and 2 threads, errors.
TEST_CASE("arg_reduce: indices of the max / min on every axis", "[reduce]") {
  std::mt19937 rng(53);
  for (const std::vector<index_t>& shape : std::vector<std::vector<index_t>>{
           {1}, {9}, {3, 5}, {4, 1, 300}, {2, 3, 4, 5}, {7, 260}, {2, 700, 3}})
    for (int axis = 0; axis < int(shape.size()); ++axis)
      for (kfuse::arg_kind kind : {kfuse::arg_kind::max, kfuse::arg_kind::min})
        for (bool last : {false, true}) {
          index_t n = 1, outer = 1, inner = 1;
          for (int d = 0; d < int(shape.size()); ++d) {
            n *= shape[std::size_t(d)];
            if (d < axis) outer *= shape[std::size_t(d)];
            if (d > axis) inner *= shape[std::size_t(d)];
          }
          const index_t len = shape[std::size_t(axis)];
          std::vector<float> x(static_cast<std::size_t>(n));
          // Few distinct values: many ties.
          for (float& v : x) v = float(int(rng() % 5)) - 2.f;
          if (n > 10) x[std::size_t(n / 2)] = std::nanf("");
          std::vector<std::int64_t> y1(std::size_t(outer * inner), -1), y2(y1);
          kfuse::arg_reduce(x.data(), y1.data(), shape, axis, kind, last, {.threads = 1});
          kfuse::arg_reduce(x.data(), y2.data(), shape, axis - int(shape.size()), kind, last,
                            {.threads = 2});
          REQUIRE(y1 == y2);
          for (index_t o = 0; o < outer; ++o)
            for (index_t c = 0; c < inner; ++c) {
              index_t want = -1;
              for (index_t j = 0; j < len; ++j) {
                const float v = x[std::size_t((o * len + j) * inner + c)];
                if (v != v) {  // the first NaN wins
                  want = j;
                  break;
                }
                if (want < 0) {
                  want = j;
                  continue;
                }
                const float b = x[std::size_t((o * len + want) * inner + c)];
                const bool better = kind == kfuse::arg_kind::max ? (last ? v >= b : v > b)
                                                                 : (last ? v <= b : v < b);
                if (better) want = j;
              }
              INFO("axis " << axis << " kind " << int(kind) << " last " << last);
              REQUIRE(y1[std::size_t(o * inner + c)] == want);
            }
        }
  const std::vector<kfuse::bf16_t> xb{kfuse::to_bf16(1.f), kfuse::to_bf16(3.f),
                                      kfuse::to_bf16(2.f)};
  std::int64_t at = -1;
  const std::vector<index_t> three{3};
  kfuse::arg_reduce(xb.data(), &at, three, 0, kfuse::arg_kind::max);
  CHECK(at == 1);
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(kfuse::arg_reduce(xb.data(), &at, three, 1, kfuse::arg_kind::max),
                    Contains("arg_reduce") && Contains("axis 1 is out of range"));
}
