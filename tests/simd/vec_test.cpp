// simd::vec on every backend of the arch under test: math accuracy (erf, exp, tanh) against
// <cmath> in double, overflow / underflow, partial loads and stores that never touch memory past
// n (checked with a protected page right after the data), round_even ties, select / min / max,
// the bf16 stores of dot-product operands.
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "support/test_support.hpp"

using namespace kt;
namespace simd = kfuse::simd;

namespace {

template <class B>
std::string impl_of(B) {
  return simd::impl_name<test_arch, B>();
}

template <class F>
void each_backend(F&& f) {
  if constexpr (simd::backend_available<test_arch, kfuse::backend::xsimd>) {
    SECTION("xsimd") { f(kfuse::backend::xsimd{}); }
  }
  if constexpr (simd::backend_available<test_arch, kfuse::backend::hwy>) {
    SECTION("hwy") { f(kfuse::backend::hwy{}); }
  }
}

/// Applies the vector function f to every x (tail through partial load / store).
template <class V, class F>
std::vector<float> map(const std::vector<float>& x, F f) {
  std::vector<float> y(x.size());
  const index_t n = index_t(x.size());
  index_t i = 0;
  for (; i + V::lanes <= n; i += V::lanes)
    simd::store(y.data() + i, f(simd::load<V>(x.data() + i)));
  if (i < n) {
    const int r = int(n - i);
    simd::store_partial(y.data() + i, f(simd::load_partial<V>(x.data() + i, r)), r);
  }
  return y;
}

std::vector<float> grid(double lo, double hi, double step) {
  std::vector<float> v;
  for (double x = lo; x <= hi + 1e-12; x += step) v.push_back(float(x));
  return v;
}

template <class V>
std::vector<float> lanes_of(V v) {
  alignas(64) float t[V::lanes];
  simd::store(t, v);
  return std::vector<float>(t, t + V::lanes);
}

/// Two pages: the first holds the data, the second is PROT_NONE. A buffer of n elements placed
/// to end exactly at the protected page faults on any access past its end.
struct fenced_pages {
  std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  unsigned char* base = nullptr;
  fenced_pages() {
    void* p = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    base = static_cast<unsigned char*>(p);
    // a fence before the data too, so that reads below p are caught as well
    REQUIRE(mprotect(base, page, PROT_NONE) == 0);
    REQUIRE(mprotect(base + 2 * page, page, PROT_NONE) == 0);
  }
  ~fenced_pages() { munmap(base, 3 * page); }
  /// n elements ending at the upper fence.
  template <class T>
  T* ending_at_fence(index_t n) {
    return reinterpret_cast<T*>(base + 2 * page - sizeof(T) * std::size_t(n));
  }
  /// n elements starting at the lower fence.
  template <class T>
  T* starting_at_fence() {
    return reinterpret_cast<T*>(base + page);
  }
};

template <class T>
T value_for(int i) {
  return kfuse::from_float<T>(float(i % 50 + 1));
}

template <class V, class T>
void partial_load_store() {
  fenced_pages fence;
  for (int n = 0; n < V::lanes; ++n) {
    INFO("n = " << n << " type " << kfuse::elem_of<T>::name);
    for (int where = 0; where < 2; ++where) {
      T* p = where == 0 ? fence.ending_at_fence<T>(n) : fence.starting_at_fence<T>();
      for (int i = 0; i < n; ++i) p[i] = value_for<T>(i);
      // Load: the first n lanes hold the values, the others are zero; nothing past n is read
      // (a read would fault on the fence).
      const auto got = lanes_of(simd::load_partial<V>(p, n));
      for (int i = 0; i < V::lanes; ++i)
        REQUIRE(got[std::size_t(i)] == (i < n ? kfuse::to_float(value_for<T>(i)) : 0.f));
      // Store: the first n elements change, nothing past them is written.
      alignas(64) float src[V::lanes];
      for (int i = 0; i < V::lanes; ++i) src[i] = float(100 - i);
      if (where == 1) {
        // the bytes after n inside the page must keep their pattern
        std::memset(reinterpret_cast<unsigned char*>(p + n), 0xA5, 64 * sizeof(T));
      }
      simd::store_partial(p, simd::load<V>(src), n);
      for (int i = 0; i < n; ++i) REQUIRE(kfuse::to_float(p[i]) == float(100 - i));
      if (where == 1) {
        const auto* b = reinterpret_cast<const unsigned char*>(p + n);
        for (std::size_t k = 0; k < 64 * sizeof(T); ++k) REQUIRE(b[k] == 0xA5);
      }
    }
  }
  // Full loads and stores of exactly lanes elements ending at the fence are in bounds too.
  T* p = fence.ending_at_fence<T>(V::lanes);
  for (int i = 0; i < V::lanes; ++i) p[i] = value_for<T>(i);
  const auto got = lanes_of(simd::load<V>(p));
  for (int i = 0; i < V::lanes; ++i)
    REQUIRE(got[std::size_t(i)] == kfuse::to_float(value_for<T>(i)));
  simd::store(p, simd::load<V>(p));
}

struct err_stats {
  double max_abs = 0, max_rel = 0;
  float worst_x = 0;
};

template <class V, class F, class R>
err_stats measure(const std::vector<float>& x, F f, R ref) {
  const auto y = map<V>(x, f);
  err_stats s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = ref(double(x[i]));
    const double abs_err = std::fabs(double(y[i]) - want);
    const double rel_err = abs_err / std::max(std::fabs(want), 1e-300);
    if (!(abs_err <= s.max_abs)) {
      s.max_abs = abs_err;
      s.worst_x = x[i];
    }
    s.max_rel = std::max(s.max_rel, rel_err);
  }
  return s;
}

}  // namespace

