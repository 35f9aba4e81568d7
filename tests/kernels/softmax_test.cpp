// softmax / log_softmax against a double-precision reference: last-axis rows of many lengths
// with both row methods, every axis of 4-D tensors, large values, -inf entries, f32 and bf16
// storage, in place, tensor views in both layouts, and every bad-input error.
//
// Tolerances (per output element, against the double reference computed from the stored input):
//   f32   1e-5 relative + 1e-6 absolute (exp2 polynomial < 3e-7, sum and scale roundings)
//   bf16  one bf16 ulp of the output on top of that (the f32 result is rounded once)
#include "kfuse/kernels/softmax.hpp"

#include "support/test_support.hpp"

using namespace kt;
using kfuse::bf16_t;

namespace {

// The reference over `axis` of a row-major tensor, from the stored values.
template <class In>
std::vector<double> ref_softmax(const In* x, const std::vector<index_t>& shape, int axis,
                                bool log) {
  index_t outer = 1, inner = 1, n = 1;
  for (int d = 0; d < int(shape.size()); ++d) {
    n *= shape[d];
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  const index_t len = shape[axis];
  std::vector<double> y(static_cast<std::size_t>(n), 0.0);
  for (index_t o = 0; o < outer; ++o)
    for (index_t i = 0; i < inner; ++i) {
      auto at = [&](index_t a) { return (o * len + a) * inner + i; };
      double m = -INFINITY;
      for (index_t a = 0; a < len; ++a) m = std::max(m, double(kfuse::to_float(x[at(a)])));
      double s = 0;
      for (index_t a = 0; a < len; ++a) s += std::exp(double(kfuse::to_float(x[at(a)])) - m);
      for (index_t a = 0; a < len; ++a) {
        const double v = double(kfuse::to_float(x[at(a)]));
        y[std::size_t(at(a))] = log ? v - m - std::log(s) : std::exp(v - m) / s;
      }
    }
  return y;
}

using kt::impl_prefix;

// Runs softmax into a guarded output poisoned with NaN (0xff) and again with 0xa5 (the two
// results must be identical), checks run_info, guards and every element.
template <class B, class In, class Out>
void check_softmax(const std::vector<In>& x, const std::vector<index_t>& shape, int axis,
                   kfuse::softmax_options so, std::string_view expect_mk = {}) {
  const index_t n = index_t(x.size());
  const int rank = int(shape.size());
  const auto ref = ref_softmax(x.data(), shape, axis < 0 ? axis + rank : axis, so.log);
  std::vector<Out> first(x.size());
  for (unsigned char poison : {0xff, 0xa5}) {
    guarded<Out> out(n, poison);
    const auto info =
        kfuse::softmax<test_arch, B>(x.data(), out.data, std::span<const index_t>(shape), axis, so);
    CHECK(info.kernel == "softmax");
    CHECK(info.arch == test_arch::name);
    CHECK(std::string_view(info.impl).substr(0, impl_prefix<B>().size()) == impl_prefix<B>());
    if (!expect_mk.empty() && n > 0) CHECK(info.micro_kernel == expect_mk);
    REQUIRE(out.guards_intact());
    if (poison == 0xff) {
      std::copy(out.data, out.data + n, first.begin());
      continue;
    }
    if (n > 0) REQUIRE(std::memcmp(first.data(), out.data, sizeof(Out) * std::size_t(n)) == 0);
  }
  int bad = 0;
  for (index_t i = 0; i < n; ++i) {
    const double r = ref[std::size_t(i)];
    const double got = double(kfuse::to_float(first[std::size_t(i)]));
    const bool ok = std::isinf(r) ? got == r : std::fabs(got - r) <= tolerance<Out>(r);
    if (!ok && bad++ < 5)
      FAIL_CHECK("shape " << kfuse::detail::shape_string(shape) << " axis " << axis << " log "
                          << so.log << " element " << i << ": got " << got << ", expected " << r);
  }
  CHECK(bad == 0);
}

template <class T>
std::vector<T> random_values(index_t n, std::mt19937& rng, float lo, float hi) {
  std::vector<T> v(static_cast<std::size_t>(n));
  fill_random(v.data(), n, rng, lo, hi);
  return v;
}

const kfuse::softmax_options cached{false, kfuse::softmax_method::cached_rows};
const kfuse::softmax_options online{false, kfuse::softmax_method::online};
const kfuse::softmax_options automatic{};

}  // namespace

TEST_CASE("softmax: last axis, row lengths around the vector width, both methods", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(11);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (index_t len : {1, 7, 15, 16, 17, 1000, 1024, 4099}) {
      const std::vector<index_t> shape{3, len};
      const auto x = random_values<float>(3 * len, rng, -8.f, 8.f);
      for (bool log : {false, true}) {
        check_softmax<B, float, float>(x, shape, 1, {log, kfuse::softmax_method::cached_rows},
                                       "cached rows");
        check_softmax<B, float, float>(x, shape, -1, {log, kfuse::softmax_method::online},
                                       "online rows");
      }
      check_softmax<B, float, float>(x, shape, 1, automatic, "cached rows");
    }
    // Long rows switch to the online method on their own.
    const index_t len = kfuse::softmax_cached_row_limit + 5;
    const auto x = random_values<float>(2 * len, rng, -5.f, 5.f);
    check_softmax<B, float, float>(x, {2, len}, 1, automatic, "online rows");
  });
}

