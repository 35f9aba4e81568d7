#pragma once
// The xsimd impl for one xsimd arch. Arithmetic and math (exp, tanh, erf) are xsimd's; xsimd 8
// has no 8/16-bit conversions to float, so those loads and stores are intrinsics per ISA.
#if defined(__AVX512BW__) && defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
// GCC 12 without optimization (-O0: Debug and sanitizer builds) defines these two AVX-512BW
// blends as macros that cast their operands straight to __v64qi / __v32hi, which fails on
// xsimd's batch types (xsimd's avx512bw select<int>, reached by xsimd::log). Defined again with
// the __m512i conversion first, as GCC's other such macros have; xsimd must see these.
#include <immintrin.h>
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi8(U, A, W)                                                   \
  ((__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)(__m512i)(A), (__v64qi)(__m512i)(W), \
                                            (__mmask64)(U)))
#define _mm512_mask_blend_epi16(U, A, W)                                                  \
  ((__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)(__m512i)(A), (__v32hi)(__m512i)(W), \
                                            (__mmask32)(U)))
#endif
#include <xsimd/xsimd.hpp>

#include "kfuse/arch/tags.hpp"
#include "kfuse/types/convert.hpp"

#if KFUSE_X86
#include <immintrin.h>
#elif KFUSE_ARM
#include <arm_neon.h>
#endif

KFUSE_BEGIN_NAMESPACE
namespace simd {

template <class XA>
struct xsimd_impl {
  using reg = xsimd::batch<float, XA>;
  using mreg = xsimd::batch_bool<float, XA>;
  using ireg = xsimd::batch<std::int32_t, XA>;
  using ureg = xsimd::batch<std::uint32_t, XA>;
  static constexpr int lanes = int(reg::size);
  static constexpr std::string_view name() { return XA::name(); }

  static KFUSE_INLINE reg set1(float s) { return reg(s); }
  static KFUSE_INLINE reg add(reg a, reg b) { return a + b; }
  static KFUSE_INLINE reg sub(reg a, reg b) { return a - b; }
  static KFUSE_INLINE reg mul(reg a, reg b) { return a * b; }
  // AArch64: IEEE division and square root (vdivq / vsqrtq). xsimd 8's neon64 kernels use the
  // reciprocal estimates instead: 1-2 ulp off, sqrt(inf) = NaN, 1 / denormal = -inf.
  static KFUSE_INLINE reg div(reg a, reg b) {
#if KFUSE_ARM && defined(__aarch64__)
    return reg(vdivq_f32(a, b));
#else
    return a / b;
#endif
  }
  static KFUSE_INLINE reg fma(reg a, reg b, reg c) { return xsimd::fma(a, b, c); }
  static KFUSE_INLINE reg min(reg a, reg b) { return xsimd::min(a, b); }
  static KFUSE_INLINE reg max(reg a, reg b) { return xsimd::max(a, b); }
  static KFUSE_INLINE reg abs(reg a) { return xsimd::abs(a); }
  static KFUSE_INLINE reg neg(reg a) { return -a; }
  static KFUSE_INLINE mreg lt(reg a, reg b) { return a < b; }
  static KFUSE_INLINE mreg le(reg a, reg b) { return a <= b; }
  static KFUSE_INLINE reg select(mreg m, reg a, reg b) { return xsimd::select(m, a, b); }
  static KFUSE_INLINE reg exp(reg a) { return xsimd::exp(a); }
  static KFUSE_INLINE reg tanh(reg a) { return xsimd::tanh(a); }
  static KFUSE_INLINE reg erf(reg a) { return xsimd::erf(a); }
  static KFUSE_INLINE reg round_even(reg a) { return xsimd::nearbyint(a); }
  static KFUSE_INLINE reg floor(reg a) { return xsimd::floor(a); }
  static KFUSE_INLINE reg ceil(reg a) { return xsimd::ceil(a); }
  static KFUSE_INLINE reg sqrt(reg a) {
#if KFUSE_ARM && defined(__aarch64__)
    return reg(vsqrtq_f32(a));
#else
    return xsimd::sqrt(a);
#endif
  }
  static KFUSE_INLINE reg log(reg a) { return xsimd::log(a); }
  // bf16 pairs (the bf16 GEMM emulation): lanes of 32 raw bits holding two bf16, element 2i in
  // the low half; bf16_even / bf16_odd give the low / high element of each lane as f32.
  static KFUSE_INLINE reg load_bits(const void* p) {
    return reg::load_unaligned(static_cast<const float*>(p));
  }
  static KFUSE_INLINE reg bf16_even(reg pairs) {
    return xsimd::bitwise_cast<reg>(xsimd::bitwise_cast<ureg>(pairs) << 16);
  }
  static KFUSE_INLINE reg bf16_odd(reg pairs) {
    return xsimd::bitwise_cast<reg>(xsimd::bitwise_cast<ureg>(pairs) & ureg(0xffff0000u));
  }

