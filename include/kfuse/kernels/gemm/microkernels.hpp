#pragma once
// GEMM micro-kernels: the inner loop that accumulates one register tile over rows k0..k1 of K.
// Each is a policy with
//   storage            what the packed weights hold
//   k_group            consecutive k values packed together per column (1; 2 for bf16 pairs;
//                      4 for int8 quads)
//   integer            accumulators hold int32 bits; finish() makes them real values
//   accumulate<...>()  the FMA / dot-product loop over A's rows (an a_rows operand, below)
// so the tile drivers (gemm.hpp, conv2d_tiles_nchw.hpp / _nhwc.hpp) are written once for all
// recipes.
#include <bit>
#include <cstring>

#include "kfuse/simd/vec.hpp"
#include "kfuse/types/convert.hpp"

#if KFUSE_X86 && (KFUSE_TIER >= KFUSE_TIER_AVX512 || KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD)
#include <immintrin.h>
#endif

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// The A operand of a micro-kernel: row r's K values start at a[r]. A GEMM's rows are one
/// stride apart (strided_rows); an NHWC convolution tile that spans output rows reads each
/// pixel through a pointer of its own (pointer_rows: an indirection, as XNNPACK's).
template <class T>
struct strided_rows {
  using value_type = T;
  const T* base;
  index_t ld;
  KFUSE_INLINE const T* operator[](int r) const { return base + r * ld; }
};
template <class T, int Rows>
struct pointer_rows {
  using value_type = T;
  const T* p[Rows];
  KFUSE_INLINE const T* operator[](int r) const { return p[r]; }
};

/// f32 FMA on simd::vec: broadcast one A value per row, NV vectors of B per k. TA is A's storage
/// type (f32). TB is the packed weights' storage: f32, or f16 for the f16-weight recipe
/// (converted while loading, which halves the bytes a memory-bound small-M GEMM streams).
template <class TA, class TB = float>
struct mk_fma {
  using storage = TB;
  static constexpr int k_group = 1;
  static constexpr bool integer = false;
  static constexpr std::string_view name = std::is_same_v<TB, f16_t> ? "f16w->f32 fma" : "f32 fma";

  template <class V, int Rows, int NV, int NR, class AR>
  static KFUSE_INLINE void accumulate(V (&acc)[Rows][NV], const AR& a, const TB* KFUSE_RESTRICT bp,
                                      index_t k0, index_t k1) {
    static_assert(std::is_same_v<typename AR::value_type, TA>);
    constexpr int L = V::lanes;
    for (index_t k = k0; k < k1; ++k) {
      V b[NV];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) b[j] = simd::load<V>(bp + k * NR + j * L);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const V av(to_float(a[r][k]));
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j) acc[r][j] = simd::fma(av, b[j], acc[r][j]);
      }
    }
  }
};

