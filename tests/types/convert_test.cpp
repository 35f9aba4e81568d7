// Element conversions, scalar (types/convert.hpp) and vector (simd::load / store and their
// partial variants, on every backend of the arch under test), against exact expectations:
//  - bf16: round to nearest even incl. ties both ways, NaN stays NaN (quiet, sign kept), +-Inf,
//    denormals, max finite, overflow rounding to Inf;
//  - f16: the same, f16 denormals, the 65504 / 65520 boundary, every one of the 65536 bit
//    patterns through f32 and back, f32 -> f16 against a double-precision reference;
//  - i8 / u8: round half to even, saturation, NaN -> 0; quantize / dequantize stages with
//    per-tensor and per-channel parameters.
// The vector path must equal the scalar path bit for bit on all of these.
#include <bit>
#include <cstdint>
#include <limits>

#include "support/test_support.hpp"

using namespace kt;

namespace {

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

template <class T>
std::uint64_t raw(T v) {
  if constexpr (std::is_same_v<T, float>)
    return bits(v);
  else if constexpr (std::is_same_v<T, kfuse::bf16_t> || std::is_same_v<T, kfuse::f16_t>)
    return v.bits;
  else
    return std::uint64_t(std::int64_t(v));
}

/// In -> Out through the vector path: whole vectors with load/store, the tail with the partial
/// variants, into a poisoned, guarded buffer.
template <class V, class Out, class In>
std::vector<Out> vec_convert(const std::vector<In>& in, unsigned char poison) {
  const index_t n = index_t(in.size());
  guarded<Out> out(n, poison);
  index_t i = 0;
  for (; i + V::lanes <= n; i += V::lanes)
    kfuse::simd::store(out.data + i, kfuse::simd::load<V>(in.data() + i));
  if (i < n) {
    const int rest = int(n - i);
    kfuse::simd::store_partial(out.data + i, kfuse::simd::load_partial<V>(in.data() + i, rest),
                               rest);
  }
  REQUIRE(out.guards_intact());
  return std::vector<Out>(out.data, out.data + n);
}

/// f32 -> T through the vector path.
template <class V, class T>
std::vector<T> vec_from_f32(const std::vector<float>& in) {
  return vec_convert<V, T>(in, 0xA5);
}

/// T -> f32 through the vector path.
template <class V, class T>
std::vector<float> vec_to_f32(const std::vector<T>& in) {
  return vec_convert<V, float>(in, 0x5A);
}

/// The vector path of f32 -> T equals the scalar from_float<T> bit for bit on `in`, with every
/// offset into the vector (so each value is seen in every lane and in a tail).
template <class V, class T>
void vec_equals_scalar_store(const std::vector<float>& in, std::string_view what) {
  for (int shift = 0; shift < std::min<int>(V::lanes, 4); ++shift) {
    std::vector<float> src(in.begin() + std::min<std::ptrdiff_t>(shift, in.size()), in.end());
    const auto got = vec_from_f32<V, T>(src);
    int failures = 0;
    for (std::size_t i = 0; i < src.size() && failures < 8; ++i) {
      const T want = kfuse::from_float<T>(src[i]);
      if (raw(got[i]) != raw(want)) {
        ++failures;
        UNSCOPED_INFO(what << ": f32 bits 0x" << std::hex << bits(src[i]) << " vector 0x"
                           << raw(got[i]) << " scalar 0x" << raw(want) << std::dec);
      }
    }
    CHECK(failures == 0);
  }
}

/// The vector path of T -> f32 equals the scalar to_float bit for bit (NaN: both NaN with the
/// same sign, and the same bits unless `nan_bits_may_differ`).
template <class V, class T>
void vec_equals_scalar_load(const std::vector<T>& in, std::string_view what) {
  const auto got = vec_to_f32<V, T>(in);
  int failures = 0;
  for (std::size_t i = 0; i < in.size() && failures < 8; ++i) {
    const float want = kfuse::to_float(in[i]);
    if (bits(got[i]) != bits(want)) {
      ++failures;
      UNSCOPED_INFO(what << ": input 0x" << std::hex << raw(in[i]) << " vector 0x" << bits(got[i])
                         << " scalar 0x" << bits(want) << std::dec);
    }
  }
  CHECK(failures == 0);
}

// ------------------------------------------------------------------ double-precision references

/// binary16 bits of x rounded to nearest even, from a double computation independent of the
/// library's bit tricks.
std::uint16_t ref_f16(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return 0;  // callers handle NaN separately
  const double a = std::fabs(x);
  if (a >= 65520.0) return sign | 0x7c00;  // 65504 + half an ulp (2^4) and above: Inf
  if (a < 0x1p-14) {
    // denormal range: a multiple of 2^-24; 1024 * 2^-24 is the smallest normal, bits 0x0400
    const double r = std::nearbyint(a * 0x1p24);
    return std::uint16_t(sign | std::uint16_t(r));
  }
  int e;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): leading bit at 2^(e-1)
  const int lead = e - 1;
  const double r = std::nearbyint(std::ldexp(a, 10 - lead));  // in [1024, 2048]
  if (r == 2048.0) return std::uint16_t(sign | ((lead + 1 + 15) << 10));
  return std::uint16_t(sign | ((lead + 15) << 10) | (std::uint16_t(r) - 1024));
}

