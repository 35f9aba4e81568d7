// Layouts: strides_of / offset_of for nchw and nhwc, nchw <-> nhwc conversion against a naive
// index-based reference (poisoned, guarded outputs; exact round trips for f32, bf16 and i8), and
// bad arguments throwing kfuse::error.
#include "support/test_support.hpp"

using namespace kt;
using kfuse::dims4;
using kfuse::nchw;
using kfuse::nhwc;

static_assert(kfuse::offset_of<nchw>(dims4{2, 3, 4, 5}, 1, 2, 3, 4) == 60 + 40 + 15 + 4);
static_assert(kfuse::offset_of<nhwc>(dims4{2, 3, 4, 5}, 1, 2, 3, 4) == 60 + 45 + 12 + 2);

TEST_CASE("layout: strides_of and offset_of", "[layout]") {
  const dims4 d{2, 3, 4, 5};
  const auto a = kfuse::strides_of<nchw>(d);
  CHECK(a.n == 60);
  CHECK(a.c == 20);
  CHECK(a.h == 5);
  CHECK(a.w == 1);
  const auto b = kfuse::strides_of<nhwc>(d);
  CHECK(b.n == 60);
  CHECK(b.c == 1);
  CHECK(b.h == 15);
  CHECK(b.w == 3);
  CHECK(nchw::channel_axis == 1);
  CHECK(nhwc::channel_axis == 3);
  // both layouts are bijections onto [0, numel)
  for (const dims4& s : {dims4{2, 3, 4, 5}, dims4{1, 1, 1, 1}, dims4{3, 7, 1, 2}}) {
    std::vector<int> seen_a(std::size_t(kfuse::numel(s))), seen_b(seen_a.size());
    for (index_t n = 0; n < s.n; ++n)
      for (index_t c = 0; c < s.c; ++c)
        for (index_t h = 0; h < s.h; ++h)
          for (index_t w = 0; w < s.w; ++w) {
            const index_t oa = kfuse::offset_of<nchw>(s, n, c, h, w);
            const index_t ob = kfuse::offset_of<nhwc>(s, n, c, h, w);
            REQUIRE(oa == ((n * s.c + c) * s.h + h) * s.w + w);
            REQUIRE(ob == ((n * s.h + h) * s.w + w) * s.c + c);
            ++seen_a[std::size_t(oa)];
            ++seen_b[std::size_t(ob)];
          }
    for (std::size_t i = 0; i < seen_a.size(); ++i) {
      REQUIRE(seen_a[i] == 1);
      REQUIRE(seen_b[i] == 1);
    }
  }
}