  // Stride-2 loads (pooling's stride-2 rows): lane i = p[2i] / p[2i + 1], from 2 * lanes floats.
  static KFUSE_INLINE reg load_even(const float* p) { return deinterleave<0>(p); }
  static KFUSE_INLINE reg load_odd(const float* p) { return deinterleave<1>(p); }
  template <int Odd>
  static KFUSE_INLINE reg deinterleave(const float* p) {
#if KFUSE_X86
    return deinterleave<Odd>(reg::load_unaligned(p), reg::load_unaligned(p + lanes));
#elif KFUSE_ARM
    const float32x4x2_t t = vld2q_f32(p);
    return t.val[Odd];
#else
    alignas(64) float tmp[lanes];
    for (int i = 0; i < lanes; ++i) tmp[i] = p[2 * i + Odd];
    return reg::load_aligned(tmp);
#endif
  }

#if KFUSE_X86
  // Every second lane of the 2 * lanes of (a, b): lane i = (a, b)[2i + Odd].
  template <int Odd>
  static KFUSE_INLINE reg deinterleave(reg a, reg b) {
    if constexpr (lanes == 16) {
      const __m512i idx =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      return _mm512_permutex2var_ps(a, _mm512_add_epi32(idx, _mm512_set1_epi32(Odd)), b);
    } else if constexpr (lanes == 8) {
      // Within 128-bit halves: a0 a2 b0 b2 | a4 a6 b4 b6; then the 64-bit pairs into order.
      const __m256 t =
          _mm256_shuffle_ps(a, b, Odd ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(2, 0, 2, 0));
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
    } else {
      return _mm_shuffle_ps(a, b, Odd ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(2, 0, 2, 0));
    }
  }
  static KFUSE_INLINE reg even_lanes(reg a, reg b) { return deinterleave<0>(a, b); }
  static KFUSE_INLINE reg odd_lanes(reg a, reg b) { return deinterleave<1>(a, b); }
  // Lane i = a[i + 1], the last lane c[0] (the widths with masked loads: 16 and 8 lanes).
  static KFUSE_INLINE reg next_lane(reg a, reg c) {
    if constexpr (lanes == 16) {
      return _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(c), _mm512_castps_si512(a), 1));
    } else {
      // (a's high half, c's low half), then each 128-bit half shifted in from it by one float.
      const __m256 hi = _mm256_permute2f128_ps(a, c, 0x21);
      return _mm256_castsi256_ps(
          _mm256_alignr_epi8(_mm256_castps_si256(hi), _mm256_castps_si256(a), 4));
    }
  }

  // Lane l = a[(l & -w) + j]: lane j of each aligned run of w lanes (a power of two below
  // lanes) broadcast over its run: the grouped convs' narrow blocks (w-channel groups side by
  // side in one vector) without a product per other group's channel. Runs of at most 4 lanes
  // (InLane) permute within 128-bit lanes (vpermilps: twice the throughput of a cross-lane
  // permute on Zen 4 / 5), longer ones across the vector.
  static constexpr bool has_group_broadcast = lanes == 16 || lanes == 8;
  template <bool InLane>
  static KFUSE_INLINE auto group_lanes(int w, int j) {
    const int mask = InLane ? 3 & -w : -w;
    if constexpr (lanes == 16)
      return _mm512_add_epi32(
          _mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(mask)),
          _mm512_set1_epi32(j));
    else
      return _mm256_add_epi32(
          _mm256_and_si256(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(mask)),
          _mm256_set1_epi32(j));
  }
  template <bool InLane>
  static KFUSE_INLINE reg group_broadcast(reg a, __m512i idx) {
    if constexpr (InLane)
      return _mm512_permutevar_ps(a, idx);
    else
      return _mm512_permutexvar_ps(idx, a);
  }
  template <bool InLane>
  static KFUSE_INLINE reg group_broadcast(reg a, __m256i idx) {
    if constexpr (InLane)
      return _mm256_permutevar_ps(a, idx);
    else
      return _mm256_permutevar8x32_ps(a, idx);
  }

  // The first n (< lanes) floats, by a masked load / store: the element-wise fallback (a stack
  // copy and a memcpy call per vector) cost a 16 -> 2 channel 1x1 conv 4x its FMA time. Masked
  // lanes are never touched, so nothing past p + n is read or written (and cannot fault).
  static constexpr bool has_partial_f32 = lanes == 16 || lanes == 8;
  static KFUSE_INLINE reg load_partial_f32(const float* p, int n) {
    if constexpr (lanes == 16)
      return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), p);
    else
      return _mm256_maskload_ps(p, first_lanes(n));
  }
  static KFUSE_INLINE void store_partial_f32(float* p, reg v, int n) {
    if constexpr (lanes == 16)
      _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1u), v);
    else
      _mm256_maskstore_ps(p, first_lanes(n), v);
  }
  static KFUSE_INLINE __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // Lane i = p[i] where bit i of `bits` is set, fill's lane i elsewhere; unset lanes are never
  // read (a masked load: no fault past a buffer's ends).
  static KFUSE_INLINE reg load_masked_f32(const float* p, unsigned bits, reg fill) {
    if constexpr (lanes == 16) {
      return _mm512_mask_loadu_ps(fill, __mmask16(bits), p);
    } else {
      const __m256i m =
          _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(bits)),
                                              _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)),
                             _mm256_setzero_si256());
      return _mm256_blendv_ps(_mm256_maskload_ps(p, ~m), fill, _mm256_castsi256_ps(m));
    }
  }