/// Value of binary16 bits (not NaN), independent of the library.
double ref_f16_value(std::uint16_t h) {
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f) return s * std::numeric_limits<double>::infinity();
  if (e == 0) return s * std::ldexp(double(m), -24);
  return s * std::ldexp(double(1024 + m), e - 25);
}

/// bfloat16 bits of x (not NaN) rounded to nearest even, via double.
std::uint16_t ref_bf16(float x) {
  const std::uint32_t u = bits(x);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a == 0x7f800000u) return sign | 0x7f80;
  // The two bf16 neighbours of |x| and the exact midpoint, compared in double.
  const std::uint16_t lo = std::uint16_t(a >> 16), hi = std::uint16_t(lo + 1);
  const double v = double(from_bits(a));
  const double vlo = double(from_bits(std::uint32_t(lo) << 16));
  const double vhi =
      hi == 0x7f80 ? std::ldexp(1.0, 128) : double(from_bits(std::uint32_t(hi) << 16));
  const double mid = 0.5 * (vlo + vhi);
  std::uint16_t r;
  if (v < mid)
    r = lo;
  else if (v > mid)
    r = hi;
  else
    r = (lo & 1) ? hi : lo;
  return std::uint16_t(sign | r);
}

struct bf16_case {
  std::uint32_t in;
  std::uint16_t out;
  const char* what;
};

const bf16_case bf16_cases[] = {
    {0x3f800000u, 0x3f80, "1.0 exact"},
    {0x3f808000u, 0x3f80, "tie, lower neighbour even: down"},
    {0x3f818000u, 0x3f82, "tie, upper neighbour even: up"},
    {0x3f807fffu, 0x3f80, "just below a tie"},
    {0x3f808001u, 0x3f81, "just above a tie"},
    {0xbf808000u, 0xbf80, "negative tie down"},
    {0xbf818000u, 0xbf82, "negative tie up"},
    {0x3fff8000u, 0x4000, "tie carrying into the exponent"},
    {0x00000000u, 0x0000, "+0"},
    {0x80000000u, 0x8000, "-0"},
    {0x7f800000u, 0x7f80, "+Inf"},
    {0xff800000u, 0xff80, "-Inf"},
    {0x7fc00000u, 0x7fc0, "quiet NaN"},
    {0xffc00000u, 0xffc0, "negative quiet NaN"},
    {0x7f800001u, 0x7fc0, "signalling NaN (payload below bf16) made quiet"},
    {0xff800001u, 0xffc0, "negative signalling NaN made quiet, sign kept"},
    {0x7fa00000u, 0x7fe0, "signalling NaN keeps its upper payload"},
    {0x7fffffffu, 0x7fff, "NaN with all payload bits does not carry into the sign"},
    {0x7f7f0000u, 0x7f7f, "bf16 max finite exact"},
    {0x7f7f7fffu, 0x7f7f, "below max finite + half ulp"},
    {0x7f7f8000u, 0x7f80, "max finite + half ulp ties to even: Inf"},
    {0x7f7fffffu, 0x7f80, "f32 max finite overflows to Inf"},
    {0xff7fffffu, 0xff80, "-f32 max finite overflows to -Inf"},
    {0x00000001u, 0x0000, "smallest f32 denormal rounds to 0"},
    {0x00008000u, 0x0000, "denormal tie to even: 0"},
    {0x00018000u, 0x0002, "denormal tie to even: up"},
    {0x00008001u, 0x0001, "denormal above tie"},
    {0x00010000u, 0x0001, "smallest bf16 denormal exact"},
    {0x807fffffu, 0x8080, "largest negative f32 denormal rounds to -min normal"},
    {0x00800000u, 0x0080, "f32 min normal"},
};