TEST_CASE("softmax: every axis of 4-D tensors", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(12);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const std::vector<index_t>& shape :
         {std::vector<index_t>{3, 5, 7, 33}, std::vector<index_t>{2, 70, 3, 1},
          std::vector<index_t>{1, 4, 9, 130}, std::vector<index_t>{5, 1, 2, 17}}) {
      index_t n = 1;
      for (index_t e : shape) n *= e;
      const auto x = random_values<float>(n, rng, -6.f, 6.f);
      for (int axis : {0, 1, 2, 3, -2})
        for (bool log : {false, true}) check_softmax<B, float, float>(x, shape, axis, {log});
    }
    // A 1-D tensor and an axis of length 1 (all ones) and an empty tensor.
    const auto x = random_values<float>(37, rng, -3.f, 3.f);
    check_softmax<B, float, float>(x, {37}, 0, automatic);
    check_softmax<B, float, float>(x, {37, 1}, 1, automatic);
    check_softmax<B, float, float>(x, {1, 37}, 0, automatic, "columns");
    check_softmax<B, float, float>({}, {4, 0, 3}, 1, automatic);
  });
}

TEST_CASE("softmax: large values and -inf entries stay finite", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.f, 1.f);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (index_t len : {5, 33, 1000}) {
      auto x = random_values<float>(4 * len, rng, -80.f, 80.f);
      // Row 1 sits around 1e4, row 2 mixes 1e4 with small and negative values, row 3 has -inf.
      for (index_t j = 0; j < len; ++j) {
        x[std::size_t(len + j)] = 1e4f + normal(rng);
        x[std::size_t(2 * len + j)] = j % 3 == 0 ? 1e4f + float(j % 7) : -1e4f * float(j % 2);
        if (j % 4 == 1) x[std::size_t(3 * len + j)] = -INFINITY;
      }
      const std::vector<index_t> shape{4, len};
      for (bool log : {false, true}) {
        check_softmax<B, float, float>(x, shape, 1, {log, kfuse::softmax_method::cached_rows});
        check_softmax<B, float, float>(x, shape, 1, {log, kfuse::softmax_method::online});
        check_softmax<B, float, float>(x, {2, 2, len}, 1, {log});  // the column kernel
      }
    }
  });
}

