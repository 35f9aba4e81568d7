#pragma once
// Shared test helpers: the arch under test, random data, poisoned buffers, tolerances and the
// double-precision reference of every built-in stage.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kfuse/kfuse.hpp"

namespace kt {

using kfuse::index_t;
/// Each per-arch test executable is compiled with one arch's flags; this is that arch.
using test_arch = kfuse::arch::native;

/// Returns false (and says why) when this CPU cannot run the arch under test.
inline bool cpu_can_run() {
  if (kfuse::cpu_supports<test_arch>()) return true;
  WARN("CPU lacks " << test_arch::name << ": skipped");
  return false;
}

/// Turns the AMX tile path off (the vector kernels run) while it lives, then back to what it was.
struct amx_off {
  bool was;
  explicit amx_off(bool off = true) : was(kfuse::detail::amx_switch().load()) {
    if (off) kfuse::set_amx_enabled(false);
  }
  ~amx_off() { kfuse::set_amx_enabled(was); }
  amx_off(const amx_off&) = delete;
  amx_off& operator=(const amx_off&) = delete;
};

/// Every backend this TU can run for the arch under test.
template <class F>
void for_each_backend(F&& f) {
  if constexpr (kfuse::simd::backend_available<test_arch, kfuse::backend::xsimd>) {
    SECTION("xsimd") { f(kfuse::backend::xsimd{}); }
  }
  if constexpr (kfuse::simd::backend_available<test_arch, kfuse::backend::hwy>) {
    SECTION("hwy") { f(kfuse::backend::hwy{}); }
  }
}

/// Lengths that hit empty, single, vector width +- 1, several vectors and a long run.
inline std::vector<index_t> test_lengths(int lanes) {
  std::vector<index_t> v{
      0,   1,   2, index_t(lanes) - 1, index_t(lanes), index_t(lanes) + 1, 2 * index_t(lanes) + 3,
      257, 3001};
  std::vector<index_t> out;
  for (index_t n : v)
    if (n >= 0 && (out.empty() || out.back() != n)) out.push_back(n);
  return out;
}

/// A buffer with a guard zone on both sides, a start that is element- but not vector-aligned,
/// and a fill pattern; check_guards() catches out-of-bounds writes.
template <class T>
struct guarded {
  static constexpr int guard = 64;
  std::vector<unsigned char> bytes;
  T* data;
  index_t n;
  unsigned char pattern;
  guarded(index_t count, unsigned char poison, int misalign_elems = 1)
      : bytes(sizeof(T) * std::size_t(count + 2 * guard + 64) + 128), n(count), pattern(poison) {
    std::memset(bytes.data(), poison, bytes.size());
    auto base = reinterpret_cast<std::uintptr_t>(bytes.data()) + guard * sizeof(T);
    base = (base + 63) / 64 * 64 + sizeof(T) * std::size_t(misalign_elems);
    data = reinterpret_cast<T*>(base);
  }
  bool guards_intact() const {
    const auto* b = reinterpret_cast<const unsigned char*>(data);
    for (std::size_t i = 1; i <= guard; ++i)
      if (b[-std::ptrdiff_t(i)] != pattern) return false;
    for (std::size_t i = 0; i < guard; ++i)
      if (b[sizeof(T) * std::size_t(n) + i] != pattern) return false;
    return true;
  }
};

/// Random values of storage type T: floats uniform in [lo, hi], integers over their range.
template <class T>
void fill_random(T* p, index_t n, std::mt19937& rng, float lo = -6.f, float hi = 6.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  for (index_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>)
      p[i] = T(std::uniform_int_distribution<int>(std::numeric_limits<T>::min(),
                                                  std::numeric_limits<T>::max())(rng));
    else
      p[i] = kfuse::from_float<T>(u(rng));
  }
}

/// Spacing of representable values of storage type T around v (one unit in the last place).
template <class T>
double ulp(double v) {
  const double a = std::max(std::fabs(v), 1e-30);
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  if constexpr (std::is_same_v<T, kfuse::bf16_t>)
    return std::ldexp(1.0, std::max(e - 8, -133));
  else if constexpr (std::is_same_v<T, kfuse::f16_t>)
    return std::ldexp(1.0, std::max(e - 11, -24));
  else
    return std::ldexp(1.0, std::max(e - 24, -149));
}

/// Tolerance of an output of storage type T against the double reference `ref`:
///  f32: 1e-5 relative + 1e-6 absolute (exp/tanh/erf are accurate to a few f32 ulps and
///       the absolute part covers results near zero such as gelu(-3));
///  f16, bf16: one unit in the last place of the output type (the f32 computation may round
///       a near-tie the other way) on top of the f32 error;
///  i8, u8: one quantization step (the same near-tie argument).
template <class T>
double tolerance(double ref) {
  const double f32_err = 1e-5 * std::fabs(ref) + 1e-6;
  if constexpr (std::is_integral_v<T>)
    return 1.0;
  else if constexpr (std::is_same_v<T, float>)
    return f32_err;
  else
    return ulp<T>(ref) + f32_err;
}

/// The value an output of type T must hold for the real-valued result `ref` (round to T).
template <class T>
double representable(double ref) {
  if constexpr (std::is_same_v<T, float>)
    return ref;
  else
    return double(kfuse::to_float(kfuse::from_float<T>(float(ref))));
}

