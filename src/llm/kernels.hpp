#pragma once
// The compute kernels of kfuse::llm, built once per x86 tier (kernels_<tier>.cpp compile
// kernels_body.hpp with that tier's flags) and chosen at run time: one binary runs on any
// x86-64 CPU and uses the widest integer dot product it has.
#include <cstdint>
#include <string>

#include "panels.hpp"

namespace kfuse::llm::detail {

/// Causal attention of `tokens` queries at positions pos0.. over the cache rows 0..pos0+t.
struct attention_args {
  const float* q = nullptr;  // [tokens][n_head * head_dim]
  float* out = nullptr;      // [tokens][n_head * head_dim]
  const void* k = nullptr;   // cache of this layer: [n_head_kv][n_ctx][head_dim], f32 or bf16
  const void* v = nullptr;
  bool bf16_cache = false;
  int tokens = 1;
  int pos0 = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ctx = 0;
};

/// Floats of scratch one attention call needs: the transposed keys it reads (rounded up to whole
/// 16-key blocks) and one row of scores.
inline std::int64_t attention_scratch_floats(int n_ctx, int head_dim) {
  const std::int64_t keys = (std::int64_t(n_ctx) + 15) / 16 * 16;
  return keys * head_dim + keys;
}

struct kernel_table {
  const char* name;
  /// y[t * ldy + r] = sum_c W[r][c] * x[t][c] for the rows of panels [p0, p1) and every token.
  void (*matmul)(const panel_matrix& w, std::int64_t p0, std::int64_t p1, const activations& a,
                 float* y, std::int64_t ldy);
  /// Quantizes one row of `cols` values (a multiple of 32) to two-level int8 blocks (panels.hpp):
  /// the high values to q[0, cols), the low ones to q[cols, 2 cols) (zeros with `one_level`);
  /// per block its unit, its sum and its first half's sum.
  void (*quantize_row)(const float* x, std::int64_t cols, std::int8_t* q, float* scale,
                       std::int32_t* sum, std::int32_t* half_sum, bool one_level);
  /// g[i] = silu(g[i]) * u[i] for i in [0, n) (SwiGLU).
  void (*swiglu)(float* g, const float* u, std::int64_t n);
  /// The attention of tokens [t0, t1) and query heads [h0, h1), heads that share one KV head;
  /// `scratch` holds attention_scratch_floats(n_ctx, head_dim) floats.
  void (*attention)(const attention_args& a, int t0, int t1, int h0, int h1, float* scratch);
};

const kernel_table& scalar_kernels();
#if defined(__x86_64__)
const kernel_table& avx2_kernels();
const kernel_table& avx512_kernels();
#endif

/// The best table this CPU runs, or the one KFUSE_LLM_KERNELS names ("scalar", "avx2",
/// "avx512_vnni"); `reason` says which and why.
const kernel_table& select_kernels(std::string& reason);

}  // namespace kfuse::llm::detail