TEST_CASE("softmax: bf16 storage, mixed types, in place", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(14);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (const std::vector<index_t>& shape :
         {std::vector<index_t>{3, 17}, std::vector<index_t>{2, 1024},
          std::vector<index_t>{2, 3, 21},
          std::vector<index_t>{2, kfuse::softmax_scratch_row_limit + 9}}) {
      index_t n = 1;
      for (index_t e : shape) n *= e;
      const auto xb = random_values<bf16_t>(n, rng, -8.f, 8.f);
      const auto xf = random_values<float>(n, rng, -8.f, 8.f);
      for (int axis : {-1, 1}) {
        for (bool log : {false, true}) {
          check_softmax<B, bf16_t, bf16_t>(xb, shape, axis, {log});
          check_softmax<B, bf16_t, float>(xb, shape, axis, {log});
          check_softmax<B, float, bf16_t>(xf, shape, axis, {log});
        }
        check_softmax<B, bf16_t, bf16_t>(xb, shape, axis, online);
      }
    }
    // In place, f32 and bf16, both methods and the column kernel.
    const index_t len = 77;
    const auto x = random_values<float>(3 * len, rng, -8.f, 8.f);
    const auto ref = ref_softmax(x.data(), {3, len}, 1, false);
    const auto ref_cols = ref_softmax(x.data(), {3, len}, 0, false);
    for (auto so : {cached, online}) {
      auto y = x;
      kfuse::softmax<test_arch, B>(y.data(), y.data(), 3, len, so);
      for (std::size_t i = 0; i < y.size(); ++i)
        CHECK(std::fabs(y[i] - ref[i]) <= 1e-5 * ref[i] + 1e-6);
    }
    auto y = x;
    const index_t shape[2] = {3, len};
    kfuse::softmax<test_arch, B>(y.data(), y.data(), shape, 0);
    for (std::size_t i = 0; i < y.size(); ++i)
      CHECK(std::fabs(y[i] - ref_cols[i]) <= 1e-5 * ref_cols[i] + 1e-6);
    std::vector<bf16_t> yb(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) yb[i] = kfuse::to_bf16(x[i]);
    const auto ref_b = ref_softmax(yb.data(), {3, len}, 1, false);
    kfuse::softmax<test_arch, B>(yb.data(), yb.data(), 3, len);
    for (std::size_t i = 0; i < yb.size(); ++i)
      CHECK(std::fabs(kfuse::to_float(yb[i]) - ref_b[i]) <= tolerance<bf16_t>(ref_b[i]));
  });
}

TEST_CASE("softmax: tensor views use the logical axis in both layouts", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(15);
  const kfuse::dims4 d{2, 13, 3, 5};
  const index_t n = kfuse::numel(d);
  const auto x = random_values<float>(n, rng, -4.f, 4.f);
  for (int axis : {0, 1, 2, 3}) {
    std::vector<float> y1(static_cast<std::size_t>(n)), y2(y1), x2(y1);
    kfuse::softmax<test_arch>(kfuse::view<kfuse::nchw>(x.data(), d),
                              kfuse::view<kfuse::nchw>(y1.data(), d), axis);
    // The same logical tensor stored as NHWC.
    for (index_t a = 0; a < d.n; ++a)
      for (index_t c = 0; c < d.c; ++c)
        for (index_t h = 0; h < d.h; ++h)
          for (index_t w = 0; w < d.w; ++w)
            x2[std::size_t(kfuse::offset_of<kfuse::nhwc>(d, a, c, h, w))] =
                x[std::size_t(kfuse::offset_of<kfuse::nchw>(d, a, c, h, w))];
    kfuse::softmax<test_arch>(kfuse::view<kfuse::nhwc>(static_cast<const float*>(x2.data()), d),
                              kfuse::view<kfuse::nhwc>(y2.data(), d), axis);
    const std::vector<index_t> shape{d.n, d.c, d.h, d.w};
    const auto ref = ref_softmax(x.data(), shape, axis, false);
    for (index_t a = 0; a < d.n; ++a)
      for (index_t c = 0; c < d.c; ++c)
        for (index_t h = 0; h < d.h; ++h)
          for (index_t w = 0; w < d.w; ++w) {
            const double r = ref[std::size_t(kfuse::offset_of<kfuse::nchw>(d, a, c, h, w))];
            CHECK(std::fabs(y1[std::size_t(kfuse::offset_of<kfuse::nchw>(d, a, c, h, w))] - r) <=
                  tolerance<float>(r));
            CHECK(std::fabs(y2[std::size_t(kfuse::offset_of<kfuse::nhwc>(d, a, c, h, w))] - r) <=
                  tolerance<float>(r));
          }
  }
}

TEST_CASE("softmax: threads", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(16);
  const auto x = random_values<float>(64 * 1024, rng, -8.f, 8.f);
  std::vector<float> y1(x.size()), y2(x.size());
  const auto one = kfuse::softmax<test_arch>(x.data(), y1.data(), 64, 1024, {}, {1});
  const auto two = kfuse::softmax<test_arch>(x.data(), y2.data(), 64, 1024, {}, {2});
  CHECK(one.threads == 1);
  CHECK(two.threads == std::min(2, kfuse::pool_threads(2)));
  CHECK(y1 == y2);  // rows are independent: bitwise equal for any thread count
}

