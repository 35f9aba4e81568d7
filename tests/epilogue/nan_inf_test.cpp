// NaN and Inf through every built-in stage: each row of the table in docs/robustness.md ("NaN
// and Inf") is checked here, on every backend of the arch under test and on arch::generic, in
// the body and the tail of a vector, for f32, f16 and bf16 storage and the int8 outputs.
#include <cfloat>

#include "support/test_support.hpp"

using namespace kt;
using kfuse::epilogue;

namespace {

constexpr float nan_v = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_v = std::numeric_limits<float>::infinity();

/// The special inputs, in the order of the table's columns.
constexpr float specials[] = {nan_v, inf_v, -inf_v, FLT_MAX, -FLT_MAX, 0.f, -0.f};
constexpr int n_specials = 7;

/// What a stage must return for an input: a value, NaN, or "tiny" (a number of magnitude below
/// 1e-27 and the sign given: gelu_tanh's clamped negative tail).
struct want {
  enum kind { value, nan, tiny_neg } k = value;
  float v = 0.f;
};
constexpr want V(float v) { return {want::value, v}; }
constexpr want NaN{want::nan, 0.f};
constexpr want TinyNeg{want::tiny_neg, 0.f};

struct row {
  const char* name;
  want w[n_specials];
};

bool matches(const want& w, float got) {
  switch (w.k) {
    case want::nan:
      return std::isnan(got);
    case want::tiny_neg:
      return got <= 0.f && got > -1e-27f;
    case want::value:
      if (std::isinf(w.v) || w.v == 0.f) return got == w.v;  // exact (the sign of 0 is free)
      return std::fabs(got - w.v) <= 1e-6f * std::fabs(w.v);
  }
  return false;
}

std::string show(const want& w) {
  if (w.k == want::nan) return "NaN";
  if (w.k == want::tiny_neg) return "-tiny";
  return std::to_string(w.v);
}

/// Runs stage S on arch A / backend B over a buffer holding the specials at lane 0, inside the
/// first vector and in the tail, and checks each against the row.
template <class A, class B, class In, class Out, class Ep, class Convert>
void check_row(const row& r, const Ep& ep, Convert to_out) {
  constexpr int L = kfuse::simd::vec_for<A, B>::lanes;
  const index_t n = 3 * L + 3;  // two whole vectors and a partial tail
  for (int s = 0; s < n_specials; ++s) {
    std::vector<In> x(static_cast<std::size_t>(n), kfuse::from_float<In>(0.5f));
    const index_t at[] = {0, L / 2, n - 1};
    for (index_t i : at) x[std::size_t(i)] = kfuse::from_float<In>(specials[s]);
    std::vector<Out> y(static_cast<std::size_t>(n));
    kfuse::eltwise<A, B>(x.data(), y.data(), n, ep);
    const want w = to_out(r.w[s], kfuse::to_float(x[0]));
    for (index_t i : at) {
      const float got = kfuse::to_float(y[std::size_t(i)]);
      const std::string impl(kfuse::simd::impl_name<A, B>());
      INFO(A::name << " " << impl << " " << r.name << "(" << specials[s] << ") at " << i << ": got "
                   << got << ", want " << show(w));
      CHECK(matches(w, got));
    }
  }
}

// clang-format off
// Columns: NaN, +inf, -inf, FLT_MAX, -FLT_MAX, +0, -0 (docs/robustness.md).
const row rows[] = {
    {"relu",        {NaN, V(inf_v), V(0),       V(FLT_MAX), V(0),        V(0), V(0)}},
    {"leaky_relu",  {NaN, V(inf_v), V(-inf_v),  V(FLT_MAX), V(-FLT_MAX * 0.01f), V(0), V(0)}},
    {"clamp",       {NaN, V(6),     V(0),       V(6),       V(0),        V(0), V(0)}},
    {"sigmoid",     {NaN, V(1),     V(0),       V(1),       V(0),        V(0.5f), V(0.5f)}},
    {"silu",        {NaN, V(inf_v), NaN,        V(FLT_MAX), V(0),        V(0), V(0)}},
    {"tanh",        {NaN, V(1),     V(-1),      V(1),       V(-1),       V(0), V(0)}},
    {"gelu_erf",    {NaN, V(inf_v), NaN,        V(FLT_MAX), V(0),        V(0), V(0)}},
    {"gelu_tanh",   {NaN, V(inf_v), TinyNeg,    V(FLT_MAX), TinyNeg,     V(0), V(0)}},
    {"hardswish",   {NaN, V(inf_v), NaN,        V(FLT_MAX), V(0),        V(0), V(0)}},
    {"hardsigmoid", {NaN, V(1),     V(0),       V(1),       V(0),        V(0.5f), V(0.5f)}},
    {"scale",       {NaN, V(inf_v), V(-inf_v),  V(inf_v),   V(-inf_v),   V(0), V(0)}},
};
// clang-format on

const row& find(std::string_view name) {
  for (const row& r : rows)
    if (name == r.name) return r;
  throw std::logic_error("no row");
}

/// Every float stage, f32 in and out.
template <class A, class B>
void check_float_stages() {
  auto id = [](want w, float) { return w; };
  check_row<A, B, float, float>(find("relu"), epilogue<kfuse::relu>{}, id);
  check_row<A, B, float, float>(find("leaky_relu"), epilogue<kfuse::leaky_relu>{{0.01f}}, id);
  check_row<A, B, float, float>(find("clamp"), epilogue<kfuse::clamp>{{0.f, 6.f}}, id);
  check_row<A, B, float, float>(find("sigmoid"), epilogue<kfuse::sigmoid>{}, id);
  check_row<A, B, float, float>(find("silu"), epilogue<kfuse::silu>{}, id);
  check_row<A, B, float, float>(find("tanh"), epilogue<kfuse::tanh>{}, id);
  check_row<A, B, float, float>(find("gelu_erf"), epilogue<kfuse::gelu_erf>{}, id);
  check_row<A, B, float, float>(find("gelu_tanh"), epilogue<kfuse::gelu_tanh>{}, id);
  check_row<A, B, float, float>(find("hardswish"), epilogue<kfuse::hardswish>{}, id);
  check_row<A, B, float, float>(find("hardsigmoid"), epilogue<kfuse::hardsigmoid>{}, id);
  check_row<A, B, float, float>(find("scale"), epilogue<kfuse::scale>{{2.f}}, id);
}

/// The storage types: f16 / bf16 in and out keep NaN and Inf (FLT_MAX becomes inf on the way
/// in: it is above both formats' largest finite value).
template <class A, class B, class T>
void check_storage() {
  auto stored = [](want w, float x_stored) {
    if (w.k != want::value) return w;
    (void)x_stored;
    return V(kfuse::to_float(kfuse::from_float<T>(w.v)));
  };
  row relu_stored = find("relu");
  relu_stored.w[3] = V(inf_v);  // FLT_MAX is stored as inf
  check_row<A, B, T, T>(relu_stored, epilogue<kfuse::relu>{}, stored);
  row clamp_stored = find("clamp");
  clamp_stored.w[3] = V(6);
  check_row<A, B, T, T>(clamp_stored, epilogue<kfuse::clamp>{{0.f, 6.f}}, stored);
}

/// quantize(NaN) stores the integer 0 (not the zero point: PyTorch's quint8 does the same);
/// +-inf and +-FLT_MAX saturate to the type's range.
template <class A, class B>
void check_quantize() {
  auto id = [](want w, float) { return w; };
  const row q_i8{"quantize<i8>", {V(0), V(127), V(-128), V(127), V(-128), V(3), V(3)}};
  check_row<A, B, float, std::int8_t>(q_i8, epilogue<kfuse::quantize<kfuse::i8>>{{{0.1f, 3}}}, id);
  const row q_u8{"quantize<u8>", {V(0), V(255), V(0), V(255), V(0), V(10), V(10)}};
  check_row<A, B, float, std::uint8_t>(q_u8, epilogue<kfuse::quantize<kfuse::u8>>{{{0.1f, 10}}},
                                       id);
  // cast<bf16> / cast<f16> keep NaN and Inf; FLT_MAX rounds to inf.
  const row c_bf16{"cast<bf16>", {NaN, V(inf_v), V(-inf_v), V(inf_v), V(-inf_v), V(0), V(0)}};
  check_row<A, B, float, kfuse::bf16_t>(c_bf16, epilogue<kfuse::cast<kfuse::bf16>>{}, id);
  check_row<A, B, float, kfuse::f16_t>(c_bf16, epilogue<kfuse::cast<kfuse::f16>>{}, id);
}

}  // namespace