/// mk_fma over a block-diagonal panel (conv_shape::diagonal): vector j of the tile is its own
/// group of `cs` input channels, so it reads A's values [j * cs, (j + 1) * cs) of each row and
/// the panel rows of its block only (row j * cs + k, lanes j * L...), skipping the zero blocks.
/// One broadcast per row and vector: NV independent accumulator chains per row, where a group
/// of one vector's width alone had one.
template <class TA>
struct mk_fma_diagonal {
  template <class V, int Rows, int NV, int NR, class AR>
  static KFUSE_INLINE void accumulate(V (&acc)[Rows][NV], const AR& a,
                                      const float* KFUSE_RESTRICT bp, index_t cs) {
    constexpr int L = V::lanes;
    for (index_t k = 0; k < cs; ++k) {
      V b[NV];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) b[j] = simd::load<V>(bp + (j * cs + k) * NR + j * L);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j)
          acc[r][j] = simd::fma(V(to_float(a[r][j * cs + k])), b[j], acc[r][j]);
    }
  }
  /// accumulate over a kernel row of 3 taps for Rows pixels side by side in one output row
  /// (stride 1, no dilation): each input pixel's broadcast serves its up to 3 taps (Rows + 2
  /// broadcasts per channel and block, not 3 x Rows: with a broadcast per FMA the FMAs ran at
  /// ~80% of their rate). x0: pixel 0's first input of its block 0, pix values apart; bp: the
  /// kernel row's first tap's block-diagonal panel, cgp x NR values per tap.
  template <class V, int Rows, int NV, int NR>
  static KFUSE_INLINE void row3(V (&acc)[Rows][NV], const float* KFUSE_RESTRICT x0, index_t pix,
                                const float* KFUSE_RESTRICT bp, index_t cgp, index_t cs) {
    constexpr int L = V::lanes, S = 3;
    for (index_t k = 0; k < cs; ++k) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) {
        V b[S];
#pragma GCC unroll 4
        for (int q = 0; q < S; ++q) b[q] = simd::load<V>(bp + (q * cgp + j * cs + k) * NR + j * L);
#pragma GCC unroll 16
        for (int u = 0; u < Rows + S - 1; ++u) {
          const V x(x0[u * pix + j * cs + k]);
#pragma GCC unroll 4
          for (int q = 0; q < S; ++q)
            if (u - q >= 0 && u - q < Rows) acc[u - q][j] = simd::fma(x, b[q], acc[u - q][j]);
        }
      }
    }
  }
  /// Vector j of a narrow tile (blocks of groups of w channels, conv_shape::block_groups;
  /// blocks of L input channels, float rows) over one tap: lane l sums its own group's w
  /// channels only, channel i as one load of the block's L values permuted so that every
  /// group's lanes see the group's i-th (simd group_broadcast), against row i of `bp` ([w][NR]:
  /// lane l's weight for its group's channel i). w FMAs per row where accumulate takes L: a
  /// quarter at w = 4. One vector at a time (its accumulators and the permutes' operands fit
  /// the registers; with the tile's NV x Rows accumulators live they spilled), the odd channels
  /// into a second set `odd` (w is even): Rows chains alone would wait on the FMA's latency.
  template <bool InLane, class V, int Rows, int NR, class AR>
  static KFUSE_INLINE void groups_tap(V (&col)[Rows], V (&odd)[Rows], const AR& a, int j,
                                      const float* KFUSE_RESTRICT bp, index_t w) {
    using I = typename V::impl;
    constexpr int L = V::lanes;
    const auto channel = [&](V(&c)[Rows], index_t i) KFUSE_INLINE_LAMBDA {
      const auto idx = I::template group_lanes<InLane>(int(w), int(i));
      const V b = simd::load<V>(bp + i * NR + j * L);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r)
        c[r] = simd::fma(V::wrap(I::template group_broadcast<InLane>(
                             I::template load<float>(a[r] + j * L), idx)),
                         b, c[r]);
    };
    for (index_t i = 0; i < w; i += 2) {
      channel(col, i);
      channel(odd, i + 1);
    }
  }
  /// groups_tap over a kernel row of 3 taps for Rows pixels side by side in one output row
  /// (stride 1, no dilation): each input pixel's permuted values serve its up to 3 taps (Rows
  /// + 2 loads and permutes per channel, not 3 x Rows). x0: pixel 0's first input, pix values
  /// apart; bp: the kernel row's panel ([3][w][NR]).
  template <bool InLane, class V, int Rows, int NR>
  static KFUSE_INLINE void groups_row3(V (&col)[Rows], V (&odd)[Rows], const float* x0, index_t pix,
                                       int j, const float* KFUSE_RESTRICT bp, index_t w) {
    using I = typename V::impl;
    constexpr int L = V::lanes, S = 3;
    const auto channel = [&](V(&c)[Rows], index_t i) KFUSE_INLINE_LAMBDA {
      const auto idx = I::template group_lanes<InLane>(int(w), int(i));
      V p[Rows + S - 1];
#pragma GCC unroll 16
      for (int m = 0; m < Rows + S - 1; ++m)
        p[m] = V::wrap(I::template group_broadcast<InLane>(
            I::template load<float>(x0 + m * pix + j * L), idx));
#pragma GCC unroll 8
      for (int q = 0; q < S; ++q) {
        const V b = simd::load<V>(bp + (q * w + i) * NR + j * L);
#pragma GCC unroll 8
        for (int r = 0; r < Rows; ++r) c[r] = simd::fma(p[r + q], b, c[r]);
      }
    };
    for (index_t i = 0; i < w; i += 2) {
      channel(col, i);
      channel(odd, i + 1);
    }
  }
};