/// An erf of vec's against std::erf in double on a dense grid over [-6, 6] (max abs error below
/// `bound`), and its limits: erf(+-0) = 0, erf(+-10) = erf(+-inf) = +-1 exactly, NaN stays NaN.
template <class Erf>
void check_erf(const char* name, Erf erf, double bound) {
  const auto x = grid(-6.0, 6.0, 1e-5);
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    const auto s = measure<V>(
        x, [&](V v) { return erf(v); }, [](double v) { return std::erf(v); });
    WARN(impl_of(b) << ": " << name << " max abs error " << s.max_abs << " at x = " << s.worst_x);
    CHECK(s.max_abs < bound);
    const auto lim =
        map<V>({0.f, -0.f, 10.f, -10.f, std::numeric_limits<float>::infinity(),
                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()},
               [&](V v) { return erf(v); });
    CHECK(lim[0] == 0.f);
    CHECK(lim[2] == 1.f);
    CHECK(lim[3] == -1.f);
    CHECK(lim[4] == 1.f);
    CHECK(lim[5] == -1.f);
    CHECK(std::isnan(lim[6]));
  });
}

// Measured max abs error of erf against std::erf in double on [-6, 6] (step 1e-5, g++ 12.2):
//   xsimd 8.1: 8.9e-8 (fma3+avx2, avx512bw), 9.0e-8 (sse4.2);
//   kfuse's own erf (simd/erf.hpp, the Highway impl): 1.57e-7 (AVX2, AVX3), 1.76e-7 (SSE4, no FMA);
//   generic arch (std::erf in float): 4.9e-8.
TEST_CASE("vec: erf against std::erf on a dense grid over [-6, 6]", "[simd][math]") {
  if (!cpu_can_run()) return;
  check_erf(
      "erf", [](auto v) { return simd::erf(v); }, 3e-7);
}

// erf_fast (simd/fast_math.hpp, GELU's erf): measured max abs error 3.1e-7 (Highway AVX3) and
// 3.7e-7 (xsimd avx512bw); the generic arch runs std::erf.
TEST_CASE("vec: erf_fast against std::erf on a dense grid over [-6, 6]", "[simd][math]") {
  if (!cpu_can_run()) return;
  check_erf(
      "erf_fast", [](auto v) { return simd::erf_fast(v); }, 4e-7);
}