struct f16_case {
  float in;
  std::uint16_t out;
  const char* what;
};

const f16_case f16_cases[] = {
    {1.0f, 0x3c00, "1.0"},
    {-2.0f, 0xc000, "-2.0"},
    {1.0f + 0x1p-11f, 0x3c00, "tie, lower even: down"},
    {1.0f + 3 * 0x1p-11f, 0x3c02, "tie, upper even: up"},
    {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01, "just above a tie"},
    {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00, "just below a tie"},
    {2.0f - 0x1p-12f, 0x4000, "tie carrying into the exponent"},
    {65504.f, 0x7bff, "max finite"},
    {65519.996f, 0x7bff, "just below 65520 stays max finite"},
    {65520.f, 0x7c00, "65520 ties to even: Inf"},
    {-65520.f, 0xfc00, "-65520: -Inf"},
    {65536.f, 0x7c00, "overflow"},
    {3.0e38f, 0x7c00, "large overflow"},
    {std::numeric_limits<float>::infinity(), 0x7c00, "+Inf"},
    {-std::numeric_limits<float>::infinity(), 0xfc00, "-Inf"},
    {0.0f, 0x0000, "+0"},
    {-0.0f, 0x8000, "-0"},
    {0x1p-14f, 0x0400, "min normal"},
    {0x1p-14f - 0x1p-25f, 0x0400, "tie between max denormal and min normal: even (up)"},
    {0x1p-14f - 0x1p-24f, 0x03ff, "max denormal"},
    {0x1p-24f, 0x0001, "min denormal"},
    {0x1p-25f, 0x0000, "half the min denormal ties to 0"},
    {0x1p-25f + 0x1p-40f, 0x0001, "above half the min denormal"},
    {3 * 0x1p-25f, 0x0002, "1.5 min denormals ties to 2"},
    {5 * 0x1p-25f, 0x0002, "2.5 min denormals ties to 2"},
    {-3 * 0x1p-25f, 0x8002, "negative denormal tie"},
    {0x1p-30f, 0x0000, "underflow to +0"},
    {-0x1p-30f, 0x8000, "underflow to -0"},
    {1e-45f, 0x0000, "f32 denormal to 0"},
};

// Values around every bf16 and f16 rounding decision, plus random bit patterns.
std::vector<float> tricky_floats(std::mt19937& rng, int random_count) {
  std::vector<float> v;
  for (const auto& c : bf16_cases) v.push_back(from_bits(c.in));
  for (const auto& c : f16_cases) v.push_back(c.in);
  // ties and neighbours at many exponents
  for (int e = -30; e <= 17; ++e)
    for (std::uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0xfffu, 0x1000u, 0x1001u,
                              0x3000u, 0x2000u, 0x0u, 0x7fffffu}) {
      const std::uint32_t u = (std::uint32_t(127 + e) << 23) | (low & 0x7fffffu);
      v.push_back(from_bits(u));
      v.push_back(-from_bits(u));
    }
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < random_count; ++i) v.push_back(from_bits(any(rng)));
  // random values in the f16 range, and in its denormal range
  std::uniform_real_distribution<float> f16_range(-70000.f, 70000.f), tiny(-7e-5f, 7e-5f);
  for (int i = 0; i < random_count; ++i) {
    v.push_back(f16_range(rng));
    v.push_back(tiny(rng));
  }
  return v;
}

}  // namespace

