// pool2d, u8 and i8 with zero points (the same quantization in and out): max exactly, averages
// rounded half to even exactly (padding counts as the zero point's real 0), global pooling,
// both layouts, every backend; a dequantizing epilogue to f32; the integer error paths.
#include "kernels/pool2d_common.hpp"

using namespace kt;

namespace {

template <class L, class E>
void int_cases(std::int32_t zp) {
  using T = kfuse::storage_t<E>;
  using kfuse::pool_kind;
  std::mt19937 rng(31);
  for_each_backend([&](auto b) {
    using B = decltype(b);
    std::vector<kfuse::pool_shape> shapes = pool_windows(pool_kind::max, true);
    for (bool incl : {true, false})
      for (const auto& s : pool_windows(pool_kind::avg, incl)) shapes.push_back(s);
    for (auto k : {pool_kind::max, pool_kind::avg})
      for (const auto& s : pool_globals(k)) shapes.push_back(s);
    for (const auto& s : shapes) {
      std::vector<T> x(std::size_t(kfuse::numel(s.in_dims())));
      fill_random(x.data(), index_t(x.size()), rng);
      pool_check<E, L, B, T>(s, x, kfuse::epilogue<>{}, "int bare", zp);
      pool_check<E, L, B, float>(s, x, kfuse::epilogue<kfuse::dequantize>{{{0.05f, zp}}},
                                 "dequantize -> f32", zp);
    }
  });
}

}  // namespace

TEST_CASE("pool2d u8/i8 nhwc: every mode, exact", "[pool2d][int8]") {
  if (!cpu_can_run()) return;
  int_cases<kfuse::nhwc, kfuse::u8>(7);
  int_cases<kfuse::nhwc, kfuse::i8>(-5);
}

TEST_CASE("pool2d u8/i8 nchw: every mode, exact", "[pool2d][int8]") {
  if (!cpu_can_run()) return;
  int_cases<kfuse::nchw, kfuse::u8>(128);
  int_cases<kfuse::nchw, kfuse::i8>(0);
}

TEST_CASE("pool2d int8: ties round half to even", "[pool2d][int8]") {
  if (!cpu_can_run()) return;
  // 2x2 windows averaging to x.5: 1,2,1,2 -> 1.5 -> 2; 2,3,2,3 -> 2.5 -> 2.
  auto s = pool_case(kfuse::pool_kind::avg, 1, 2, 4, 2, 2, 2, 2, 0, 0, 0, 0);
  std::vector<std::uint8_t> x{1, 2, 2, 3, 1, 2, 2, 3}, y(2);
  kfuse::pool2d<kfuse::u8, kfuse::nchw, test_arch>::run(
      kfuse::view<kfuse::nchw>(x.data(), s.in_dims()), s,
      kfuse::view<kfuse::nchw>(y.data(), s.out_dims()));
  CHECK(y[0] == 2);
  CHECK(y[1] == 2);
}

TEST_CASE("pool2d int8: bad zero point and oversized average windows throw", "[pool2d][errors]") {
  using Catch::Matchers::Contains;
  using P = kfuse::pool2d<kfuse::u8, kfuse::nhwc, test_arch>;
  std::vector<std::uint8_t> x(200 * 200), y(200 * 200);
  auto s = pool_case(kfuse::pool_kind::avg, 1, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0);
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nhwc>(x.data(), s.in_dims()), s,
                           kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), {}, {}, 256),
                    Contains("zero point 256 is outside the element range"));
  auto big = pool_case(kfuse::pool_kind::avg, 1, 200, 200, 130, 130, 1, 1, 0, 0, 0, 0);
  CHECK_THROWS_WITH(P::run(kfuse::view<kfuse::nhwc>(x.data(), big.in_dims()), big,
                           kfuse::view<kfuse::nhwc>(y.data(), big.out_dims())),
                    Contains("windows are limited to 16384 elements"));
}