TEST_CASE("vec: exp and tanh accuracy, overflow and underflow", "[simd][math]") {
  if (!cpu_can_run()) return;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    const auto name = impl_of(b);
    // exp: relative error over the whole finite, normal range of results
    const auto e = measure<V>(
        grid(-87.0, 88.0, 1e-3), [](V v) { return simd::exp(v); },
        [](double v) { return std::exp(v); });
    WARN(name << ": exp max rel error " << e.max_rel);
    CHECK(e.max_rel < 5e-7);
    const auto special =
        map<V>({100.f, -100.f, 89.f, -110.f, -200.f, inf, -inf, 0.f, -0.f, nan, 1e30f, -1e30f},
               [](V v) { return simd::exp(v); });
    CHECK(special[0] == inf);  // exp(100) overflows
    // e^-100 = 3.7e-44 is an f32 denormal: xsimd flushes it to 0, Highway returns the denormal;
    // both are within 4e-44 of the truth.
    CHECK(special[1] >= 0.f);
    CHECK(special[1] < 1e-43f);
    CHECK(special[2] == inf);  // e^89 > FLT_MAX
    CHECK(special[3] == 0.f);
    CHECK(special[4] == 0.f);
    CHECK(special[5] == inf);
    CHECK(special[6] == 0.f);
    CHECK(special[7] == 1.f);
    CHECK(special[8] == 1.f);
    CHECK(std::isnan(special[9]));
    CHECK(special[10] == inf);
    CHECK(special[11] == 0.f);
    // tanh: absolute error (relative near 0 is covered by the small-x grid)
    const auto t = measure<V>(
        grid(-10.0, 10.0, 1e-4), [](V v) { return simd::tanh(v); },
        [](double v) { return std::tanh(v); });
    const auto t_small = measure<V>(
        grid(-1e-2, 1e-2, 1e-7), [](V v) { return simd::tanh(v); },
        [](double v) { return std::tanh(v); });
    WARN(name << ": tanh max abs error " << t.max_abs << ", max rel error near 0 "
              << t_small.max_rel);
    CHECK(t.max_abs < 3e-7);
    CHECK(t_small.max_rel < 5e-7);
    const auto th =
        map<V>({20.f, -20.f, 1e30f, -1e30f, inf, -inf, 0.f}, [](V v) { return simd::tanh(v); });
    CHECK(th[0] == 1.f);
    CHECK(th[1] == -1.f);
    CHECK(th[2] == 1.f);
    CHECK(th[3] == -1.f);
    CHECK(th[4] == 1.f);
    CHECK(th[5] == -1.f);
    CHECK(th[6] == 0.f);
  });
}

TEST_CASE("vec: partial load / store never touch memory past n", "[simd][memory]") {
  if (!cpu_can_run()) return;
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    partial_load_store<V, float>();
    partial_load_store<V, kfuse::bf16_t>();
    partial_load_store<V, kfuse::f16_t>();
    partial_load_store<V, std::int8_t>();
    partial_load_store<V, std::uint8_t>();
  });
}

TEST_CASE("vec: load_even / load_odd deinterleave exactly 2 x lanes floats", "[simd][memory]") {
  if (!cpu_can_run()) return;
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    constexpr int L = V::lanes;
    fenced_pages fence;
    // The 2L floats end at the fence: a read past them would fault.
    float* p = fence.ending_at_fence<float>(2 * L);
    for (int i = 0; i < 2 * L; ++i) p[i] = float(3 * i + 1);
    const auto even = lanes_of(simd::load_even<V>(p)), odd = lanes_of(simd::load_odd<V>(p));
    for (int i = 0; i < L; ++i) {
      REQUIRE(even[std::size_t(i)] == float(3 * (2 * i) + 1));
      REQUIRE(odd[std::size_t(i)] == float(3 * (2 * i + 1) + 1));
    }
  });
}