/// bf16 x bf16 -> f32 on every arch without vdpbf16ps: vdpbf16ps emulated on simd::vec with the
/// same packed weights (bf16, k pairs: panel row kk holds (B[2kk][n], B[2kk+1][n]) for n in the
/// panel) and the same arithmetic. Both operands are bf16 values (the weights are rounded to
/// nearest even when packed, the activations are stored as bf16), so every product is exact in
/// f32, and an FMA adds it with one rounding, as vdpbf16ps does. Each pair of k is added in
/// vdpbf16ps's order: acc = (acc + a[2kk+1] b[2kk+1]) + a[2kk] b[2kk], each sum rounded to
/// nearest even. The result is vdpbf16ps's bit for bit (checked on Zen 4) except for denormals:
/// vdpbf16ps treats denormal inputs as zero and flushes denormal products and sums to zero
/// (whatever MXCSR says); this kernel keeps them (IEEE), as the FMA does under the default MXCSR.
/// A pair is one load of B's bits per vector, split into its even and odd elements with a shift
/// and a mask, and one 32-bit broadcast of A per row, split the same way.
struct mk_bf16_pairs {
  using storage = bf16_t;
  static constexpr int k_group = 2;
  static constexpr bool integer = false;
  static constexpr std::string_view name = "bf16->f32 fma";

  // One pair of k (Pair) or, for an odd K, its last k alone, whose B partner is the zero
  // padding: vdpbf16ps adds that partner's zero product first (acc + 0, which only turns -0
  // into +0), then the product.
  template <bool Pair, class V, int Rows, int NV, class AR>
  static KFUSE_INLINE void step(V (&acc)[Rows][NV], const AR& a, index_t k, const bf16_t* b_row) {
    using I = typename V::impl;
    constexpr int L = V::lanes;
    V b[NV];
    if constexpr (Pair) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) b[j] = V::wrap(I::bf16_odd(I::load_bits(b_row + j * 2 * L)));
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const V av = V::wrap(I::bf16_odd(I::set1(pair_bits(a[r] + k))));
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j) acc[r][j] = simd::fma(av, b[j], acc[r][j]);
      }
    } else {
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j) acc[r][j] = acc[r][j] + V(0.f);
    }
    // Keeps GCC 12 from hoisting the even half's loads and splits above the odd half's FMAs:
    // with both halves live it spilled accumulators (avx2 5 x 2: 40 GFLOP/s instead of 107).
    asm volatile("" ::: "memory");
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) b[j] = V::wrap(I::bf16_even(I::load_bits(b_row + j * 2 * L)));
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const V av =
          Pair ? V::wrap(I::bf16_even(I::set1(pair_bits(a[r] + k)))) : V(to_float(a[r][k]));
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = simd::fma(av, b[j], acc[r][j]);
    }
  }

  // A's pair (a[0], a[1]) as the raw bits of one float (a[0] in the low half).
  static KFUSE_INLINE float pair_bits(const bf16_t* a) {
    float bits;
    std::memcpy(&bits, a, 4);
    return bits;
  }

  template <class V, int Rows, int NV, int NR, class AR>
  static KFUSE_INLINE void accumulate(V (&acc)[Rows][NV], const AR& a,
                                      const bf16_t* KFUSE_RESTRICT bp, index_t k0, index_t k1) {
    static_assert(NR >= NV * V::lanes && std::is_same_v<typename AR::value_type, bf16_t>);
    const index_t full_end = k1 - (k1 - k0) % 2;  // k0 is even
    for (index_t k = k0; k < full_end; k += 2) step<true>(acc, a, k, bp + (k / 2) * (2 * NR));
    if (full_end < k1) step<false>(acc, a, full_end, bp + (full_end / 2) * (2 * NR));
  }
};

