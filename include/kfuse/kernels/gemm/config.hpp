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

KFUSE_END_NAMESPACE