TEST_CASE("vec: even_lanes / odd_lanes / next_lane (stride-2 taps) pick the right lanes",
          "[simd][ops]") {
  if (!cpu_can_run()) return;
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    if constexpr (simd::has_partial_f32<typename V::impl>) {
      constexpr int L = V::lanes;
      std::vector<float> x(std::size_t(3 * L));
      for (int i = 0; i < 3 * L; ++i) x[std::size_t(i)] = float(7 * i - 5);
      const V a = simd::load<V>(x.data()), hi = simd::load<V>(x.data() + L),
              c = simd::load<V>(x.data() + 2 * L);
      const auto even = lanes_of(simd::even_lanes(a, hi)), odd = lanes_of(simd::odd_lanes(a, hi));
      const auto next = lanes_of(simd::next_lane(a, c));
      for (int i = 0; i < L; ++i) {
        REQUIRE(even[std::size_t(i)] == x[std::size_t(2 * i)]);
        REQUIRE(odd[std::size_t(i)] == x[std::size_t(2 * i + 1)]);
        REQUIRE(next[std::size_t(i)] == x[std::size_t(i + 1 < L ? i + 1 : 2 * L)]);  // c's lane 0
      }
    }
  });
}

// store_dot / store_dot_pairs (a dot product's bf16 operands): every normal value, infinity and
// NaN as the bit-exact scalar rounding (ties both ways, values rounding into the next binade);
// a denormal either rounded so or flushed to a zero of its sign (vcvtneps2bf16, AVX512-BF16);
// pairs interleaved even / odd.
TEST_CASE("vec: store_dot and store_dot_pairs round like the scalar bf16 conversion",
          "[simd][memory]") {
  if (!cpu_can_run()) return;
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    constexpr int L = V::lanes;
    std::mt19937 rng(5);
    // whole blocks of 2L values, room for the specials at every second element
    std::vector<float> x(std::size_t(2 * L) * std::size_t(std::max(4, 32 / L)));
    fill_random(x.data(), index_t(x.size()), rng, -100.f, 100.f);
    const std::uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3fffffffu,
                                      0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                      0x80000000u, 0x00000001u, 0x00408000u, 0x80400000u};
    for (std::size_t i = 0; i < std::size(specials); ++i) std::memcpy(&x[i * 2], &specials[i], 4);
    const auto agrees = [](float v, kfuse::bf16_t got) {
      const kfuse::bf16_t want = kfuse::from_float<kfuse::bf16_t>(v);
      if (std::isnan(v)) return std::isnan(kfuse::to_float(got));
      if (got.bits == want.bits) return true;
      // a denormal flushed to zero, sign kept
      return std::fpclassify(v) == FP_SUBNORMAL && (got.bits & 0x7fffu) == 0 &&
             std::signbit(v) == bool(got.bits & 0x8000u);
    };
    std::vector<kfuse::bf16_t> one(x.size()), two(x.size());
    for (std::size_t i = 0; i < x.size(); i += L) simd::store_dot(&one[i], simd::load<V>(&x[i]));
    for (std::size_t i = 0; i < x.size(); i += 2 * L)
      simd::store_dot_pairs(&two[i], simd::load<V>(&x[i]), simd::load<V>(&x[i + L]));
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO(impl_of(b) << " x[" << i << "] = " << x[i]);
      CHECK(agrees(x[i], one[i]));
      // pairs: element 2j of a block is lane j of the first vector, 2j + 1 lane j of the second
      const std::size_t block = i / (2 * L) * (2 * L), j = (i - block) / 2;
      const float src = x[block + j + ((i - block) % 2 ? std::size_t(L) : 0)];
      CHECK(agrees(src, two[i]));
    }
  });
}

