// A consumer's custom fused op: its own stage between kfuse's built-in ones,
//   y = quantize<i8>(gelu_tanh(softclip(scale(x))))
// run through kfuse::eltwise for the arch this TU is built for and for arch::generic, and checked
// against a double-precision reference. Returns 0 when every value matches.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <kfuse/kfuse.hpp>
#include <string>
#include <vector>

namespace consumer {

/// The consumer's own stage: y = limit * x / (limit + |x|), a soft clip to (-limit, limit).
struct softclip {
  float limit = 3.f;
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    return V(limit) * x / (V(limit) + kfuse::simd::abs(x));
  }
};

using fused_op =
    kfuse::epilogue<kfuse::scale, softclip, kfuse::gelu_tanh, kfuse::quantize<kfuse::i8>>;

double reference(double x, double s, double limit, double qscale, int zp) {
  const double a = x * s;
  const double c = limit * a / (limit + std::fabs(a));
  const double g = 0.5 * c * (1.0 + std::tanh(0.7978845608028654 * (c + 0.044715 * c * c * c)));
  return std::fmin(127.0, std::fmax(-128.0, std::nearbyint(g / qscale) + zp));
}

}  // namespace consumer

int main() {
  const long n = 4099;
  const float s = 1.7f, limit = 2.5f, qscale = 0.025f;
  const int zp = -5;
  std::vector<float> x(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) x[std::size_t(i)] = -5.f + 10.f * float(i) / float(n - 1);
  std::vector<std::int8_t> y(x.size()), yg(x.size());

  const consumer::fused_op op{{s}, {limit}, {}, {{qscale, zp}}};
  const kfuse::run_info info = kfuse::eltwise(x.data(), y.data(), n, op);
  const kfuse::run_info ginfo = kfuse::eltwise<kfuse::arch::generic>(x.data(), yg.data(), n, op);
  std::printf("kfuse %d.%d.%d: fused op ran on arch %s (%s), generic on %s\n", kfuse::version_major,
              kfuse::version_minor, kfuse::version_patch, std::string(info.arch).c_str(), info.impl,
              std::string(ginfo.arch).c_str());

  int bad = 0;
  if (info.arch != kfuse::compiled_arch()) {
    std::printf("FAILED: ran on %s, but this TU is built for %s\n", std::string(info.arch).c_str(),
                std::string(kfuse::compiled_arch()).c_str());
    ++bad;
  }
  for (long i = 0; i < n && bad < 10; ++i) {
    const double ref = consumer::reference(x[std::size_t(i)], s, limit, qscale, zp);
    // One step of int8 for values that land next to a rounding tie.
    if (std::fabs(y[std::size_t(i)] - ref) > 1 || std::fabs(yg[std::size_t(i)] - ref) > 1) {
      std::printf("FAILED: x = %g: got %d (generic %d), reference %g\n", x[std::size_t(i)],
                  int(y[std::size_t(i)]), int(yg[std::size_t(i)]), ref);
      ++bad;
    }
  }
  std::printf("%s\n", bad ? "FAILED" : "OK: the fused op matches the reference");
  return bad ? 1 : 0;
}
