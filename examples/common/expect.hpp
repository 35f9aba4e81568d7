#pragma once
// Shared by the examples: checks that this build variant got the xsimd arch and Highway target
// it was configured for. The build passes the expectation in (examples/CMakeLists.txt):
//   -DKFUSE_EXPECT_XSIMD="avx512bw"   xsimd::default_arch::name() of this TU
//   -DKFUSE_EXPECT_HWY="AVX3_DL"      Highway's static target, or "none" without Highway
//   -DKFUSE_EXPECT_VARIANT="x86-64-v4" a label for the output (optional)
// Without them the example only prints what it got.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <xsimd/xsimd.hpp>

#include "kfuse/kfuse.hpp"

#ifndef KFUSE_EXPECT_VARIANT
#define KFUSE_EXPECT_VARIANT "unnamed"
#endif

namespace example {

/// The Highway target the hwy backend runs in this TU, or "none".
inline std::string hwy_target() {
#if KFUSE_WITH_HWY
  const std::string impl = kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::hwy>();
  return impl.substr(impl.find(':') + 1);
#else
  return "none";
#endif
}

/// The xsimd arch the xsimd backend runs (kfuse's choice, as "xsimd:<name>").
inline std::string xsimd_arch() {
  const std::string impl = kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::xsimd>();
  return impl.substr(impl.find(':') + 1);
}

/// Prints the variant line and checks it against the expectation; returns false on mismatch.
inline bool check_variant() {
  const std::string xs = xsimd_arch();
  const std::string_view xs_default = xsimd::default_arch::name();
  const std::string hw = hwy_target();
  std::printf("variant: %s\n", KFUSE_EXPECT_VARIANT);
  std::printf("kfuse arch: %s\n", std::string(kfuse::arch::native::name).c_str());
  std::printf("xsimd arch: %s (xsimd::default_arch: %s)\n", xs.c_str(),
              std::string(xs_default).c_str());
  std::printf("hwy target: %s\n", hw.c_str());
  bool ok = true;
  if (xs != xs_default) {
    std::printf("MISMATCH: kfuse runs xsimd:%s but xsimd's default arch is %s\n", xs.c_str(),
                std::string(xs_default).c_str());
    ok = false;
  }
#ifdef KFUSE_EXPECT_XSIMD
  if (xs != KFUSE_EXPECT_XSIMD) {
    std::printf("MISMATCH: expected xsimd arch %s, got %s\n", KFUSE_EXPECT_XSIMD, xs.c_str());
    ok = false;
  }
#endif
#ifdef KFUSE_EXPECT_HWY
  if (hw != KFUSE_EXPECT_HWY) {
    std::printf("MISMATCH: expected hwy target %s, got %s\n", KFUSE_EXPECT_HWY, hw.c_str());
    ok = false;
  }
#endif
  return ok;
}

/// Deterministic inputs in [lo, hi) that are the same on every platform (a 64-bit LCG; the
/// top 24 bits make an exactly representable float).
inline void fill(float* p, std::size_t n, float lo, float hi, std::uint64_t seed) {
  std::uint64_t s = seed;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float u = float(s >> 40) * (1.f / 16777216.f);
    p[i] = lo + (hi - lo) * u;
  }
}

}  // namespace example