#else
  static constexpr bool has_partial_f32 = false;
#endif

  template <class T>
  static KFUSE_INLINE reg load(const T* p) {
    if constexpr (std::is_same_v<T, float>) {
      return reg::load_unaligned(p);
    } else if constexpr (std::is_same_v<T, bf16_t>) {
      return xsimd::bitwise_cast<reg>(widen_u16(reinterpret_cast<const std::uint16_t*>(p)) << 16);
    } else if constexpr (std::is_same_v<T, f16_t>) {
      return load_f16(p);
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
      return xsimd::to_float(ireg::load_unaligned(p));
    } else {
      return xsimd::to_float(widen_8(p));
    }
  }

  template <class T>
  static KFUSE_INLINE void store(T* p, reg v) {
    if constexpr (std::is_same_v<T, float>) {
      v.store_unaligned(p);
    } else if constexpr (std::is_same_v<T, bf16_t>) {
      // Round to nearest even on the bits; NaN is made quiet instead (the add could carry it to
      // Inf). isnan, not v != v: xsimd's != is an ordered compare (NEQ_OQ) on AVX / AVX-512,
      // false for NaN.
      const ureg u = xsimd::bitwise_cast<ureg>(v);
      const ureg rounded = u + ureg(0x7fffu) + ((u >> 16) & ureg(1u));
      const ureg quiet = u | ureg(0x00400000u);
      const reg chosen = xsimd::select(xsimd::isnan(v), xsimd::bitwise_cast<reg>(quiet),
                                       xsimd::bitwise_cast<reg>(rounded));
      const ureg bits = xsimd::bitwise_cast<ureg>(chosen) >> 16;
      narrow_u16(reinterpret_cast<std::uint16_t*>(p), bits);
    } else if constexpr (std::is_same_v<T, f16_t>) {
      store_f16(p, v);
    } else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) {
      narrow_8(p, v);
    } else {
      static_assert(sizeof(T) == 0, "kfuse: no vector store to this storage type");
    }
  }

