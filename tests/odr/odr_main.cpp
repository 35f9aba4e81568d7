// Links the x86-64-v2 and x86-64-v4 copies of odr_tu.cpp and asserts that each reports and runs
// its own arch, and that both compute the same values (checked against a double reference).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
struct kfuse_odr_result {
  const char* compiled_arch;
  const char* run_arch;
  const char* impl;
  const char* generic_impl;
};
const char* kfuse_odr_compiled_arch_v2();
const char* kfuse_odr_compiled_arch_v4();
kfuse_odr_result kfuse_odr_run_v2(const float*, std::int8_t*, float*, std::int8_t*, long, float);
kfuse_odr_result kfuse_odr_run_v4(const float*, std::int8_t*, float*, std::int8_t*, long, float);
}

static int failures = 0;
static void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}
static bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

int main() {
  const std::string v2 = kfuse_odr_compiled_arch_v2(), v4 = kfuse_odr_compiled_arch_v4();
  std::printf("v2 TU: kfuse::compiled_arch() = %s\nv4 TU: kfuse::compiled_arch() = %s\n",
              v2.c_str(), v4.c_str());
  expect(v2 == "sse4", "the -march=x86-64-v2 TU reports '" + v2 + "', expected 'sse4'");
  expect(v4 == "avx512", "the -march=x86-64-v4 TU reports '" + v4 + "', expected 'avx512'");

  __builtin_cpu_init();
  const bool has_v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const long n = 1000;  // not a multiple of any vector width: tails run too
  const float s = 1.5f;
  std::vector<float> x(n), y2(n), y4(n);
  std::vector<std::int8_t> q2(n), q4(n), g2(n), g4(n);
  for (long i = 0; i < n; ++i) x[i] = -4.f + 8.f * float(i) / float(n - 1);

  const kfuse_odr_result r2 = kfuse_odr_run_v2(x.data(), q2.data(), y2.data(), g2.data(), n, s);
  std::printf("v2 TU: run_info.arch = %s, impl = %s, generic impl = %s\n", r2.run_arch, r2.impl,
              r2.generic_impl);
  expect(std::string(r2.compiled_arch) == "sse4" && std::string(r2.run_arch) == "sse4",
         "v2 TU ran arch '" + std::string(r2.run_arch) + "'");
  expect(starts_with(r2.impl, "xsimd:sse4"), "v2 TU impl '" + std::string(r2.impl) + "'");
  expect(std::string(r2.generic_impl) == "scalar", "v2 TU generic impl");

  if (!has_v4) {
    std::printf("this CPU has no AVX-512: the v4 TU's kernels are not run\n");
  } else {
    const kfuse_odr_result r4 = kfuse_odr_run_v4(x.data(), q4.data(), y4.data(), g4.data(), n, s);
    std::printf("v4 TU: run_info.arch = %s, impl = %s, generic impl = %s\n", r4.run_arch, r4.impl,
                r4.generic_impl);
    expect(std::string(r4.compiled_arch) == "avx512" && std::string(r4.run_arch) == "avx512",
           "v4 TU ran arch '" + std::string(r4.run_arch) + "'");
    expect(starts_with(r4.impl, "xsimd:avx512"), "v4 TU impl '" + std::string(r4.impl) + "'");
    expect(std::string(r4.generic_impl) == "scalar", "v4 TU generic impl");
  }

  // Both TUs against a double reference (and the v2 TU's generic instantiation).
  for (long i = 0; i < n; ++i) {
    const double t = double(x[i]) * s + 0.25;
    const double gelu =
        0.5 * t * (1.0 + std::tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)));
    const double qref = std::fmin(127.0, std::fmax(-128.0, std::nearbyint(gelu / 0.02) + 3));
    const double u = double(x[i]) * s, silu = u / (1.0 + std::exp(-u));
    const double tol = 1e-5 * (1.0 + std::fabs(silu));
    expect(std::fabs(q2[i] - qref) <= 1, "v2 q[" + std::to_string(i) + "]");
    expect(std::fabs(g2[i] - qref) <= 1, "v2 generic q[" + std::to_string(i) + "]");
    expect(std::fabs(y2[i] - silu) <= tol, "v2 y[" + std::to_string(i) + "]");
    if (has_v4) {
      expect(std::fabs(q4[i] - qref) <= 1, "v4 q[" + std::to_string(i) + "]");
      expect(std::fabs(g4[i] - qref) <= 1, "v4 generic q[" + std::to_string(i) + "]");
      expect(std::fabs(y4[i] - silu) <= tol, "v4 y[" + std::to_string(i) + "]");
    }
    if (failures > 20) break;
  }
  std::printf("%s\n", failures ? "FAILED" : "OK");
  return failures ? 1 : 0;
}