namespace {

template <class T>
T unique_value(index_t i) {
  if constexpr (std::is_same_v<T, float>)
    return float(i) * 0.5f - 1000.f;
  else if constexpr (std::is_same_v<T, kfuse::bf16_t>)
    return kfuse::bf16_t{std::uint16_t(i * 40503u)};  // every bit pattern, NaNs included
  else
    return T(i * 37 + 11);
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class LIn, class LOut, class T>
void convert(const T* in, T* out, const dims4& d) {
  if constexpr (std::is_same_v<LIn, nchw>)
    kfuse::nchw_to_nhwc(kfuse::view<nchw>(in, d), kfuse::view<nhwc>(out, d));
  else
    kfuse::nhwc_to_nchw(kfuse::view<nhwc>(in, d), kfuse::view<nchw>(out, d));
}

/// Converts `in` (layout LIn) to LOut into a poisoned, guarded buffer, twice with different
/// poison, and checks every element against the index-based reference.
template <class LIn, class LOut, class T>
std::vector<T> convert_checked(const std::vector<T>& in, const dims4& d) {
  const index_t total = kfuse::numel(d);
  std::vector<T> result(static_cast<std::size_t>(total));
  for (unsigned char poison : {0xA5, 0x5A}) {
    guarded<T> out(total, poison);
    convert<LIn, LOut>(in.data(), out.data, d);
    REQUIRE(out.guards_intact());
    for (index_t n = 0; n < d.n; ++n)
      for (index_t c = 0; c < d.c; ++c)
        for (index_t h = 0; h < d.h; ++h)
          for (index_t w = 0; w < d.w; ++w) {
            const T& got = out.data[kfuse::offset_of<LOut>(d, n, c, h, w)];
            const T& want = in[std::size_t(kfuse::offset_of<LIn>(d, n, c, h, w))];
            if (!same_bits(got, want)) {
              FAIL_CHECK(LIn::name << " -> " << LOut::name << " differs at n=" << n << " c=" << c
                                   << " h=" << h << " w=" << w);
              return result;
            }
          }
    std::copy(out.data, out.data + total, result.begin());
  }
  return result;
}

template <class T>
void round_trips() {
  for (index_t N : {1, 2})
    for (index_t C : {1, 2, 3, 4, 5, 13, 64})  // 1-4: the few-channel path
      for (index_t H : {1, 7, 33})
        for (index_t W : {1, 7, 33}) {
          const dims4 d{N, C, H, W};
          INFO("dims " << N << "x" << C << "x" << H << "x" << W);
          std::vector<T> a(static_cast<std::size_t>(kfuse::numel(d)));
          for (index_t i = 0; i < index_t(a.size()); ++i) a[std::size_t(i)] = unique_value<T>(i);
          const auto b = convert_checked<nchw, nhwc>(a, d);
          const auto back = convert_checked<nhwc, nchw>(b, d);
          REQUIRE(std::memcmp(back.data(), a.data(), a.size() * sizeof(T)) == 0);
          // and starting from a channels-last tensor
          const auto c = convert_checked<nhwc, nchw>(a, d);
          const auto again = convert_checked<nchw, nhwc>(c, d);
          REQUIRE(std::memcmp(again.data(), a.data(), a.size() * sizeof(T)) == 0);
        }
}

}  // namespace

TEST_CASE("layout: nchw <-> nhwc round trips exactly", "[layout][convert]") {
  if (!cpu_can_run()) return;
  SECTION("f32") { round_trips<float>(); }
  SECTION("bf16") { round_trips<kfuse::bf16_t>(); }
  SECTION("i8") { round_trips<std::int8_t>(); }
  SECTION("f16, u8, a larger image") {
    const dims4 d{2, 96, 40, 41};
    std::vector<kfuse::f16_t> a(static_cast<std::size_t>(kfuse::numel(d)));
    for (index_t i = 0; i < index_t(a.size()); ++i)
      a[std::size_t(i)] = kfuse::f16_t{std::uint16_t(i * 7)};
    const auto b = convert_checked<nchw, nhwc>(a, d);
    CHECK(std::memcmp(convert_checked<nhwc, nchw>(b, d).data(), a.data(), a.size() * 2) == 0);
    std::vector<std::uint8_t> u(static_cast<std::size_t>(kfuse::numel(dims4{1, 5, 9, 11})));
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = std::uint8_t(i);
    convert_checked<nhwc, nchw>(u, dims4{1, 5, 9, 11});
    // An RGB image of more pixels than one chunk of the few-channel path (8192), batch 2.
    const dims4 rgb{2, 3, 97, 95};
    std::vector<float> f(static_cast<std::size_t>(kfuse::numel(rgb)));
    for (index_t i = 0; i < index_t(f.size()); ++i) f[std::size_t(i)] = float(i);
    const auto g = convert_checked<nchw, nhwc>(f, rgb);
    CHECK(std::memcmp(convert_checked<nhwc, nchw>(g, rgb).data(), f.data(), f.size() * 4) == 0);
  }
  SECTION("images of many row blocks, each split over threads") {
    // 40 channels x 70 x 90: NHWC -> NCHW reads 16 blocks of 416 pixel rows (the last partial),
    // NCHW -> NHWC 3 blocks of 16 channel rows (the last of 8); batch 1 and 3.
    for (index_t N : {1, 3}) {
      const dims4 d{N, 40, 70, 90};
      std::vector<float> f(static_cast<std::size_t>(kfuse::numel(d)));
      for (index_t i = 0; i < index_t(f.size()); ++i) f[std::size_t(i)] = float(i);
      const auto g = convert_checked<nhwc, nchw>(f, d);
      CHECK(std::memcmp(convert_checked<nchw, nhwc>(g, d).data(), f.data(), f.size() * 4) == 0);
    }
  }
}

TEST_CASE("layout: bad arguments throw kfuse::error", "[layout][errors]") {
  using Catch::Matchers::Contains;
  std::vector<float> a(2 * 3 * 4 * 5), b(a.size());
  const dims4 d{2, 3, 4, 5};
  CHECK_THROWS_WITH(kfuse::nchw_to_nhwc(kfuse::view<nchw>(static_cast<const float*>(a.data()), d),
                                        kfuse::view<nhwc>(b.data(), dims4{2, 3, 5, 4})),
                    Contains("shapes differ"));
  CHECK_THROWS_AS(kfuse::nhwc_to_nchw(kfuse::view<nhwc>(static_cast<const float*>(a.data()), d),
                                      kfuse::view<nchw>(b.data(), dims4{2, 5, 4, 3})),
                  kfuse::error);
  CHECK_THROWS_WITH(kfuse::nchw_to_nhwc(kfuse::view<nchw>(static_cast<const float*>(a.data()), d),
                                        kfuse::view<nhwc>(a.data(), d)),
                    Contains("in place"));
  CHECK_THROWS_WITH(kfuse::nchw_to_nhwc(kfuse::view<nchw>(static_cast<const float*>(nullptr), d),
                                        kfuse::view<nhwc>(b.data(), d)),
                    Contains("input is null"));
  CHECK_THROWS_WITH(kfuse::nhwc_to_nchw(kfuse::view<nhwc>(static_cast<const float*>(a.data()), d),
                                        kfuse::view<nchw>(static_cast<float*>(nullptr), d)),
                    Contains("output is null"));
  std::vector<float> big(300);
  CHECK_THROWS_WITH(kfuse::nchw_to_nhwc(kfuse::view<nchw>(static_cast<const float*>(big.data()), d),
                                        kfuse::view<nhwc>(big.data() + 7, d)),
                    Contains("overlap"));
  const auto* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(a.data()) + 2);
  CHECK_THROWS_WITH(kfuse::nchw_to_nhwc(kfuse::view<nchw>(odd, d), kfuse::view<nhwc>(b.data(), d)),
                    Contains("not aligned"));
  // empty tensors are fine, even with null pointers
  const dims4 empty{0, 3, 4, 5};
  CHECK_NOTHROW(kfuse::nchw_to_nhwc(kfuse::view<nchw>(static_cast<const float*>(nullptr), empty),
                                    kfuse::view<nhwc>(static_cast<float*>(nullptr), empty)));
}