// ===================================================================================== bf16

TEST_CASE("bf16: scalar conversion of the hand-picked cases", "[convert][bf16]") {
  for (const auto& c : bf16_cases) {
    INFO(c.what << " (0x" << std::hex << c.in << ")");
    CHECK(kfuse::to_bf16(from_bits(c.in)).bits == c.out);
  }
}

TEST_CASE("bf16: scalar f32 -> bf16 matches the double reference, NaN stays quiet NaN",
          "[convert][bf16]") {
  std::mt19937 rng(1);
  int failures = 0;
  for (float x : tricky_floats(rng, 200000)) {
    const std::uint16_t got = kfuse::to_bf16(x).bits;
    if (std::isnan(x)) {
      const float back = kfuse::to_float(kfuse::bf16_t{got});
      const bool ok = std::isnan(back) && (got & 0x0040) && std::signbit(back) == std::signbit(x);
      if (!ok && failures++ < 8) UNSCOPED_INFO("NaN 0x" << std::hex << bits(x) << " -> " << got);
    } else if (got != ref_bf16(x) && failures++ < 8) {
      UNSCOPED_INFO("0x" << std::hex << bits(x) << " -> 0x" << got << " want 0x" << ref_bf16(x));
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("bf16: every bf16 bit pattern widens exactly and round-trips", "[convert][bf16]") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = kfuse::to_float(kfuse::bf16_t{std::uint16_t(h)});
    REQUIRE(bits(f) == h << 16);
    const std::uint16_t back = kfuse::to_bf16(f).bits;
    if (std::isnan(f))
      REQUIRE(back == (h | 0x40u));  // quiet, sign and payload kept
    else
      REQUIRE(back == h);
  }
}

TEST_CASE("bf16: the vector path equals the scalar path bit for bit", "[convert][bf16][simd]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(2);
  const auto values = tricky_floats(rng, 20000);
  std::vector<kfuse::bf16_t> all(0x10000);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = kfuse::bf16_t{std::uint16_t(h)};
  for_each_backend([&](auto b) {
    using V = kfuse::simd::vec_for<test_arch, decltype(b)>;
    vec_equals_scalar_store<V, kfuse::bf16_t>(values, "f32 -> bf16");
    vec_equals_scalar_load<V, kfuse::bf16_t>(all, "bf16 -> f32");
    // round_to<bf16> is the cast stage's body: the same rounding, kept in f32
    for (const auto& c : bf16_cases) {
      const V r = kfuse::simd::round_to<kfuse::bf16_t>(V(from_bits(c.in)));
      alignas(64) float lanes[V::lanes];
      kfuse::simd::store(lanes, r);
      for (float l : lanes) CHECK(bits(l) == std::uint32_t(c.out) << 16);
    }
  });
}

// ===================================================================================== f16

TEST_CASE("f16: scalar conversion of the hand-picked cases", "[convert][f16]") {
  for (const auto& c : f16_cases) {
    INFO(c.what << " (" << c.in << ")");
    CHECK(kfuse::to_f16(c.in).bits == c.out);
    CHECK(ref_f16(double(c.in)) == c.out);  // the reference agrees with the table
  }
  // NaN: quiet, sign kept, upper payload kept
  CHECK(kfuse::to_f16(from_bits(0x7fc00000u)).bits == 0x7e00);
  CHECK(kfuse::to_f16(from_bits(0xffc00000u)).bits == 0xfe00);
  CHECK(kfuse::to_f16(from_bits(0x7f800001u)).bits == 0x7e00);  // signalling, payload below f16
  CHECK(kfuse::to_f16(from_bits(0xff800001u)).bits == 0xfe00);
  CHECK(kfuse::to_f16(from_bits(0x7fa00000u)).bits == 0x7f00);  // signalling, upper payload
  CHECK(kfuse::to_f16(from_bits(0x7fffffffu)).bits == 0x7fff);
}

TEST_CASE("f16: every f16 bit pattern widens exactly and round-trips through f32",
          "[convert][f16]") {
  int failures = 0;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto x = kfuse::f16_t{std::uint16_t(h)};
    const float f = kfuse::to_float(x);
    const bool is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    const std::uint16_t back = kfuse::to_f16(f).bits;
    bool ok;
    if (is_nan) {
      // NaN stays NaN with its sign, made quiet (as F16C does), payload kept both ways
      ok = std::isnan(f) && std::signbit(f) == bool(h & 0x8000) && (bits(f) & 0x00400000u) &&
           ((bits(f) >> 13) & 0x1ffu) == (h & 0x1ffu) && (back & 0x7e00) == 0x7e00 &&
           (back & 0x8000) == (h & 0x8000) && (back & 0x1ff) == (h & 0x1ff);
    } else {
      ok = double(f) == ref_f16_value(std::uint16_t(h)) && std::signbit(f) == bool(h & 0x8000) &&
           back == h;
    }
    if (!ok && failures++ < 8)
      UNSCOPED_INFO("f16 0x" << std::hex << h << " -> f32 0x" << bits(f) << " -> 0x" << back);
  }
  CHECK(failures == 0);
}

