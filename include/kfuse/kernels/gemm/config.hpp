#pragma once
// Register-tile shapes of the GEMM micro-kernels, per recipe and arch (default_config).
#include "kfuse/arch/tags.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {
/// GEMM recipe: f32 activations x f16 weights -> f32 (weights stored as f16, converted on load).
struct f16w {
  static constexpr std::string_view name{"f16w"};
};
}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// MR rows x NV vectors of accumulators. Enough independent FMA chains to cover the FMA latency
/// on both pipes (Zen 5: 2 pipes x 4 cycles = 8) while leaving registers for B and A.
template <class Recipe, class A, int Lanes>
struct default_config {
  static constexpr int mr = Lanes == 1 ? 4 : 6;
  // 32 vector registers (AVX-512, NEON): 6 x 4 accumulators; 16 (AVX2, SSE): 6 x 2.
  static constexpr int nv = Lanes == 1 ? 4 : (A::vector_bytes >= 64 || A::is_arm ? 4 : 2);
  static constexpr int nr = nv * Lanes;
};

/// bf16 without vdpbf16ps on 16 vector registers (sse4, avx2; mk_bf16_pairs): 6 x 2 accumulators
/// plus B's split pair, A's broadcast and the mask do not fit, and GCC 12 spilled accumulators
/// (avx2, Zen 4, 256x1024x1024 on one core: 6 x 2 75 GFLOP/s, 5 x 2 107, 4 x 2 98).
template <class A, int Lanes>
struct default_config<bf16, A, Lanes> : default_config<f32, A, Lanes> {
  static constexpr bool ymm_or_xmm = Lanes > 1 && A::vector_bytes < 64 && !A::is_arm;
  static constexpr int mr = ymm_or_xmm ? 5 : default_config<f32, A, Lanes>::mr;
};

/// int8 (vpdpbusd) on Zen 5 runs best with 16 accumulators: 4 x 4 vectors measured 610 GOP/s at
/// 256x1024x1024 against 330 for 6 x 4, 555 for 6 x 2 or 3 x 4, 410 for 5 x 4 (the peak probe
/// also stalls with more than 12-16 vpdpbusd chains in flight).
/// With 16 ymm registers (avx2_vnni): 6 x 2 accumulators + 2 B + 1 broadcast of A (Xeon,
/// 64x1024x1024 on one core: 6 x 2 275 GOP/s, 3 x 3 238, 4 x 2 234, 8 x 1 230, 4 x 3 223).
/// avx2 without VNNI (vpmaddubsw + vpmaddwd) also needs the int16 pairs and the ones: 4 x 2 (Zen 3,
/// conv_lowp_bench's 3x3 and 1x1 layers on one core: 4 x 2 130-165 GOP/s, 5 x 2 118-163, 6 x 2
/// 117-159; the probe 179).
template <class A, int Lanes>
struct default_config<i8, A, Lanes> {
  static constexpr bool ymm = Lanes > 1 && A::vector_bytes < 64;
  static constexpr int mr = ymm ? (A::native_int8_dot ? 6 : 4) : 4;
  static constexpr int nv = ymm ? 2 : 4;
  static constexpr int nr = nv * Lanes;
};

KFUSE_END_NAMESPACE