// ---------------------------------------------------------------- double reference of stages
struct ref_ctx {
  index_t i;  // flat index
  index_t c;  // channel
};

inline double ref_stage(const kfuse::scale& s, double x, ref_ctx) { return x * s.value; }
inline double ref_stage(const kfuse::bias& s, double x, ref_ctx c) { return x + s.values[c.c]; }
inline double ref_stage(const kfuse::relu&, double x, ref_ctx) { return x > 0 ? x : 0; }
inline double ref_stage(const kfuse::leaky_relu& s, double x, ref_ctx) {
  return x > 0 ? x : s.alpha * x;
}
inline double ref_stage(const kfuse::clamp& s, double x, ref_ctx) {
  return std::min<double>(std::max<double>(x, s.lo), s.hi);
}
inline double ref_stage(const kfuse::sigmoid&, double x, ref_ctx) {
  return 1.0 / (1.0 + std::exp(-x));
}
inline double ref_stage(const kfuse::silu&, double x, ref_ctx) { return x / (1.0 + std::exp(-x)); }
inline double ref_stage(const kfuse::tanh&, double x, ref_ctx) { return std::tanh(x); }
inline double ref_stage(const kfuse::gelu_erf&, double x, ref_ctx) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
inline double ref_stage(const kfuse::gelu_tanh&, double x, ref_ctx) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double ref_stage(const kfuse::hardswish&, double x, ref_ctx) {
  return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
}
inline double ref_stage(const kfuse::hardsigmoid&, double x, ref_ctx) {
  return std::min(std::max(x / 6 + 0.5, 0.0), 1.0);
}
template <class E>
double ref_stage(const kfuse::add<E>& s, double x, ref_ctx c) {
  return x + kfuse::to_float(s.other[s.per_channel ? c.c : c.i]);
}
template <class E>
double ref_stage(const kfuse::mul<E>& s, double x, ref_ctx c) {
  return x * kfuse::to_float(s.other[s.per_channel ? c.c : c.i]);
}
template <class E>
double ref_stage(const kfuse::cast<E>&, double x, ref_ctx) {
  return representable<kfuse::storage_t<E>>(x);
}
inline double q_scale(const kfuse::quant_params& q, index_t c) {
  return q.scales.empty() ? q.scale : q.scales[c];
}
inline double q_zero(const kfuse::quant_params& q, index_t c) {
  return q.scales.empty() || q.zero_points.empty() ? q.zero_point : q.zero_points[c];
}
template <class E>
double ref_stage(const kfuse::quantize<E>& s, double x, ref_ctx c) {
  const double q = std::nearbyint(x / q_scale(s.q, c.c)) + q_zero(s.q, c.c);
  return std::min<double>(std::max<double>(q, kfuse::elem_traits<E>::min),
                          kfuse::elem_traits<E>::max);
}
inline double ref_stage(const kfuse::dequantize& s, double x, ref_ctx c) {
  return (x - q_zero(s.q, c.c)) * q_scale(s.q, c.c);
}
template <class E>
double ref_stage(const kfuse::requantize<E>& s, double x, ref_ctx c) {
  const double m = s.multipliers.empty() ? s.multiplier : s.multipliers[c.c];
  const double q = std::nearbyint(x * m) + s.zero_point;
  return std::min<double>(std::max<double>(q, kfuse::elem_traits<E>::min),
                          kfuse::elem_traits<E>::max);
}

template <class... S>
double ref_epilogue(const kfuse::epilogue<S...>& e, double x, ref_ctx c) {
  kfuse::for_each_stage(e, [&](const auto& s) { x = ref_stage(s, x, c); });
  return x;
}

/// A user stage for the fused-epilogue tests: y = x * x * 0.01 + x (written once on simd::vec),
/// with its double reference.
struct user_square {
  float k = 0.01f;
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    return kfuse::simd::fma(x * x, V(k), x);
  }
};
inline double ref_stage(const user_square& s, double x, ref_ctx) { return x * x * s.k + x; }

/// A user stage declared out of line: y = x + values[channel]. gemm / conv2d save their register
/// tile and call apply_tile once per tile (counted in `tile_calls`); kernels without a saved tile
/// call operator() per vector.
struct user_tile_bias {
  static constexpr bool out_of_line = true;
  const float* values = nullptr;
  std::atomic<long>* tile_calls = nullptr;
  template <class V, class Ctx>
  V operator()(V x, const Ctx& c) const {
    return x + c.channel_param(values);
  }
  template <class V, bool PerLane>
  void apply_tile(const kfuse::saved_tile& t) const {
    tile_calls->fetch_add(1, std::memory_order_relaxed);
    t.transform<V, PerLane>([&](V x, const auto& c) { return x + c.channel_param(values); });
  }
};
inline double ref_stage(const user_tile_bias& s, double x, ref_ctx c) { return x + s.values[c.c]; }

/// The prefix of simd::impl_name<test_arch, B>() ("scalar", "xsimd:", "hwy:"): what a kernel's
/// run_info names as its vector implementation.
template <class B>
constexpr std::string_view impl_prefix() {
  if constexpr (std::is_same_v<test_arch, kfuse::arch::generic>)
    return "scalar";
  else if constexpr (std::is_same_v<B, kfuse::backend::hwy>)
    return "hwy:";
  else
    return "xsimd:";
}

}  // namespace kt