#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512_BF16
/// bf16 x bf16 -> f32 with vdpbf16ps: each instruction multiplies a pair of consecutive k of A
/// (one 32-bit broadcast) with the matching pair of 16 columns of B and adds both products.
/// Weights are packed in k pairs: panel row kk holds (B[2kk][n], B[2kk+1][n]) for n in the panel.
struct mk_bf16_dp {
  using storage = bf16_t;
  static constexpr int k_group = 2;
  static constexpr bool integer = false;
  static constexpr std::string_view name = "bf16 vdpbf16ps";

  // One pair of k: NV loads of B, one 32-bit broadcast of A per row, Rows x NV vdpbf16ps.
  template <int Rows, int NV, class AR>
  static KFUSE_INLINE void step(__m512 (&acc)[Rows][NV], const AR& a, index_t k,
                                const bf16_t* b_row) {
    __m512bh b[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) b[j] = (__m512bh)_mm512_loadu_si512(b_row + j * 32);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      std::int32_t pair;
      std::memcpy(&pair, a[r] + k, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], av, b[j]);
    }
  }

  template <class V, int Rows, int NV, int NR, class AR>
  static KFUSE_INLINE void accumulate(V (&vacc)[Rows][NV], const AR& a,
                                      const bf16_t* KFUSE_RESTRICT bp, index_t k0, index_t k1) {
    static_assert(V::lanes == 16, "vdpbf16ps works on 16 f32 lanes");
    static_assert(std::is_same_v<typename AR::value_type, bf16_t>);
    __m512 acc[Rows][NV];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = std::bit_cast<__m512>(vacc[r][j].r);
    const index_t full_end = k1 - (k1 - k0) % 2;  // k0 is even
    for (index_t k = k0; k < full_end; k += 2) step<Rows, NV>(acc, a, k, bp + (k / 2) * (2 * NR));
    if (full_end < k1) {
      // An odd K: the last A value pairs with zero (its B partner is the zero padding).
      alignas(64) bf16_t tail[Rows][2] = {};
      for (int r = 0; r < Rows; ++r) tail[r][0] = a[r][full_end];
      step<Rows, NV>(acc, strided_rows<bf16_t>{&tail[0][0], 2}, 0, bp + (full_end / 2) * (2 * NR));
    }
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) vacc[r][j] = V::wrap(std::bit_cast<typename V::reg>(acc[r][j]));
  }
};
#endif

// ------------------------------------------------------------------------------------- int8
// u8 (or s8) activations x s8 weights -> s32. The accumulators hold int32 bit patterns inside the
// driver's f32 vectors; finish() turns them into real values:
//   sum_k (a - za) b = sum_k a b - za * colsum(B)      (colsum computed at pack time)
// s8 activations are flipped to u8 (a + 128) and za grows by 128, so one kernel serves both.

/// Exact scalar int32 kernel (the generic arch): one lane, weights in groups of 4 like VNNI.
struct mk_int8_scalar {
  using storage = std::int8_t;
  static constexpr int k_group = 4;
  static constexpr bool integer = true;
  static constexpr std::string_view name = "i8 scalar";
  static constexpr int weight_limit = 128;           // any s8 weight
  static constexpr std::int32_t weight_shift = 128;  // NCHW tiles' u8 weights: w + 128

  template <class V, int Rows, int NV, int NR, class AR>
  static KFUSE_INLINE void accumulate(V (&acc)[Rows][NV], const AR& a,
                                      const std::int8_t* KFUSE_RESTRICT bp, index_t k0,
                                      index_t k1) {
    static_assert(V::lanes == 1);
    for (int r = 0; r < Rows; ++r)
      for (int j = 0; j < NV; ++j) {
        std::int32_t s = std::bit_cast<std::int32_t>(acc[r][j].r);
        for (index_t k = k0; k < k1; ++k)
          s += std::int32_t(a[r][k]) * bp[(k / 4) * (4 * NR) + j * 4 + k % 4];
        acc[r][j] = V::wrap(std::bit_cast<float>(s));
      }
  }
  /// s8 activations need no flip here: the products use their signed values directly.
  template <class TA>
  static constexpr std::int32_t zero_point_shift = 0;