TEST_CASE("vec: round_even ties, select, min, max, arithmetic", "[simd][ops]") {
  if (!cpu_can_run()) return;
  each_backend([&](auto b) {
    using V = simd::vec_for<test_arch, decltype(b)>;
    const std::vector<float> ties{-3.5f,       -2.5f,       -1.5f, -0.5f, 0.5f,  1.5f,
                                  2.5f,        3.5f,        4.5f,  -4.5f, 1e20f, 8388607.5f,
                                  -8388607.5f, 0.49999997f, 2.6f,  -2.6f, 0.f,   -0.f};
    const std::vector<float> want{-4.f, -2.f,  -2.f,      -0.f,       0.f, 2.f, 2.f,  4.f, 4.f,
                                  -4.f, 1e20f, 8388608.f, -8388608.f, 0.f, 3.f, -3.f, 0.f, -0.f};
    const auto r = map<V>(ties, [](V v) { return simd::round_even(v); });
    for (std::size_t i = 0; i < ties.size(); ++i) {
      INFO("round_even(" << ties[i] << ")");
      CHECK(r[i] == want[i]);
      CHECK(std::signbit(r[i]) == std::signbit(want[i]));
    }
    // lane-wise select / min / max / compare against the obvious scalar answers
    std::vector<float> a(V::lanes), c(V::lanes);
    for (int i = 0; i < V::lanes; ++i) {
      a[std::size_t(i)] = float(i) - 2.f;
      c[std::size_t(i)] = float((i * 7) % 5) - 2.f;
    }
    const V va = simd::load<V>(a.data()), vc = simd::load<V>(c.data());
    const auto mn = lanes_of(simd::min(va, vc)), mx = lanes_of(simd::max(va, vc));
    const auto lt = lanes_of(simd::select(va < vc, V(1.f), V(0.f)));
    const auto le = lanes_of(simd::select(va <= vc, V(1.f), V(0.f)));
    const auto gt = lanes_of(simd::select(va > vc, va, vc));
    const auto ge = lanes_of(simd::select(va >= vc, V(1.f), V(0.f)));
    const auto cl = lanes_of(simd::clamp(va, V(-1.f), V(1.5f)));
    const auto fm = lanes_of(simd::fma(va, vc, V(0.5f)));
    const auto ar = lanes_of((va + vc) * V(2.f) - va / V(4.f));
    const auto ab = lanes_of(simd::abs(-va));
    for (std::size_t i = 0; i < std::size_t(V::lanes); ++i) {
      INFO("lane " << i << " a=" << a[i] << " c=" << c[i]);
      CHECK(mn[i] == std::min(a[i], c[i]));
      CHECK(mx[i] == std::max(a[i], c[i]));
      CHECK(lt[i] == (a[i] < c[i] ? 1.f : 0.f));
      CHECK(le[i] == (a[i] <= c[i] ? 1.f : 0.f));
      CHECK(gt[i] == (a[i] > c[i] ? a[i] : c[i]));
      CHECK(ge[i] == (a[i] >= c[i] ? 1.f : 0.f));
      CHECK(cl[i] == std::min(std::max(a[i], -1.f), 1.5f));
      CHECK(fm[i] == std::fma(a[i], c[i], 0.5f));
      CHECK(ar[i] == (a[i] + c[i]) * 2.f - a[i] / 4.f);
      CHECK(ab[i] == std::fabs(a[i]));
    }
#if KFUSE_X86 || KFUSE_TIER == KFUSE_TIER_GENERIC
    // NaN in min / max: the second operand wins (minps / maxps), on every x86 impl and scalar.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(lanes_of(simd::max(V(nan), V(0.f)))[0] == 0.f);
    CHECK(std::isnan(lanes_of(simd::max(V(0.f), V(nan)))[0]));
    CHECK(lanes_of(simd::min(V(nan), V(3.f)))[0] == 3.f);
    CHECK(std::isnan(lanes_of(simd::min(V(3.f), V(nan)))[0]));
#endif
  });
}

TEST_CASE("vec: the impl names the backend and the width matches the arch", "[simd]") {
  each_backend([&](auto b) {
    using B = decltype(b);
    using V = simd::vec_for<test_arch, B>;
    const std::string name = simd::impl_name<test_arch, B>();
    if constexpr (std::is_same_v<test_arch, kfuse::arch::generic>) {
      CHECK(name == "scalar");
      CHECK(V::lanes == 1);
    } else {
      CHECK(V::lanes * 4 == test_arch::vector_bytes);
      CHECK(name.rfind(std::is_same_v<B, kfuse::backend::hwy> ? "hwy:" : "xsimd:", 0) == 0);
    }
    WARN(test_arch::name << " / " << B::name << ": " << name << ", " << V::lanes << " lanes");
  });
}