#if KFUSE_X86 && KFUSE_TIER == KFUSE_TIER_AVX512_BF16
  // simd::store_dot / store_dot_pairs: the hardware conversion (denormals flushed to zero), for
  // 16 lanes; other widths take vec.hpp's fallback.
  static KFUSE_INLINE void store_dot(bf16_t* p, reg v) requires(lanes == 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v));
  }
  static KFUSE_INLINE void store_dot_pairs(bf16_t* p, reg even, reg odd) requires(lanes == 16) {
    // [even 0..15, odd 0..15] as 32 bf16, then interleaved: word i = (even i, odd i).
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
    const __m512i order =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    _mm512_storeu_si512(p, _mm512_permutexvar_epi16(order, both));
  }
#endif

 private:
  // u16 x lanes -> u32 lanes, zero-extended.
  static KFUSE_INLINE ureg widen_u16(const std::uint16_t* p) {
#if KFUSE_TIER >= KFUSE_TIER_AVX512 && KFUSE_X86
    if constexpr (lanes == 16)
      return ureg(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2 && KFUSE_X86
    if constexpr (lanes == 8)
      return ureg(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
#if KFUSE_X86
    if constexpr (lanes == 4) {
      return ureg(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }
#elif KFUSE_ARM
    if constexpr (lanes == 4) return ureg(vmovl_u16(vld1_u16(p)));
#endif
    alignas(64) std::uint32_t tmp[lanes];
    for (int i = 0; i < lanes; ++i) tmp[i] = p[i];
    return ureg::load_aligned(tmp);
  }

  // u32 lanes (each <= 0xffff) -> u16 x lanes.
  static KFUSE_INLINE void narrow_u16(std::uint16_t* p, ureg v) {
#if KFUSE_TIER >= KFUSE_TIER_AVX512 && KFUSE_X86
    if constexpr (lanes == 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
      return;
    }
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2 && KFUSE_X86
    if constexpr (lanes == 8) {
      const __m256i packed = _mm256_packus_epi32(v, v);  // per 128-bit half
      const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(ordered));
      return;
    }
#endif
#if KFUSE_X86
    if constexpr (lanes == 4) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(v, v));
      return;
    }
#elif KFUSE_ARM
    if constexpr (lanes == 4) {
      vst1_u16(p, vmovn_u32(v));
      return;
    }
#endif
    alignas(64) std::uint32_t tmp[lanes];
    v.store_aligned(tmp);
    for (int i = 0; i < lanes; ++i) p[i] = std::uint16_t(tmp[i]);
  }

  template <class T>
  static KFUSE_INLINE ireg widen_8(const T* p) {
    constexpr bool s = std::is_signed_v<T>;
#if KFUSE_TIER >= KFUSE_TIER_AVX512 && KFUSE_X86
    if constexpr (lanes == 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      return ireg(s ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
    }
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2 && KFUSE_X86
    if constexpr (lanes == 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      return ireg(s ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
    }
#endif
#if KFUSE_X86
    if constexpr (lanes == 4) {
      std::int32_t word;
      std::memcpy(&word, p, 4);
      const __m128i b = _mm_cvtsi32_si128(word);
      return ireg(s ? _mm_cvtepi8_epi32(b) : _mm_cvtepu8_epi32(b));
    }
#elif KFUSE_ARM
    if constexpr (lanes == 4) {
      alignas(8) T tmp[8] = {p[0], p[1], p[2], p[3]};
      if constexpr (s)
        return ireg(vmovl_s16(vget_low_s16(vmovl_s8(vld1_s8(tmp)))));
      else
        return ireg(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vld1_u8(tmp))))));
    }
