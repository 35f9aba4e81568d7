// pad: constant / reflect / edge on ranks 1 to 4 with positive, zero and negative (cropping) pads,
// against an element-by-element reference; 1 and 2 threads bitwise equal, bf16 elements, the
// kernel contract, errors. Exact: pad only moves values.
#include "support/test_support.hpp"

using namespace kt;
using kfuse::pad_mode;

namespace {

// The input index of output position o on one axis (-1: fill), reflecting step by step.
index_t ref_source(index_t o, index_t before, index_t n, pad_mode m) {
  index_t i = o - before;
  if (i >= 0 && i < n) return i;
  if (m == pad_mode::constant) return -1;
  if (m == pad_mode::edge) return std::clamp<index_t>(i, 0, n - 1);
  while (i < 0 || i >= n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
  }
  return i;
}

void check_case(const std::vector<index_t>& shape, const std::vector<index_t>& before,
                const std::vector<index_t>& after, pad_mode m, std::mt19937& rng) {
  const int r = int(shape.size());
  index_t n = 1, on = 1;
  std::vector<index_t> out(shape);
  for (int d = 0; d < r; ++d) {
    n *= shape[std::size_t(d)];
    out[std::size_t(d)] += before[std::size_t(d)] + after[std::size_t(d)];
    on *= out[std::size_t(d)];
  }
  std::vector<float> x(static_cast<std::size_t>(n));
  fill_random(x.data(), n, rng);
  guarded<float> y1(on, 0xCD), y2(on, 0xCD);
  kfuse::pad(x.data(), y1.data, shape, before, after, m, 2.5f, {.threads = 1});
  kfuse::pad(x.data(), y2.data, shape, before, after, m, 2.5f, {.threads = 2});
  CHECK(y1.guards_intact());
  CHECK(y2.guards_intact());
  for (index_t k = 0; k < on; ++k) {
    index_t rem = k, src = 0, stride = 1;
    bool fill = false;
    for (int d = r - 1; d >= 0; --d) {
      const index_t o = rem % out[std::size_t(d)];
      rem /= out[std::size_t(d)];
      const index_t i = ref_source(o, before[std::size_t(d)], shape[std::size_t(d)], m);
      fill = fill || i < 0;
      src += i * stride;
      stride *= shape[std::size_t(d)];
    }
    const float want = fill ? 2.5f : x[std::size_t(src)];
    INFO("mode " << int(m) << " rank " << r << " output " << k);
    REQUIRE(y1.data[k] == want);
    REQUIRE(y2.data[k] == want);
  }
}

}  // namespace

TEST_CASE("pad: every mode on ranks 1 to 4 against the reference", "[pad]") {
  std::mt19937 rng(41);
  for (pad_mode m : {pad_mode::constant, pad_mode::reflect, pad_mode::edge}) {
    check_case({7}, {2}, {3}, m, rng);
    check_case({1}, {0}, {4}, m == pad_mode::reflect ? pad_mode::edge : m, rng);
    check_case({3, 5}, {1, 4}, {2, 0}, m, rng);
    check_case({2, 3, 6, 6}, {0, 0, 3, 3}, {0, 0, 3, 3}, m, rng);  // a conv's halo
    check_case({2, 6, 6, 3}, {0, 1, 1, 0}, {0, 2, 1, 0}, m, rng);  // nhwc memory
    check_case({4, 9}, {-1, -2}, {1, 3}, m, rng);                  // crop and pad
    check_case({3, 4, 5}, {1, -1, 2}, {-1, 2, -2}, m, rng);
    check_case({2, 300}, {0, 5}, {0, 7}, m, rng);  // long rows
  }
  // Big pads: constant and edge go beyond the extent.
  check_case({2, 3}, {5, 9}, {4, 8}, pad_mode::constant, rng);
  check_case({2, 3}, {5, 9}, {4, 8}, pad_mode::edge, rng);
}

TEST_CASE("pad: bf16 elements, the kernel contract, errors", "[pad]") {
  const std::vector<index_t> shape{2, 3}, before{0, 1}, after{1, 1};
  std::vector<kfuse::bf16_t> x(6), y(3 * 5);
  for (int i = 0; i < 6; ++i) x[std::size_t(i)] = kfuse::to_bf16(float(i));
  kfuse::pad(x.data(), y.data(), shape, before, after, pad_mode::constant, -1.f);
  const float want[] = {-1, 0, 1, 2, -1, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1};
  for (int i = 0; i < 15; ++i) CHECK(kfuse::to_float(y[std::size_t(i)]) == want[i]);
  kfuse::pad_kernel::problem p;
  p.rank = 2;
  p.shape[0] = 2;
  p.shape[1] = 3;
  p.before[1] = 2;
  p.mode = pad_mode::reflect;
  const auto k = kfuse::pad_kernel::initialize(p);
  std::vector<float> xf{1, 2, 3, 4, 5, 6}, yf(10);
  kfuse::pad_kernel::run(kfuse::flat_view<const float>{xf.data(), 6}, k,
                         kfuse::flat_view<float>{yf.data(), 10}, {}, {});
  CHECK(yf == std::vector<float>{3, 2, 1, 2, 3, 6, 5, 4, 5, 6});
  using Catch::Matchers::Contains;
  p.before[1] = 3;  // reflect needs pads < extent
  CHECK_FALSE(kfuse::pad_kernel::can_implement(p).ok());
  CHECK_THROWS_WITH(kfuse::pad_kernel::initialize(p), Contains("must be smaller than its extent"));
  const std::vector<index_t> crop_all{0, -3}, none{0, 0};
  CHECK_THROWS_WITH(kfuse::pad(xf.data(), yf.data(), shape, crop_all, none, pad_mode::constant),
                    Contains("at least one position"));
  const std::vector<index_t> three{0, 0, 0};
  CHECK_THROWS_WITH(kfuse::pad(xf.data(), yf.data(), shape, three, none, pad_mode::constant),
                    Contains("3 and 2 pads for a 2-D tensor"));
  CHECK_THROWS_WITH(kfuse::pad(xf.data(), xf.data() + 1, shape, before, after, pad_mode::edge),
                    Contains("overlap"));
}
