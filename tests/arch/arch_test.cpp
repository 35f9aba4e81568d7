// Arch detection and the runtime dispatcher (labels "ci;dispatch").
//  - cpu_supports<A>() agrees with the CPU flags Linux reports in /proc/cpuinfo, is monotonic
//    along "extends", and best_arch_name(arch::all{}) is the best arch the flags allow.
//  - kfuse::dispatch(arch::all{}, run_chain{}, io) runs the instantiation of the best arch (each
//    compiled in its own TU with that arch's flags), and every arch this CPU runs, called
//    directly, computes the same values as the generic arch.
// This TU is built with the build's default flags and sees only the declarations of the per-arch
// instantiations (arch/dispatch_chain.hpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "arch/dispatch_chain.hpp"
#include "kfuse/arch/dispatch.hpp"

namespace {

namespace arch = kfuse::arch;

/// The CPU flags of the first processor in /proc/cpuinfo (empty when unavailable).
std::set<std::string> cpuinfo_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  }
  return {};
}

/// What /proc/cpuinfo says about each kfuse x86 arch (the flags kfuse's tiers require).
template <class A>
bool cpuinfo_allows(const std::set<std::string>& f) {
  auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!f.count(n)) return false;
    return true;
  };
  bool ok = has({"sse4_2"});
  if constexpr (A::tier >= KFUSE_TIER_AVX2) ok = ok && has({"avx2", "fma", "f16c"});
  if constexpr (A::tier == KFUSE_TIER_AVX2_VNNI) ok = ok && has({"avx_vnni"});
  if constexpr (A::tier >= KFUSE_TIER_AVX512)
    ok = ok && has({"avx512f", "avx512bw", "avx512dq", "avx512vl"});
  if constexpr (A::tier >= KFUSE_TIER_AVX512_VNNI) ok = ok && has({"avx512_vnni"});
  if constexpr (A::tier >= KFUSE_TIER_AVX512_BF16) ok = ok && has({"avx512_bf16"});
  return ok;
}

template <class... A, class F>
void for_each_arch(arch::list<A...>, F&& f) {
  (f(A{}), ...);
}

std::vector<float> test_input(long n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) x[std::size_t(i)] = -6.f + 12.f * float((i * 37) % n) / float(n);
  return x;
}

struct outputs {
  std::vector<float> f, hwy;
  std::vector<std::int8_t> q;
  dt::chain_io io;
  outputs(const std::vector<float>& x, float scale) : f(x.size()), hwy(x.size()), q(x.size()) {
    io = {x.data(), long(x.size()), scale, f.data(), q.data(), hwy.data()};
  }
};

}  // namespace

#if defined(__x86_64__) && defined(__linux__)

TEST_CASE("cpu_supports agrees with /proc/cpuinfo", "[arch]") {
  const auto flags = cpuinfo_flags();
  REQUIRE(!flags.empty());
  CHECK(kfuse::cpu_supports<arch::generic>());
  for_each_arch(arch::all{}, [&](auto a) {
    using A = decltype(a);
    if constexpr (!std::is_same_v<A, arch::generic>) {
      INFO("arch " << A::name);
      CHECK(kfuse::cpu_supports<A>() == cpuinfo_allows<A>(flags));
    }
  });
  // This CI machine (Zen 5) has AVX512-BF16: if /proc/cpuinfo says so, kfuse must agree.
  if (flags.count("avx512_bf16")) CHECK(kfuse::cpu_supports<arch::avx512_bf16>());
}

TEST_CASE("cpu_supports is monotonic along 'extends'", "[arch]") {
  // A CPU that runs an arch runs every arch it extends.
  if (kfuse::cpu_supports<arch::avx512_bf16>()) CHECK(kfuse::cpu_supports<arch::avx512_vnni>());
  if (kfuse::cpu_supports<arch::avx512_vnni>()) CHECK(kfuse::cpu_supports<arch::avx512>());
  if (kfuse::cpu_supports<arch::avx512>()) CHECK(kfuse::cpu_supports<arch::avx2>());
  if (kfuse::cpu_supports<arch::avx2_vnni>()) CHECK(kfuse::cpu_supports<arch::avx2>());
  if (kfuse::cpu_supports<arch::avx2>()) CHECK(kfuse::cpu_supports<arch::sse4>());
  STATIC_REQUIRE(std::is_base_of_v<arch::avx512_vnni, arch::avx512_bf16>);
  STATIC_REQUIRE(std::is_base_of_v<arch::avx512, arch::avx512_vnni>);
  STATIC_REQUIRE(std::is_base_of_v<arch::avx2, arch::avx512>);
  STATIC_REQUIRE(std::is_base_of_v<arch::avx2, arch::avx2_vnni>);
  // AVX-512 VNNI does not imply the VEX AVX-VNNI (Ice Lake): avx512 does not extend avx2_vnni.
  STATIC_REQUIRE(!std::is_base_of_v<arch::avx2_vnni, arch::avx512>);
  STATIC_REQUIRE(std::is_base_of_v<arch::sse4, arch::avx2>);
  STATIC_REQUIRE(std::is_base_of_v<arch::generic, arch::sse4>);
}