#endif
    alignas(64) std::int32_t tmp[lanes];
    for (int i = 0; i < lanes; ++i) tmp[i] = p[i];
    return ireg::load_aligned(tmp);
  }

  // Round to nearest even, saturate to T's range, store lanes bytes.
  template <class T>
  static KFUSE_INLINE void narrow_8(T* p, reg v) {
    constexpr float lo = std::is_signed_v<T> ? -128.f : 0.f;
    constexpr float hi = std::is_signed_v<T> ? 127.f : 255.f;
    // Clamping in float first keeps NaN-free inputs exact and makes the packs below exact too.
    // NaN -> 0, as in from_float: for unsigned T the clamp does it (x86 maxps returns its second
    // operand, lo = 0, when the first is NaN); signed T selects it first.
    reg finite = v;
    if constexpr (std::is_signed_v<T> || !KFUSE_X86)
      finite = xsimd::select(xsimd::isnan(v), reg(0.f), v);
    const ireg q = xsimd::nearbyint_as_int(xsimd::min(xsimd::max(finite, reg(lo)), reg(hi)));
#if KFUSE_TIER >= KFUSE_TIER_AVX512 && KFUSE_X86
    if constexpr (lanes == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(q));
      return;
    }
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2 && KFUSE_X86
    if constexpr (lanes == 8) {
      const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      const __m128i b = std::is_signed_v<T> ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b);
      return;
    }
#endif
#if KFUSE_X86
    if constexpr (lanes == 4) {
      const __m128i w = _mm_packs_epi32(q, q);
      const __m128i b = std::is_signed_v<T> ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
      const std::int32_t word = _mm_cvtsi128_si32(b);
      std::memcpy(p, &word, 4);
      return;
    }
#endif
    alignas(64) std::int32_t tmp[lanes];
    q.store_aligned(tmp);
    for (int i = 0; i < lanes; ++i) p[i] = T(tmp[i]);
  }

  static KFUSE_INLINE reg load_f16(const f16_t* p) {
#if KFUSE_TIER >= KFUSE_TIER_AVX512 && KFUSE_X86
    if constexpr (lanes == 16)
      return reg(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2 && KFUSE_X86
    if constexpr (lanes == 8)
      return reg(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
#if KFUSE_ARM
    if constexpr (lanes == 4)
      return reg(
          vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)))));
#endif
    // No F16C (x86-64-v2): the exact software conversion, lane by lane.
    alignas(64) float tmp[lanes];
    for (int i = 0; i < lanes; ++i) tmp[i] = to_float(p[i]);
    return reg::load_aligned(tmp);
  }

  static KFUSE_INLINE void store_f16(f16_t* p, reg v) {
#if KFUSE_TIER >= KFUSE_TIER_AVX512 && KFUSE_X86
    if constexpr (lanes == 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                          _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      return;
    }
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2 && KFUSE_X86
    if constexpr (lanes == 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      return;
    }
#endif
#if KFUSE_ARM
    if constexpr (lanes == 4) {
      vst1_u16(reinterpret_cast<std::uint16_t*>(p), vreinterpret_u16_f16(vcvt_f16_f32(v)));
      return;
    }
#endif
    alignas(64) float tmp[lanes];
    v.store_aligned(tmp);
    for (int i = 0; i < lanes; ++i) p[i] = to_f16(tmp[i]);
  }
};

/// The xsimd arch kfuse uses for each of its arch tags.
template <class A>
struct xsimd_arch_for {
  static_assert(
      sizeof(A) == 0,
      "kfuse: the xsimd backend has no arch for this kfuse arch tag (use arch::generic or "
      "an x86/neon tag)");
};
#if KFUSE_X86
template <>
struct xsimd_arch_for<arch::sse4> {
  using type = xsimd::sse4_2;
};
template <>
struct xsimd_arch_for<arch::avx2> {
  using type = xsimd::fma3<xsimd::avx2>;
};
template <>
struct xsimd_arch_for<arch::avx2_vnni> : xsimd_arch_for<arch::avx2> {};
template <>
struct xsimd_arch_for<arch::avx512> {
  using type = xsimd::avx512bw;
};
template <>
struct xsimd_arch_for<arch::avx512_vnni> : xsimd_arch_for<arch::avx512> {};
template <>
struct xsimd_arch_for<arch::avx512_bf16> : xsimd_arch_for<arch::avx512> {};
#elif KFUSE_ARM
template <>
struct xsimd_arch_for<arch::neon> {
  using type = xsimd::neon64;
};
template <>
struct xsimd_arch_for<arch::neon_dotprod> : xsimd_arch_for<arch::neon> {};
#endif

}  // namespace simd
KFUSE_END_NAMESPACE