TEST_CASE("NaN and Inf: every float stage follows the table on every backend", "[epilogue][nan]") {
  if (!cpu_can_run()) return;
  for_each_backend([&](auto b) {
    using B = decltype(b);
    check_float_stages<test_arch, B>();
    check_float_stages<kfuse::arch::generic, B>();
  });
}

TEST_CASE("NaN and Inf: f16 and bf16 storage, quantize and cast", "[epilogue][nan]") {
  if (!cpu_can_run()) return;
  for_each_backend([&](auto b) {
    using B = decltype(b);
    check_storage<test_arch, B, kfuse::bf16_t>();
    check_storage<test_arch, B, kfuse::f16_t>();
    check_quantize<test_arch, B>();
    check_quantize<kfuse::arch::generic, B>();
  });
}

TEST_CASE("NaN through a fused chain: relu, clamp and hardsigmoid after a bias",
          "[epilogue][nan]") {
  if (!cpu_can_run()) return;
  const std::vector<float> bias{1.f, -1.f, 0.5f};
  std::vector<float> x(3 * 37, 0.25f), y(x.size());
  x[5] = nan_v;
  x[40] = nan_v;
  kfuse::eltwise<test_arch>(kfuse::view<kfuse::nchw>(x.data(), {1, 3, 37, 1}),
                            kfuse::view<kfuse::nchw>(y.data(), {1, 3, 37, 1}),
                            epilogue<kfuse::bias, kfuse::relu, kfuse::clamp, kfuse::hardsigmoid>{
                                {std::span<const float>(bias)}, {}, {-1.f, 1.f}, {}});
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(y[i]) == std::isnan(x[i]));
}
