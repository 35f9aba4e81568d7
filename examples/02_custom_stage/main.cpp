// 02_custom_stage: a user-defined stage fused with built-in ones.
//
// A stage is a small aggregate with one templated operator() written on kfuse::simd ops; the
// same body serves every arch and backend (and the scalar generic arch). Two user stages here:
//   squared_relu   y = max(x, 0)^2                       (no parameters)
//   channel_gate   y = x * sigmoid(gate[c])              (a per-channel parameter, read through
//                                                          the lane context the kernel passes)
// fused as  scale -> squared_relu -> channel_gate -> bias -> hardswish  on an NHWC tensor, f32
// in, f32 out, and checked against a plain double loop.
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "common/expect.hpp"

/// y = max(x, 0)^2 (the "squared ReLU" of Primer).
struct squared_relu {
  static constexpr std::string_view name{"squared_relu"};  // optional: used in error messages
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    const V r = kfuse::simd::max(x, V(0.f));
    return r * r;
  }
};

/// y = x * sigmoid(gate[c]): a learned per-channel gate.
struct channel_gate {
  static constexpr std::string_view name{"channel_gate"};
  static constexpr bool needs_channel = true;  // eltwise then requires a tensor with a layout
  static constexpr int cost = 8;
  std::span<const float> gate;
  template <class V, class Ctx>
  V operator()(V x, const Ctx& ctx) const {
    const V g = ctx.channel_param(gate.data());  // gate[c] of every lane
    return x / (V(1.f) + kfuse::simd::exp(-g));
  }
  // Optional: checked before the kernel runs; c.fail() throws kfuse::error naming this stage.
  template <class Check>
  void validate(const Check& c) const {
    c.expect_per_channel(kfuse::index_t(gate.size()), "gates");
  }
};

namespace {

constexpr kfuse::dims4 dims{1, 40, 17, 19};  // N, C, H, W (odd sizes: exercises the tails)
constexpr float x_scale = 0.8f;

double reference(double x, double gate, double bias) {
  double y = x * double(x_scale);
  y = std::max(y, 0.0);
  y = y * y;
  y = y / (1.0 + std::exp(-gate));
  y = y + bias;
  return y * std::min(std::max(y + 3.0, 0.0), 6.0) / 6.0;
}

struct outcome {
  std::string impl;
  double checksum = 0;
  double max_err = 0;
};

template <class A, class B>
outcome run(const std::vector<float>& x, const std::vector<float>& gate,
            const std::vector<float>& bias, const std::vector<double>& ref) {
  std::vector<float> y(x.size(), -1.f);
  const kfuse::epilogue<kfuse::scale, squared_relu, channel_gate, kfuse::bias, kfuse::hardswish> ep{
      {x_scale}, {}, {gate}, {bias}, {}};
  const kfuse::run_info info = kfuse::eltwise<A, B>(kfuse::view<kfuse::nhwc>(x.data(), dims),
                                                    kfuse::view<kfuse::nhwc>(y.data(), dims), ep);
  outcome o;
  o.impl = info.impl;
  for (std::size_t i = 0; i < y.size(); ++i) {
    o.checksum += double(y[i]);
    // Relative error, with an absolute floor near zero.
    const double err = std::fabs(double(y[i]) - ref[i]) / std::max(1.0, std::fabs(ref[i]));
    o.max_err = std::max(o.max_err, err);
  }
  return o;
}

}  // namespace

int main() {
  bool ok = example::check_variant();

  const std::size_t n = std::size_t(kfuse::numel(dims));
  std::vector<float> x(n), gate(std::size_t(dims.c)), bias(std::size_t(dims.c));
  example::fill(x.data(), n, -2.f, 3.f, 1234);
  example::fill(gate.data(), gate.size(), -4.f, 4.f, 99);
  example::fill(bias.data(), bias.size(), -1.f, 1.f, 5);

  std::vector<double> ref(n);
  double ref_checksum = 0, ref_magnitude = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = i % std::size_t(dims.c);  // NHWC: the channel is the fastest axis
    ref[i] = reference(double(x[i]), double(gate[c]), double(bias[c]));
    ref_checksum += ref[i];
    ref_magnitude += std::max(1.0, std::fabs(ref[i]));
  }

  std::vector<outcome> runs;
  runs.push_back(run<kfuse::arch::native, kfuse::backend::xsimd>(x, gate, bias, ref));
#if KFUSE_WITH_HWY
  runs.push_back(run<kfuse::arch::native, kfuse::backend::hwy>(x, gate, bias, ref));
#endif
  runs.push_back(run<kfuse::arch::generic, kfuse::backend::xsimd>(x, gate, bias, ref));

  // A wrong parameter count is reported before anything runs, naming the user's stage.
  bool threw = false;
  try {
    std::vector<float> y(n);
    const std::vector<float> short_gate(3, 0.f);
    kfuse::eltwise(kfuse::view<kfuse::nhwc>(x.data(), dims),
                   kfuse::view<kfuse::nhwc>(y.data(), dims),
                   kfuse::epilogue<channel_gate>{{short_gate}});
  } catch (const kfuse::error& e) {
    threw = std::string(e.what()).find("channel_gate") != std::string::npos;
    std::printf("bad gate count rejected: %s\n", e.what());
  }
  if (!threw) {
    std::printf("MISMATCH: a wrong gate count was not rejected naming the stage\n");
    ok = false;
  }

  constexpr double tol = 1e-5;  // f32 arithmetic and vector exp against double
  std::printf("tensor: NHWC %lldx%lldx%lldx%lld f32 -> f32, %zu elements\n", (long long)dims.n,
              (long long)dims.c, (long long)dims.h, (long long)dims.w, n);
  std::printf("chain: scale -> squared_relu* -> channel_gate* -> bias -> hardswish (*: user)\n");
  std::printf("reference checksum %.3f\n", ref_checksum);
  std::printf("%-22s %14s %10s  %s\n", "impl", "checksum", "max err", "ok");
  for (const outcome& o : runs) {
    const bool good = o.max_err <= tol;
    ok = ok && good;
    std::printf("%-22s %14.3f %10.2e  %s\n", o.impl.c_str(), o.checksum, o.max_err,
                good ? "yes" : "NO");
  }
  // Every element is within tol (relative, floor 1) of the reference, so two builds' sums are
  // within 2 * tol * sum(max(1, |ref|)) of each other.
  std::printf("checksum: %.3f\n", runs.front().checksum);
  std::printf("checksum tolerance: %.3f\n", 2 * tol * ref_magnitude);
  std::printf("result: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