TEST_CASE("softmax: bad inputs throw naming the problem", "[softmax]") {
  std::vector<float> x(24), y(24);
  const index_t shape[3] = {2, 3, 4};
  auto throws = [](auto&& f, const std::string& what) {
    try {
      f();
      FAIL("no error for: " << what);
    } catch (const kfuse::error& e) {
      const std::string msg = e.what();
      CHECK(msg.rfind("softmax: ", 0) == 0);
      CHECK(msg.find(what) != std::string::npos);
    }
  };
  throws([&] { kfuse::softmax<test_arch>(x.data(), y.data(), shape, 3); },
         "axis 3 is out of range");
  throws([&] { kfuse::softmax<test_arch>(x.data(), y.data(), shape, -4); }, "out of range");
  throws([&] { kfuse::softmax<test_arch>(x.data(), y.data(), std::span<const index_t>(), 0); },
         "0-D");
  const index_t negative[2] = {2, -3};
  throws([&] { kfuse::softmax<test_arch>(x.data(), y.data(), negative, 0); }, "negative extent");
  throws([&] { kfuse::softmax<test_arch>(static_cast<const float*>(nullptr), y.data(), 2, 12); },
         "input is null");
  throws([&] { kfuse::softmax<test_arch>(x.data(), static_cast<float*>(nullptr), 2, 12); },
         "output is null");
  throws([&] { kfuse::softmax<test_arch>(x.data(), x.data() + 1, 2, 11); }, "overlap");
  throws(
      [&] {
        kfuse::softmax<test_arch>(std::span<float>(x), std::span<float>(y.data(), 20), shape, 1);
      },
      "shape [2, 3, 4] has 24");
  const kfuse::dims4 d{1, 2, 3, 4}, e{1, 2, 4, 3};
  throws(
      [&] {
        kfuse::softmax<test_arch>(kfuse::view<kfuse::nchw>(x.data(), d),
                                  kfuse::view<kfuse::nchw>(y.data(), e), 1);
      },
      "shapes differ");
  throws(
      [&] {
        kfuse::softmax<test_arch>(kfuse::view<kfuse::nhwc>(x.data(), d),
                                  kfuse::view<kfuse::nhwc>(y.data(), d), 4);
      },
      "axis 4 is out of range");
}

TEST_CASE("softmax: large aligned f32 outputs use streaming stores, same results", "[softmax]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(17);
  const index_t rows = 2048, cols = 1024, n = rows * cols;  // 8 MiB of output
  const auto x = random_values<float>(n, rng, -8.f, 8.f);
  // Streaming from stream_min_bytes() on (ctest sets KFUSE_STREAM_MIN_BYTES to 8 MiB for these
  // tests, so that this size streams on every machine).
  const bool streams = !std::is_same_v<test_arch, kfuse::arch::generic> &&
                       n * index_t(sizeof(float)) >= kfuse::detail::stream_min_bytes();
  for_each_backend([&](auto b) {
    using B = decltype(b);
    for (auto so : {cached, online, kfuse::softmax_options{true}}) {
      guarded<float> aligned(n, 0xff, 0), unaligned(n, 0xff, 1);
      const auto s = kfuse::softmax<test_arch, B>(x.data(), aligned.data, rows, cols, so);
      const auto u = kfuse::softmax<test_arch, B>(x.data(), unaligned.data, rows, cols, so);
      const std::string_view method =
          so.method == kfuse::softmax_method::online ? "online rows" : "cached rows";
      CHECK(u.micro_kernel == method);
      CHECK(s.micro_kernel ==
            (streams ? std::string(method) + ", streaming stores" : std::string(method)));
      REQUIRE(aligned.guards_intact());
      CHECK(std::memcmp(aligned.data, unaligned.data, sizeof(float) * std::size_t(n)) == 0);
    }
  });
  // One full check against the reference.
  guarded<float> y(n, 0xff, 0);
  kfuse::softmax<test_arch>(x.data(), y.data, rows, cols);
  const auto ref = ref_softmax(x.data(), {rows, cols}, 1, false);
  int bad = 0;
  for (index_t i = 0; i < n; ++i)
    bad += !(std::fabs(y.data[i] - ref[std::size_t(i)]) <= tolerance<float>(ref[std::size_t(i)]));
  CHECK(bad == 0);
}