TEST_CASE("f16: scalar f32 -> f16 matches a double-precision RNE reference", "[convert][f16]") {
  std::mt19937 rng(3);
  int failures = 0;
  for (float x : tricky_floats(rng, 300000)) {
    if (std::isnan(x)) continue;
    const std::uint16_t got = kfuse::to_f16(x).bits, want = ref_f16(double(x));
    if (got != want && failures++ < 8)
      UNSCOPED_INFO(x << " (0x" << std::hex << bits(x) << ") -> 0x" << got << " want 0x" << want);
  }
  // every f32 in a dense window around each f16 value's rounding boundaries
  for (std::uint32_t h = 0; h < 0x7c00u; h += 7) {
    const float f = kfuse::to_float(kfuse::f16_t{std::uint16_t(h)});
    for (int d = -3; d <= 3; ++d) {
      const float x = from_bits(bits(f) + 0x1000u + std::uint32_t(d));  // near the midpoint
      if (std::isnan(x) || std::isinf(x)) continue;
      const std::uint16_t got = kfuse::to_f16(x).bits, want = ref_f16(double(x));
      if (got != want && failures++ < 8)
        UNSCOPED_INFO(x << " -> 0x" << std::hex << got << " want 0x" << want);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("f16: the vector path equals the scalar path bit for bit", "[convert][f16][simd]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(4);
  const auto values = tricky_floats(rng, 20000);
  std::vector<kfuse::f16_t> all(0x10000);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = kfuse::f16_t{std::uint16_t(h)};
  for_each_backend([&](auto b) {
    using V = kfuse::simd::vec_for<test_arch, decltype(b)>;
    vec_equals_scalar_store<V, kfuse::f16_t>(values, "f32 -> f16");
    // all 65536 patterns: widen, then narrow again, both through vectors
    vec_equals_scalar_load<V, kfuse::f16_t>(all, "f16 -> f32");
    const auto widened = vec_to_f32<V>(all);
    vec_equals_scalar_store<V, kfuse::f16_t>(widened, "f16 -> f32 -> f16");
  });
}

// ================================================================================= int8 / u8

TEST_CASE("int8 / u8: round half to even, saturate, NaN -> 0 (scalar)", "[convert][int8]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  using kfuse::from_float;
  CHECK(from_float<std::int8_t>(2.5f) == 2);
  CHECK(from_float<std::int8_t>(3.5f) == 4);
  CHECK(from_float<std::int8_t>(-2.5f) == -2);
  CHECK(from_float<std::int8_t>(-3.5f) == -4);
  CHECK(from_float<std::int8_t>(0.5f) == 0);
  CHECK(from_float<std::int8_t>(-0.5f) == 0);
  CHECK(from_float<std::int8_t>(1.5f) == 2);
  CHECK(from_float<std::int8_t>(2.4999998f) == 2);
  CHECK(from_float<std::int8_t>(2.5000002f) == 3);
  CHECK(from_float<std::int8_t>(126.5f) == 126);
  CHECK(from_float<std::int8_t>(127.5f) == 127);
  CHECK(from_float<std::int8_t>(-128.5f) == -128);
  CHECK(from_float<std::int8_t>(1000.f) == 127);
  CHECK(from_float<std::int8_t>(-1000.f) == -128);
  CHECK(from_float<std::int8_t>(3e9f) == 127);
  CHECK(from_float<std::int8_t>(inf) == 127);
  CHECK(from_float<std::int8_t>(-inf) == -128);
  CHECK(from_float<std::int8_t>(nan) == 0);
  CHECK(from_float<std::int8_t>(-nan) == 0);
  CHECK(from_float<std::uint8_t>(2.5f) == 2);
  CHECK(from_float<std::uint8_t>(3.5f) == 4);
  CHECK(from_float<std::uint8_t>(254.5f) == 254);
  CHECK(from_float<std::uint8_t>(255.5f) == 255);
  CHECK(from_float<std::uint8_t>(-0.5f) == 0);
  CHECK(from_float<std::uint8_t>(-1.f) == 0);
  CHECK(from_float<std::uint8_t>(-3e9f) == 0);
  CHECK(from_float<std::uint8_t>(300.f) == 255);
  CHECK(from_float<std::uint8_t>(inf) == 255);
  CHECK(from_float<std::uint8_t>(nan) == 0);
  CHECK(kfuse::round_saturate(-2.5f, -10, 10) == -2);
  CHECK(kfuse::round_saturate(10.5f, -10, 10) == 10);
  CHECK(kfuse::from_float<std::int32_t>(-2.5f) == -2);
  CHECK(kfuse::from_float<std::int32_t>(3e9f) == INT32_MAX);
  CHECK(kfuse::from_float<std::int32_t>(-3e9f) == INT32_MIN);
  // quantize_value / dequantize_value
  CHECK(kfuse::quantize_value<kfuse::i8>(1.25f, 0.5f, 0) == 2);   // 2.5 -> 2
  CHECK(kfuse::quantize_value<kfuse::i8>(1.75f, 0.5f, 0) == 4);   // 3.5 -> 4
  CHECK(kfuse::quantize_value<kfuse::i8>(-1.25f, 0.5f, 3) == 1);  // -2.5 -> -2, +3
  CHECK(kfuse::quantize_value<kfuse::i8>(100.f, 0.5f, 0) == 127);
  CHECK(kfuse::quantize_value<kfuse::u8>(-100.f, 0.5f, 128) == 0);
  CHECK(kfuse::quantize_value<kfuse::u8>(nan, 0.5f, 7) == 0);
  CHECK(kfuse::dequantize_value(5.f, 0.25f, 1) == 1.0f);
}

TEST_CASE("int8 / u8: the vector path equals the scalar path", "[convert][int8][simd]") {
  if (!cpu_can_run()) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values{2.5f,   3.5f,   -2.5f,  -3.5f,      0.5f,      -0.5f,  1.5f,
                            126.5f, 127.5f, 128.f,  -128.5f,    -129.f,    254.5f, 255.5f,
                            256.f,  1e9f,   -1e9f,  inf,        -inf,      nan,    -nan,
                            0.f,    -0.f,   1e-30f, 2.4999998f, 2.5000002f};
  for (float x = -300.f; x <= 300.f; x += 0.25f) values.push_back(x);
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 20000; ++i) values.push_back(from_bits(any(rng)));
  std::vector<std::int8_t> all_i8(256);
  std::vector<std::uint8_t> all_u8(256);
  std::vector<std::int32_t> some_i32{0, 1, -1, 16777216, 16777217, -16777217, INT32_MAX, INT32_MIN};
  for (int i = 0; i < 256; ++i) {
    all_i8[std::size_t(i)] = std::int8_t(i - 128);
    all_u8[std::size_t(i)] = std::uint8_t(i);
  }
  for_each_backend([&](auto b) {
    using V = kfuse::simd::vec_for<test_arch, decltype(b)>;
    vec_equals_scalar_store<V, std::int8_t>(values, "f32 -> i8");
    vec_equals_scalar_store<V, std::uint8_t>(values, "f32 -> u8");
    vec_equals_scalar_load<V, std::int8_t>(all_i8, "i8 -> f32");
    vec_equals_scalar_load<V, std::uint8_t>(all_u8, "u8 -> f32");
    vec_equals_scalar_load<V, std::int32_t>(some_i32, "i32 -> f32");
    vec_equals_scalar_store<V, float>(values, "f32 -> f32");
  });
}

// ====================================================================== quantize / dequantize

namespace {

/// Runs `ep` with eltwise for (A, B) on an nhwc tensor of shape d; returns the output.
template <class A, class B, class In, class Out, class Ep>
std::vector<Out> run_nhwc(const std::vector<In>& in, const kfuse::dims4& d, const Ep& ep) {
  guarded<Out> out(kfuse::numel(d), 0xA5);
  kfuse::eltwise<A, B>(kfuse::view<kfuse::nhwc>(in.data(), d),
                       kfuse::view<kfuse::nhwc>(out.data, d), ep);
  REQUIRE(out.guards_intact());
  return std::vector<Out>(out.data, out.data + kfuse::numel(d));
}

/// Same in nchw.
template <class A, class B, class In, class Out, class Ep>
std::vector<Out> run_nchw(const std::vector<In>& in, const kfuse::dims4& d, const Ep& ep) {
  guarded<Out> out(kfuse::numel(d), 0x5A);
  kfuse::eltwise<A, B>(kfuse::view<kfuse::nchw>(in.data(), d),
                       kfuse::view<kfuse::nchw>(out.data, d), ep);
  REQUIRE(out.guards_intact());
  return std::vector<Out>(out.data, out.data + kfuse::numel(d));
}

// Power-of-two scales keep x / scale exact, so ties stay ties and the expectation is exact.
const std::vector<float> ch_scales{0.5f, 0.25f, 2.f, 1.f, 0.125f};
// Zero points inside each type's range (a zero point outside it is an error).
const std::vector<std::int32_t> ch_zps_i8{0, 3, -5, 10, -128};
const std::vector<std::int32_t> ch_zps_u8{0, 3, 250, 10, 255};

template <class E>
double expect_q(double x, double s, double z) {
  return std::min<double>(std::max<double>(std::nearbyint(x / s) + z, kfuse::elem_traits<E>::min),
                          kfuse::elem_traits<E>::max);
}

template <class B, class E>
void check_quantize_stages() {
  using Q = kfuse::storage_t<E>;
  const std::vector<std::int32_t>& ch_zps = std::is_same_v<E, kfuse::u8> ? ch_zps_u8 : ch_zps_i8;
  const kfuse::dims4 d{2, 5, 3, 7};  // 5 channels; rows of 5 values in nhwc
  const index_t n = kfuse::numel(d);
  // halves, ties, out of range and NaN
  std::vector<float> x(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i)
    x[std::size_t(i)] = 0.125f * float(i % 61 - 30) * float(1 + i % 9);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[11] = 1e6f;
  x[12] = -1e6f;
  const auto channel_nhwc = [&](index_t i) { return i % d.c; };
  const auto channel_nchw = [&](index_t i) { return (i / (d.h * d.w)) % d.c; };

  // per tensor
  {
    const kfuse::epilogue<kfuse::quantize<E>> ep{{{0.25f, 7}}};
    const auto got = run_nhwc<test_arch, B, float, Q>(x, d, ep);
    const auto generic = run_nhwc<kfuse::arch::generic, B, float, Q>(x, d, ep);
    for (index_t i = 0; i < n; ++i) {
      const double want =
          std::isnan(x[std::size_t(i)]) ? 0.0 : expect_q<E>(x[std::size_t(i)], 0.25, 7);
      INFO("per tensor i=" << i << " x=" << x[std::size_t(i)]);
      REQUIRE(double(got[std::size_t(i)]) == want);
      REQUIRE(generic[std::size_t(i)] == got[std::size_t(i)]);
    }
  }
  // per channel, both layouts
  {
    const kfuse::epilogue<kfuse::quantize<E>> ep{{{1.f, 0, ch_scales, ch_zps}}};
    const auto nhwc = run_nhwc<test_arch, B, float, Q>(x, d, ep);
    const auto nchw = run_nchw<test_arch, B, float, Q>(x, d, ep);
    const auto g_nhwc = run_nhwc<kfuse::arch::generic, B, float, Q>(x, d, ep);
    const auto g_nchw = run_nchw<kfuse::arch::generic, B, float, Q>(x, d, ep);
    for (index_t i = 0; i < n; ++i) {
      const float xi = x[std::size_t(i)];
      const index_t c1 = channel_nhwc(i), c2 = channel_nchw(i);
      const double w1 = std::isnan(xi) ? 0.0 : expect_q<E>(xi, ch_scales[c1], ch_zps[c1]);
      const double w2 = std::isnan(xi) ? 0.0 : expect_q<E>(xi, ch_scales[c2], ch_zps[c2]);
      INFO("per channel i=" << i << " x=" << xi);
      REQUIRE(double(nhwc[std::size_t(i)]) == w1);
      REQUIRE(double(nchw[std::size_t(i)]) == w2);
      REQUIRE(g_nhwc[std::size_t(i)] == nhwc[std::size_t(i)]);
      REQUIRE(g_nchw[std::size_t(i)] == nchw[std::size_t(i)]);
    }
    // per-channel scales without per-channel zero points: every channel uses zero_point
    const kfuse::epilogue<kfuse::quantize<E>> no_zp{{{1.f, 99, ch_scales}}};
    const auto got = run_nhwc<test_arch, B, float, Q>(x, d, no_zp);
    for (index_t i = 0; i < n; ++i) {
      const float xi = x[std::size_t(i)];
      const double want = std::isnan(xi) ? 0.0 : expect_q<E>(xi, ch_scales[channel_nhwc(i)], 99);
      INFO("per channel, no zero points, i=" << i);
      REQUIRE(double(got[std::size_t(i)]) == want);
    }
  }
  // dequantize: every integer value, per tensor and per channel; exact in f32
  {
    std::vector<Q> q(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i)
      q[std::size_t(i)] = Q(kfuse::elem_traits<E>::min + (i * 37) % 256);
    const kfuse::epilogue<kfuse::dequantize> per_tensor{{{0.25f, -3}}};
    const kfuse::epilogue<kfuse::dequantize> per_channel{{{1.f, 0, ch_scales, ch_zps}}};
    const auto a = run_nhwc<test_arch, B, Q, float>(q, d, per_tensor);
    const auto b = run_nhwc<test_arch, B, Q, float>(q, d, per_channel);
    const auto c = run_nchw<test_arch, B, Q, float>(q, d, per_channel);
    for (index_t i = 0; i < n; ++i) {
      const double qi = q[std::size_t(i)];
      const index_t c1 = channel_nhwc(i), c2 = channel_nchw(i);
      INFO("dequantize i=" << i << " q=" << qi);
      REQUIRE(double(a[std::size_t(i)]) == (qi + 3) * 0.25);
      REQUIRE(double(b[std::size_t(i)]) == (qi - ch_zps[c1]) * ch_scales[c1]);
      REQUIRE(double(c[std::size_t(i)]) == (qi - ch_zps[c2]) * ch_scales[c2]);
    }
    // dequantize -> quantize with the same parameters is the identity
    const kfuse::epilogue<kfuse::dequantize, kfuse::quantize<E>> round_trip{
        {{1.f, 0, ch_scales, ch_zps}}, {{1.f, 0, ch_scales, ch_zps}}};
    const auto same = run_nchw<test_arch, B, Q, Q>(q, d, round_trip);
    CHECK(same == q);
  }
}

}  // namespace

TEST_CASE("quantize / dequantize stages: per tensor and per channel, exact", "[convert][quant]") {
  if (!cpu_can_run()) return;
  for_each_backend([&](auto b) {
    check_quantize_stages<decltype(b), kfuse::i8>();
    check_quantize_stages<decltype(b), kfuse::u8>();
  });
}
