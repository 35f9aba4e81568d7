#pragma once
// GEMM micro-kernels: the inner loop that accumulates one register tile over rows k0..k1 of K.
// Each is a policy with
//   storage            what the packed weights hold
//   k_group            consecutive k values packed together per column (1, or 2 for bf16 pairs)
//   accumulate<...>()  the FMA / dot-product loop
// so the tile driver (gemm.hpp) is written once for all recipes.
#include <bit>

#include "kfuse/simd/vec.hpp"
#include "kfuse/types/convert.hpp"

#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512_BF16
#include <immintrin.h>
#endif

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// f32 FMA on simd::vec: broadcast one A value per row, NV vectors of B per k. TA is A's storage
/// type: f32, or bf16 on archs without a bf16 dot product (converted while broadcasting).
template <class TA>
struct mk_fma {
  using storage = float;
  static constexpr int k_group = 1;
  static constexpr std::string_view name = std::is_same_v<TA, float> ? "f32 fma" : "bf16->f32 fma";

  template <class V, int Rows, int NV, int NR>
  static KFUSE_INLINE void accumulate(V (&acc)[Rows][NV], const TA* KFUSE_RESTRICT a, index_t lda,
                                      const float* KFUSE_RESTRICT bp, index_t k0, index_t k1) {
    constexpr int L = V::lanes;
    for (index_t k = k0; k < k1; ++k) {
      V b[NV];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) b[j] = simd::load<V>(bp + k * NR + j * L);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const V av(to_float(a[r * lda + k]));
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j) acc[r][j] = simd::fma(av, b[j], acc[r][j]);
      }
    }
  }
};

#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512_BF16
/// bf16 x bf16 -> f32 with vdpbf16ps: each instruction multiplies a pair of consecutive k of A
/// (one 32-bit broadcast) with the matching pair of 16 columns of B and adds both products.
/// Weights are packed in k pairs: panel row kk holds (B[2kk][n], B[2kk+1][n]) for n in the panel.
struct mk_bf16_dp {
  using storage = bf16_t;
  static constexpr int k_group = 2;
  static constexpr std::string_view name = "bf16 vdpbf16ps";

  template <class V, int Rows, int NV, int NR>
  static KFUSE_INLINE void accumulate(V (&vacc)[Rows][NV], const bf16_t* KFUSE_RESTRICT a,
                                      index_t lda, const bf16_t* KFUSE_RESTRICT bp, index_t k0,
                                      index_t k1) {
    static_assert(V::lanes == 16, "vdpbf16ps works on 16 f32 lanes");
    __m512 acc[Rows][NV];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = std::bit_cast<__m512>(vacc[r][j].r);
    const index_t full_end = k1 - (k1 - k0) % 2;  // k0 is even
    auto step = [&](index_t k, auto load_pair) {
      __m512bh b[NV];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j)
        b[j] = (__m512bh)_mm512_loadu_si512(bp + (k / 2) * (2 * NR) + j * 32);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(load_pair(a + r * lda + k));
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], av, b[j]);
      }
    };
    for (index_t k = k0; k < full_end; k += 2)
      step(k, [](const bf16_t* p) {
        std::int32_t pair;
        std::memcpy(&pair, p, 4);
        return pair;
      });
    // An odd K: the last A value pairs with zero (its B partner is the zero padding).
    if (full_end < k1) step(full_end, [](const bf16_t* p) { return std::int32_t(p->bits); });
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) vacc[r][j] = V::wrap(std::bit_cast<typename V::reg>(acc[r][j]));
  }
};
#endif

}  // namespace detail
KFUSE_END_NAMESPACE