  template <class V, int NV>
  static KFUSE_INLINE void finish_int(V (&acc)[NV], const std::int32_t* col_sums, std::int32_t za) {
    for (int j = 0; j < NV; ++j)
      acc[j] =
          V::wrap(std::bit_cast<float>(std::bit_cast<std::int32_t>(acc[j].r) - za * col_sums[j]));
  }
  template <class V, int NV>
  static KFUSE_INLINE void finish(V (&acc)[NV], const std::int32_t* col_sums, std::int32_t za) {
    for (int j = 0; j < NV; ++j)
      acc[j] = V(float(std::bit_cast<std::int32_t>(acc[j].r) - za * col_sums[j]));
  }
};

#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
/// The integer registers the int8 dot product works on: zmm (16 int32 lanes) on the AVX-512
/// tiers, ymm (8 lanes) on avx2 / avx2_vnni. dot(acc, a, b) adds to each int32 lane the four
/// products of its u8 bytes of `a` with its s8 bytes of `b`: one vpdpbusd where the tier has it,
/// else vpmaddubsw (pairs summed in int16, saturating beyond 32767) and vpmaddwd with ones
/// (pairs of pairs in int32) - exact while |b| <= 63 or (nchw tiles) a <= 127.
template <int Lanes>
struct vnni_regs;
#if KFUSE_TIER >= KFUSE_TIER_AVX512
template <>
struct vnni_regs<16> {
  using reg = __m512i;
  using freg = __m512;
  static KFUSE_INLINE reg load(const void* p) { return _mm512_loadu_si512(p); }
  static KFUSE_INLINE reg set1(std::int32_t v) { return _mm512_set1_epi32(v); }
#if KFUSE_X86_INT8_DOT
  static KFUSE_INLINE reg dot(reg acc, reg a, reg b) { return _mm512_dpbusd_epi32(acc, a, b); }
#else
  static KFUSE_INLINE reg dot(reg acc, reg a, reg b) {
    const reg pairs = _mm512_maddubs_epi16(a, b);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
#endif
  static KFUSE_INLINE reg sub_mul(reg acc, reg z, reg s) {
    return _mm512_sub_epi32(acc, _mm512_mullo_epi32(z, s));
  }
  static KFUSE_INLINE freg to_float(reg v) { return _mm512_cvtepi32_ps(v); }
};
#else
template <>
struct vnni_regs<8> {
  using reg = __m256i;
  using freg = __m256;
  static KFUSE_INLINE reg load(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  static KFUSE_INLINE reg set1(std::int32_t v) { return _mm256_set1_epi32(v); }
#if KFUSE_X86_INT8_DOT
  static KFUSE_INLINE reg dot(reg acc, reg a, reg b) { return _mm256_dpbusd_avx_epi32(acc, a, b); }
#else
  static KFUSE_INLINE reg dot(reg acc, reg a, reg b) {
    const reg pairs = _mm256_maddubs_epi16(a, b);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
#endif
  static KFUSE_INLINE reg sub_mul(reg acc, reg z, reg s) {
    return _mm256_sub_epi32(acc, _mm256_mullo_epi32(z, s));
  }
  static KFUSE_INLINE freg to_float(reg v) { return _mm256_cvtepi32_ps(v); }
};
#endif

/// vpdpbusd: each instruction multiplies 4 consecutive k of A (u8, one 32-bit broadcast) with
/// the matching 4 k of L columns of B (s8) and adds the 4 products to L int32 accumulators.
/// Without it (KFUSE_X86_INT8_MADD) the same quads go through vpmaddubsw + vpmaddwd, whose int16
/// pair sums are exact only for 7-bit weights: weight_limit.
struct mk_int8_vnni {
  using storage = std::int8_t;
  static constexpr int k_group = 4;
  static constexpr bool integer = true;
#if KFUSE_X86_INT8_DOT
  static constexpr std::string_view name = "i8 vpdpbusd";
  static constexpr int weight_limit = 128;  // any s8 weight
  static constexpr std::int32_t weight_shift = 128;
#else
  static constexpr std::string_view name = "i8 vpmaddubsw";
  // |w| <= 63: a u8 activation pair gives at most 2 x 255 x 63 < 32767. The NCHW tiles broadcast
  // the weights as u8 = w + weight_shift (1..127) against s8 activations: 2 x 127 x 128 < 32767.
  static constexpr int weight_limit = 63;
  static constexpr std::int32_t weight_shift = 64;
#endif

  // One group of 4 k: NV loads of B, one broadcast of A per row, Rows x NV vpdpbusd.
  template <class R, int Rows, int NV, class AR>
  static KFUSE_INLINE void step(typename R::reg (&acc)[Rows][NV], const AR& a, index_t k,
                                const std::int8_t* b_row, std::int32_t flip) {
    constexpr int bytes = int(sizeof(typename R::reg));
    typename R::reg b[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) b[j] = R::load(b_row + j * bytes);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      std::int32_t quad;
      std::memcpy(&quad, a[r] + k, 4);
      const typename R::reg av = R::set1(quad ^ flip);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = R::dot(acc[r][j], av, b[j]);
    }
  }

  template <class V, int Rows, int NV, int NR, class AR>
  static KFUSE_INLINE void accumulate(V (&vacc)[Rows][NV], const AR& a,
                                      const std::int8_t* KFUSE_RESTRICT bp, index_t k0,
                                      index_t k1) {
    using R = vnni_regs<V::lanes>;
    using TA = typename AR::value_type;
    using reg = typename R::reg;
    // s8 activations become u8 by flipping the sign bit of every byte (a + 128).
    const std::int32_t flip = std::is_signed_v<TA> ? std::int32_t(0x80808080u) : 0;
    reg acc[Rows][NV];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[r][j] = std::bit_cast<reg>(vacc[r][j].r);
    const index_t full_end = k1 - (k1 - k0) % 4;  // k0 is a multiple of 4
    for (index_t k = k0; k < full_end; k += 4)
      step<R, Rows, NV>(acc, a, k, bp + (k / 4) * (4 * NR), flip);
    if (full_end < k1) {
      // K not a multiple of 4: copy the last A bytes into zero-padded quads. Flipped zero bytes
      // are 128 and meet B's zero padding, so they add nothing.
      alignas(64) TA tail[Rows][4] = {};
      for (int r = 0; r < Rows; ++r)
        for (index_t k = full_end; k < k1; ++k) tail[r][k - full_end] = a[r][k];
      step<R, Rows, NV>(acc, strided_rows<TA>{&tail[0][0], 4}, 0, bp + (full_end / 4) * (4 * NR),
                        flip);
    }
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) vacc[r][j] = V::wrap(std::bit_cast<typename V::reg>(acc[r][j]));
  }
  template <class TA>
  static constexpr std::int32_t zero_point_shift = std::is_signed_v<TA> ? 128 : 0;

  template <class V, int NV>
  static KFUSE_INLINE void finish_int(V (&acc)[NV], const std::int32_t* col_sums, std::int32_t za) {
    using R = vnni_regs<V::lanes>;
    const typename R::reg z = R::set1(za);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const auto s =
          R::sub_mul(std::bit_cast<typename R::reg>(acc[j].r), z, R::load(col_sums + j * V::lanes));
      acc[j] = V::wrap(std::bit_cast<typename V::reg>(s));
    }
  }
  template <class V, int NV>
  static KFUSE_INLINE void finish(V (&acc)[NV], const std::int32_t* col_sums, std::int32_t za) {
    using R = vnni_regs<V::lanes>;
    finish_int<V, NV>(acc, col_sums, za);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j)
      acc[j] = V::wrap(
          std::bit_cast<typename V::reg>(R::to_float(std::bit_cast<typename R::reg>(acc[j].r))));
  }
};
#endif

}  // namespace detail
KFUSE_END_NAMESPACE
