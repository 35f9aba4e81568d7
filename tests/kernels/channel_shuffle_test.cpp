// channel_shuffle: every run of the shuffled channels of NCHW and NHWC images over 1 to 4 groups,
// against an element-by-element reference of ShuffleNet's reshape / transpose / reshape;
// 1-, 2- and 4-byte elements, 1 and 2 threads, guarded outputs, errors. Exact: it only moves bits.
#include "kfuse/kernels/channel_shuffle.hpp"

#include "support/test_support.hpp"

using namespace kt;
using kfuse::channel_shuffle_shape;

namespace {

// The input channel of shuffled channel ch: the reshape [g, C / g] transposed to [C / g, g].
index_t ref_source(index_t ch, index_t c, int g) {
  const index_t i = ch / g, j = ch % g;  // position (i, j) of the transposed [C / g, g]
  return j * (c / g) + i;                // element (j, i) of the [g, C / g] reshape
}

template <class T>
void check_case(const channel_shuffle_shape& s, std::mt19937& rng) {
  std::vector<T> x(std::size_t(s.in_count()));
  for (T& v : x) v = T(rng());
  guarded<T> y1(s.out_count(), 0xCD), y2(s.out_count(), 0xCD);
  kfuse::channel_shuffle(x.data(), y1.data, s, {.threads = 1});
  kfuse::channel_shuffle(x.data(), y2.data, s, {.threads = 2});
  REQUIRE(y1.guards_intact());
  REQUIRE(y2.guards_intact());
  for (index_t b = 0; b < s.n; ++b)
    for (index_t j = 0; j < s.kept(); ++j)
      for (index_t p = 0; p < s.hw; ++p) {
        const index_t from = ref_source(s.first + j, s.c, s.groups);
        const index_t o =
            s.channels_last ? (b * s.hw + p) * s.kept() + j : (b * s.kept() + j) * s.hw + p;
        const index_t i =
            s.channels_last ? (b * s.hw + p) * s.c + from : (b * s.c + from) * s.hw + p;
        INFO("c " << s.c << " groups " << s.groups << " channels " << s.first << "+" << s.kept()
                  << " nhwc " << s.channels_last << " bytes " << sizeof(T));
        REQUIRE(y1.data[o] == x[std::size_t(i)]);
        REQUIRE(y2.data[o] == x[std::size_t(i)]);
      }
}

}  // namespace

TEST_CASE("channel_shuffle: every run of the shuffled channels, both layouts",
          "[channel_shuffle]") {
  std::mt19937 rng(7);
  for (bool nhwc : {false, true})
    for (int g : {1, 2, 3, 4})
      for (index_t c : {index_t(g), index_t(2 * g), index_t(6 * g), index_t(29 * g)})
        for (index_t hw : {index_t(1), index_t(7), index_t(64)}) {
          // The whole shuffle, each half (ShuffleNet's chunk), odd runs, one channel; count -1:
          // to the last channel.
          std::vector<std::pair<index_t, index_t>> runs = {{0, c}, {0, 1}, {c - 1, 1}, {c - 1, -1}};
          if (c % 2 == 0) runs.insert(runs.end(), {{0, c / 2}, {c / 2, c / 2}, {c / 2, -1}});
          if (c > 3) runs.push_back({1, c - 2});
          for (auto [first, count] : runs)
            for (index_t n : {index_t(1), index_t(2)}) {
              const auto s = channel_shuffle_shape::of(n, c, hw, nhwc, {g, first, count});
              check_case<float>(s, rng);
              check_case<std::uint16_t>(s, rng);
              check_case<std::uint8_t>(s, rng);
            }
        }
}

TEST_CASE("channel_shuffle: bf16 elements move as bits", "[channel_shuffle]") {
  std::mt19937 rng(3);
  std::vector<kfuse::bf16_t> x(2 * 8 * 5);
  fill_random(x.data(), index_t(x.size()), rng);
  std::vector<kfuse::bf16_t> y(x.size());
  kfuse::channel_shuffle(x.data(), y.data(), channel_shuffle_shape::of(2, 8, 5, true, {2, 0, 8}));
  for (index_t p = 0; p < 10; ++p)
    for (index_t j = 0; j < 8; ++j)
      REQUIRE(y[std::size_t(p * 8 + j)].bits == x[std::size_t(p * 8 + ref_source(j, 8, 2))].bits);
}

TEST_CASE("channel_shuffle: bad problems throw kfuse::error", "[channel_shuffle][errors]") {
  std::vector<float> x(64), y(64);
  const auto run = [&](index_t n, index_t c, index_t hw, int g, index_t first, index_t count) {
    kfuse::channel_shuffle(x.data(), y.data(),
                           channel_shuffle_shape::of(n, c, hw, false, {g, first, count}));
  };
  REQUIRE_THROWS_WITH(run(1, 6, 2, 4, 0, 6),
                      Catch::Matchers::Contains("groups 4 do not divide 6 channels"));
  REQUIRE_THROWS_WITH(run(1, 6, 2, 0, 0, 6), Catch::Matchers::Contains("groups 0 do not divide"));
  REQUIRE_THROWS_WITH(run(1, 6, 2, 2, 4, 3),
                      Catch::Matchers::Contains("channels 4 to 7 are not within the 6"));
  REQUIRE_THROWS_WITH(run(1, 6, 2, 2, 0, 0),
                      Catch::Matchers::Contains("channels 0 to 0 are not within"));
  REQUIRE_THROWS_WITH(run(0, 6, 2, 2, 0, 6), Catch::Matchers::Contains("extents n 0"));
  REQUIRE_THROWS_WITH(kfuse::channel_shuffle(x.data(), static_cast<float*>(nullptr),
                                             channel_shuffle_shape::of(1, 6, 2, false, {2, 0, 6})),
                      Catch::Matchers::Contains("output"));
  REQUIRE_THROWS_WITH(kfuse::channel_shuffle(x.data(), x.data() + 1,
                                             channel_shuffle_shape::of(1, 6, 2, false, {2, 0, 6})),
                      Catch::Matchers::Contains("overlap"));
}