TEST_CASE("best_arch_name is the first arch of the list the CPU supports", "[arch]") {
  const auto flags = cpuinfo_flags();
  std::string expected;
  for_each_arch(arch::all{}, [&](auto a) {
    using A = decltype(a);
    const bool ok = std::is_same_v<A, arch::generic> || cpuinfo_allows<A>(flags);
    if (expected.empty() && ok) expected = A::name;
  });
  const std::string best(kfuse::best_arch_name(arch::all{}));
  INFO("best arch: " << best);
  CHECK(best == expected);
  if (flags.count("avx512_bf16")) CHECK(best == "avx512_bf16");
  CHECK(kfuse::best_arch_name(arch::list<arch::generic>{}) == "generic");
  CHECK(kfuse::best_arch_name(arch::list<arch::sse4, arch::generic>{}) ==
        (flags.count("sse4_2") ? "sse4" : "generic"));
}

TEST_CASE("dispatch runs the best arch's instantiation", "[dispatch]") {
  const auto x = test_input(1003);
  outputs o(x, 1.25f);
  const dt::chain_result r = kfuse::dispatch(arch::all{}, dt::run_chain{}, o.io);
  const std::string best(kfuse::best_arch_name(arch::all{}));
  INFO("dispatched to " << r.xsimd_f.arch << " (" << r.xsimd_f.impl << ")");
  CHECK(std::string(r.xsimd_f.arch) == best);
  CHECK(std::string(r.xsimd_q.arch) == best);
  CHECK(std::string(r.hwy_f.arch) == best);
  CHECK(std::string(r.compiled_arch) == best);  // the TU that ran was built for that arch
  if (cpuinfo_flags().count("avx512_bf16")) {
    CHECK(best == "avx512_bf16");
    CHECK(std::string(r.xsimd_f.impl) == "xsimd:avx512bw");
    CHECK(std::string(r.hwy_f.impl).rfind("hwy:AVX3", 0) == 0);
  }
  // A shorter list stops at its own best arch.
  if (kfuse::cpu_supports<arch::avx2>()) {
    const auto r2 = kfuse::dispatch(arch::list<arch::avx2, arch::generic>{}, dt::run_chain{}, o.io);
    CHECK(std::string(r2.xsimd_f.arch) == "avx2");
    CHECK(std::string(r2.xsimd_f.impl) == "xsimd:fma3+avx2");
  }
  const auto rg = kfuse::dispatch(arch::list<arch::generic>{}, dt::run_chain{}, o.io);
  CHECK(std::string(rg.xsimd_f.arch) == "generic");
  CHECK(std::string(rg.xsimd_f.impl) == "scalar");
  CHECK(std::string(rg.compiled_arch) == "generic");
}

TEST_CASE("every arch's instantiation computes what the generic one does", "[dispatch]") {
  const auto x = test_input(1003);
  outputs ref(x, 1.25f);
  const auto rg = dt::run_chain{}(arch::generic{}, ref.io);
  REQUIRE(std::string(rg.xsimd_f.impl) == "scalar");
  // The chains against double precision first, so that the comparisons below mean something.
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double u = double(x[i]) * 1.25, s = u / (1.0 + std::fabs(u));
    const double gelu =
        0.5 * s * (1.0 + std::tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
    const double q =
        std::fmin(127.0, std::fmax(-128.0, std::nearbyint(s / (1.0 + std::exp(-s)) * 128.0) - 2));
    REQUIRE(std::fabs(ref.f[i] - gelu) <= 1e-5);
    REQUIRE(std::fabs(ref.q[i] - q) <= 1);
  }
  int ran = 0;
  for_each_arch(arch::all{}, [&](auto a) {
    using A = decltype(a);
    if (!kfuse::cpu_supports<A>()) {
      WARN("CPU lacks " << A::name << ": its instantiation is not run");
      return;
    }
    ++ran;
    outputs o(x, 1.25f);
    const dt::chain_result r = dt::run_chain{}(A{}, o.io);
    INFO("arch " << A::name << ", impl " << r.xsimd_f.impl << " / " << r.hwy_f.impl);
    CHECK(std::string(r.xsimd_f.arch) == A::name);
    CHECK(std::string(r.hwy_f.arch) == A::name);
    CHECK(std::string(r.compiled_arch) == A::name);
    if constexpr (!std::is_same_v<A, arch::generic>) {
      CHECK(std::string(r.xsimd_f.impl).rfind("xsimd:", 0) == 0);
      CHECK(std::string(r.hwy_f.impl).rfind("hwy:", 0) == 0);
    }
    int bad = 0;
    for (std::size_t i = 0; i < x.size() && bad < 10; ++i) {
      const float tol = 2e-6f + 2e-6f * std::fabs(ref.f[i]);
      if (std::fabs(o.f[i] - ref.f[i]) > tol || std::fabs(o.hwy[i] - ref.f[i]) > tol ||
          std::abs(int(o.q[i]) - int(ref.q[i])) > 1) {
        ++bad;
        FAIL_CHECK("x[" << i << "] = " << x[i] << ": f " << o.f[i] << " hwy " << o.hwy[i] << " q "
                        << int(o.q[i]) << ", generic f " << ref.f[i] << " q " << int(ref.q[i]));
      }
    }
  });
  CHECK(ran >= 1);
}

#endif
