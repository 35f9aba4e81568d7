// 01_eltwise: one fused pass scale -> bias -> relu -> gelu_tanh -> quantize<i8> over an NCHW
// tensor, run with every backend this build has, checked against a plain double loop.
//
//   y[n,c,h,w] = quantize_i8( gelu_tanh( relu( x * s + b[c] ) ) )
//
// The values never leave the registers between the stages: one load of f32, one store of i8.
// Prints the xsimd arch and Highway target this build variant got (and checks them against
// KFUSE_EXPECT_XSIMD / KFUSE_EXPECT_HWY when given), a summary and a checksum that is the same,
// within a few units, on every variant. Exits non-zero on any mismatch.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/expect.hpp"

namespace {

constexpr kfuse::dims4 dims{2, 24, 28, 28};  // N, C, H, W
constexpr float x_scale = 1.25f;
constexpr kfuse::quant_params q_out{0.025f, -20};

// The same chain in double, one element at a time.
std::int8_t reference(double x, double bias) {
  double y = x * double(x_scale) + bias;
  y = std::max(y, 0.0);
  const double u = 0.7978845608028654 * (y + 0.044715 * y * y * y);
  y = 0.5 * y * (1.0 + std::tanh(u));
  double q = std::nearbyint(y / double(q_out.scale)) + q_out.zero_point;  // ties to even
  q = std::min(127.0, std::max(-128.0, q));
  return std::int8_t(q);
}

struct outcome {
  std::string impl;
  long long checksum = 0;
  int max_diff = 0;
  long off_by_one = 0;
};

// Runs the fused chain with arch A and backend B and compares every element with `ref`.
template <class A, class B>
outcome run(const std::vector<float>& x, const std::vector<float>& bias,
            const std::vector<std::int8_t>& ref) {
  std::vector<std::int8_t> y(x.size(), std::int8_t(99));
  const kfuse::epilogue<kfuse::scale, kfuse::bias, kfuse::relu, kfuse::gelu_tanh,
                        kfuse::quantize<kfuse::i8>>
      ep{{x_scale}, {bias}, {}, {}, {q_out}};
  const kfuse::run_info info = kfuse::eltwise<A, B>(kfuse::view<kfuse::nchw>(x.data(), dims),
                                                    kfuse::view<kfuse::nchw>(y.data(), dims), ep);
  outcome o;
  o.impl = info.impl;
  for (std::size_t i = 0; i < y.size(); ++i) {
    o.checksum += y[i];
    const int d = std::abs(int(y[i]) - int(ref[i]));
    o.max_diff = std::max(o.max_diff, d);
    o.off_by_one += d == 1;
  }
  return o;
}

}  // namespace

int main() {
  bool ok = example::check_variant();

  const std::size_t n = std::size_t(kfuse::numel(dims));
  std::vector<float> x(n), bias(std::size_t(dims.c));
  example::fill(x.data(), n, -3.f, 3.f, 42);
  example::fill(bias.data(), bias.size(), -0.5f, 0.5f, 7);

  std::vector<std::int8_t> ref(n);
  const std::size_t plane = std::size_t(dims.h * dims.w);
  long long ref_checksum = 0;
  int qmin = 127, qmax = -128;
  long saturated = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = (i / plane) % std::size_t(dims.c);
    ref[i] = reference(double(x[i]), double(bias[c]));
    ref_checksum += ref[i];
    qmin = std::min(qmin, int(ref[i]));
    qmax = std::max(qmax, int(ref[i]));
    saturated += ref[i] == 127;
  }

  std::vector<outcome> runs;
  runs.push_back(run<kfuse::arch::native, kfuse::backend::xsimd>(x, bias, ref));
#if KFUSE_WITH_HWY
  runs.push_back(run<kfuse::arch::native, kfuse::backend::hwy>(x, bias, ref));
#endif
  runs.push_back(run<kfuse::arch::generic, kfuse::backend::xsimd>(x, bias, ref));

  // Float rounding differs between backends only at the .5 boundaries of the quantizer: allow
  // one unit there, on at most 1 element in 1000.
  const long max_off_by_one = long(n / 1000);
  std::printf("tensor: NCHW %lldx%lldx%lldx%lld f32 -> i8, %zu elements\n", (long long)dims.n,
              (long long)dims.c, (long long)dims.h, (long long)dims.w, n);
  std::printf("reference: q in [%d, %d], %ld saturated at 127, checksum %lld\n", qmin, qmax,
              saturated, ref_checksum);
  std::printf("%-22s %10s %9s %11s  %s\n", "impl", "checksum", "max|diff|", "off-by-one", "ok");
  for (const outcome& o : runs) {
    const bool good = o.max_diff <= 1 && o.off_by_one <= max_off_by_one;
    ok = ok && good;
    std::printf("%-22s %10lld %9d %11ld  %s\n", o.impl.c_str(), o.checksum, o.max_diff,
                o.off_by_one, good ? "yes" : "NO");
  }
  // Two builds may each be off by one unit on up to max_off_by_one elements, in either direction.
  std::printf("checksum: %lld\n", runs.front().checksum);
  std::printf("checksum tolerance: %ld\n", 2 * max_off_by_one);
  std::printf("result: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
