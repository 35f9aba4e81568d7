// The kernels of one tier: included by kernels_<tier>.cpp after defining KFUSE_LLM_TIER_NAME and
// KFUSE_LLM_TABLE (the accessor's name); the tier's flags decide which SIMD paths compile.
// Everything here has internal linkage and uses no standard-library templates, so no code built
// with AVX-512 flags can be merged with (and later called instead of) the generic build's copy.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "half.hpp"
#include "kernels.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kfuse::llm::detail {
namespace {

inline std::int64_t min_i64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline int min_int(int a, int b) { return a < b ? a : b; }

// ---- activation quantization: per 32 values, hi = round(x / D) with D = max|x| / 127, then
// lo = round((x - D hi) / d) with d = D / 254 (|x - D hi| <= D / 2, so |lo| <= 127) ---------------

[[maybe_unused]] void quantize_row_generic(const float* x, std::int64_t cols, std::int8_t* q,
                                           float* scale, std::int32_t* sum, std::int32_t* half_sum,
                                           bool one_level) {
  for (std::int64_t b = 0; b < cols / qblock; ++b) {
    const float* xb = x + b * qblock;
    float amax = 0;
#pragma omp simd reduction(max : amax)
    for (int i = 0; i < qblock; ++i) amax = amax > std::fabs(xb[i]) ? amax : std::fabs(xb[i]);
    const float D = amax / 127.f;
    const float d = D / float(level_ratio);
    const float inv_D = D > 0 ? 1.f / D : 0.f, inv_d = d > 0 ? 1.f / d : 0.f;
    std::int32_t s[2] = {0, 0};  // per 16-value half
    for (int h = 0; h < 2; ++h) {
      std::int32_t sh = 0;
#pragma omp simd reduction(+ : sh)
      for (int i = 16 * h; i < 16 * h + 16; ++i) {
        const float hi = std::nearbyint(xb[i] * inv_D);
        float lo = one_level ? 0.f : std::nearbyint((xb[i] - hi * D) * inv_d);
        lo = lo > 127.f ? 127.f : lo < -127.f ? -127.f : lo;
        q[b * qblock + i] = std::int8_t(hi);
        q[cols + b * qblock + i] = std::int8_t(lo);
        sh += std::int32_t(hi) * level_ratio + std::int32_t(lo);
      }
      s[h] = sh;
    }
    scale[b] = d;
    sum[b] = s[0] + s[1];
    half_sum[b] = s[0];
  }
}

// ---- scalar reference paths (every tier uses them for what it has no SIMD path for) -----------

float load_weight(panel_format f, const std::byte* col, int r) {
  switch (f) {
    case panel_format::f32: {
      float v;
      std::memcpy(&v, col + 4 * r, 4);
      return v;
    }
    case panel_format::f16: {
      std::uint16_t h;
      std::memcpy(&h, col + 2 * r, 2);
      return f16_to_f32(h);
    }
    default: {
      std::uint16_t h;
      std::memcpy(&h, col + 2 * r, 2);
      return bf16_to_f32(h);
    }
  }
}

[[maybe_unused]] void matmul_float_scalar(const panel_matrix& w, std::int64_t p,
                                          const activations& a, float* y, std::int64_t ldy) {
  const std::byte* panel = w.panel(p);
  const std::int64_t step = panel_step_bytes(w.format);
  const int valid = int(min_i64(panel_rows, w.rows - p * panel_rows));
  for (int t = 0; t < a.tokens; ++t) {
    const float* x = a.x + t * a.x_stride;
    for (int r = 0; r < valid; ++r) {
      float acc = 0;
      for (std::int64_t c = 0; c < w.cols; ++c)
        acc += load_weight(w.format, panel + c * step, r) * x[c];
      y[t * ldy + p * panel_rows + r] = acc;
    }
  }
}

// Weight value (u8, offset included) of row r, column c of a quantized block's values.
inline int quant_at(panel_format f, const std::uint8_t* qs, int r, int c) {
  if (f == panel_format::q8) return qs[(c / 4) * 64 + r * 4 + c % 4];
  const int g = (c % 16) / 4, t = c % 4;
  const std::uint8_t byte = qs[g * 64 + r * 4 + t];
  const int low = c < 16 ? byte & 15 : byte >> 4;
  if (f == panel_format::q5) return low | ((qs[256 + r * 4 + t] >> (g + 4 * (c / 16))) & 1) << 4;
  if (f != panel_format::q6) return low;
  const std::uint8_t high = qs[256 + (c / 16) * 64 + r * 4 + t];
  return low | ((high >> (2 * g)) & 3) << 4;
}

// The offset of a quantized format's u8 values (q4m has a min instead).
constexpr int quant_offset(panel_format f) {
  return f == panel_format::q8   ? 128
         : f == panel_format::q6 ? 32
         : f == panel_format::q5 ? 16
         : f == panel_format::q4 ? 8
                                 : 0;
}

[[maybe_unused]] void matmul_quant_scalar(const panel_matrix& w, std::int64_t p,
                                          const activations& a, float* y, std::int64_t ldy) {
  const std::byte* panel = w.panel(p);
  const panel_format f = w.format;
  const std::int64_t step = panel_step_bytes(f);
  const int offset = quant_offset(f);
  const int valid = int(min_i64(panel_rows, w.rows - p * panel_rows));
  const std::int64_t blocks = w.cols / qblock;
  for (int t = 0; t < a.tokens; ++t) {
    const std::int8_t* xq = a.xq.q + t * a.xq.q_stride;
    const float* xd = a.xq.scale + t * a.xq.block_stride;
    const std::int32_t* xs = a.xq.sum + t * a.xq.block_stride;
    for (int r = 0; r < valid; ++r) {
      float acc = 0;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = panel + b * step;
        const auto* qs = reinterpret_cast<const std::uint8_t*>(blk + quant_header_bytes(f));
        std::int32_t dot[2] = {0, 0};  // per 16-column half
        for (int c = 0; c < qblock; ++c)
          dot[c / 16] += quant_at(f, qs, r, c) *
                         (level_ratio * xq[b * qblock + c] + xq[a.xq.lo + b * qblock + c]);
        const float d = f16_at(blk + 2 * r);
        if (f == panel_format::q6) {  // per half: its int8 scale, 32 x its activation sum
          const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 2 * panel_rows);
          const std::int64_t i = t * a.xq.block_stride + b;
          const float sum =
              float(dot[0] - offset * a.xq.part_sum(i, 0, 2)) * float(sc[r]) +
              float(dot[1] - offset * a.xq.part_sum(i, 1, 2)) * float(sc[panel_rows + r]);
          acc += sum * (d * xd[b]);
          continue;
        }
        acc += float(dot[0] + dot[1] - offset * xs[b]) * (d * xd[b]);
        if (f == panel_format::q4m)  // - min x the block's activation sum
          acc -= f16_at(blk + 2 * (panel_rows + r)) * (xd[b] * float(xs[b]));
      }
      y[t * ldy + p * panel_rows + r] = acc;
    }
  }
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
// ---- AVX-512 (VNNI) --------------------------------------------------------------------------

// 254 hi + lo of two-level int8 values (or of their dot products), with 254 hi = 256 hi - 2 hi.
inline __m512i level_total(__m512i hi, __m512i lo) {
  return _mm512_add_epi32(_mm512_sub_epi32(_mm512_slli_epi32(hi, 8), _mm512_slli_epi32(hi, 1)), lo);
}

// quantize_row_generic's arithmetic, 16 values per instruction.
void quantize_row(const float* x, std::int64_t cols, std::int8_t* q, float* scale,
                  std::int32_t* sum, std::int32_t* half_sum, bool one_level) {
  constexpr int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 limit = _mm512_set1_ps(127.f);
  for (std::int64_t b = 0; b < cols / qblock; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * qblock), x1 = _mm512_loadu_ps(x + b * qblock + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float D = amax / 127.f;
    const float d = D / float(level_ratio);
    const float inv_D = D > 0 ? 1.f / D : 0.f, inv_d = d > 0 ? 1.f / d : 0.f;
    std::int32_t s[2];
    for (int h = 0; h < 2; ++h) {
      const __m512 xv = h == 0 ? x0 : x1;
      const __m512 hi = _mm512_roundscale_ps(_mm512_mul_ps(xv, _mm512_set1_ps(inv_D)), nearest);
      __m512 lo = _mm512_setzero_ps();
      if (!one_level) {
        lo = _mm512_roundscale_ps(
            _mm512_mul_ps(_mm512_fnmadd_ps(hi, _mm512_set1_ps(D), xv), _mm512_set1_ps(inv_d)),
            nearest);
        lo = _mm512_min_ps(_mm512_max_ps(lo, _mm512_sub_ps(_mm512_setzero_ps(), limit)), limit);
      }
      const __m512i hi_i = _mm512_cvtps_epi32(hi), lo_i = _mm512_cvtps_epi32(lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * qblock + 16 * h),
                       _mm512_cvtepi32_epi8(hi_i));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + cols + b * qblock + 16 * h),
                       _mm512_cvtepi32_epi8(lo_i));
      s[h] = _mm512_reduce_add_epi32(level_total(hi_i, lo_i));
    }
    scale[b] = d;
    sum[b] = s[0] + s[1];
    half_sum[b] = s[0];
  }
}

inline __mmask16 row_mask(const panel_matrix& w, std::int64_t p) {
  const std::int64_t valid = min_i64(panel_rows, w.rows - p * panel_rows);
  return __mmask16((1u << valid) - 1u);
}

inline __m512 load_panel_column(panel_format f, const std::byte* col) {
  if (f == panel_format::f32) return _mm512_loadu_ps(col);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col));
  if (f == panel_format::f16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// NT tokens x 16 rows; with one token, four partial sums hide the FMA latency.
template <panel_format F, int NT>
void float_tile(const std::byte* panel, std::int64_t cols, const float* x, std::int64_t x_stride,
                float* y, std::int64_t ldy, __mmask16 mask) {
  constexpr std::int64_t step = F == panel_format::f32 ? 64 : 32;
  constexpr int U = NT == 1 ? 4 : 1;
  __m512 acc[NT][U];
  for (int t = 0; t < NT; ++t)
    for (int u = 0; u < U; ++u) acc[t][u] = _mm512_setzero_ps();
  std::int64_t c = 0;
  for (; c + U <= cols; c += U) {
    _mm_prefetch(reinterpret_cast<const char*>(panel + (c + 16) * step), _MM_HINT_T0);
    for (int u = 0; u < U; ++u) {
      const __m512 wv = load_panel_column(F, panel + (c + u) * step);
      for (int t = 0; t < NT; ++t)
        acc[t][u] = _mm512_fmadd_ps(wv, _mm512_set1_ps(x[t * x_stride + c + u]), acc[t][u]);
    }
  }
  for (; c < cols; ++c) {
    const __m512 wv = load_panel_column(F, panel + c * step);
    for (int t = 0; t < NT; ++t)
      acc[t][0] = _mm512_fmadd_ps(wv, _mm512_set1_ps(x[t * x_stride + c]), acc[t][0]);
  }
  for (int t = 0; t < NT; ++t) {
    __m512 s = acc[t][0];
    for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[t][u]);
    _mm512_mask_storeu_ps(y + t * ldy, mask, s);
  }
}

template <panel_format F>
void matmul_float_avx512(const panel_matrix& w, std::int64_t p0, std::int64_t p1,
                         const activations& a, float* y, std::int64_t ldy) {
  constexpr int tile = 6;
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::byte* panel = w.panel(p);
    const __mmask16 mask = row_mask(w, p);
    for (int t0 = 0; t0 < a.tokens; t0 += tile) {
      const float* x = a.x + t0 * a.x_stride;
      float* yt = y + t0 * ldy + p * panel_rows;
      switch (min_int(tile, a.tokens - t0)) {
        case 1:
          float_tile<F, 1>(panel, w.cols, x, a.x_stride, yt, ldy, mask);
          break;
        case 2:
          float_tile<F, 2>(panel, w.cols, x, a.x_stride, yt, ldy, mask);
          break;
        case 3:
          float_tile<F, 3>(panel, w.cols, x, a.x_stride, yt, ldy, mask);
          break;
        case 4:
          float_tile<F, 4>(panel, w.cols, x, a.x_stride, yt, ldy, mask);
          break;
        case 5:
          float_tile<F, 5>(panel, w.cols, x, a.x_stride, yt, ldy, mask);
          break;
        default:
          float_tile<F, 6>(panel, w.cols, x, a.x_stride, yt, ldy, mask);
          break;
      }
    }
  }
}

inline __m512i bcast4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// q6's high two bits of group g (columns 4g..4g+3 of a half) moved to bits 4 and 5 of each byte
// (16-bit shifts: the bits crossing a byte boundary are masked away).
template <int G>
inline __m512i q6_high_bits(__m512i h) {
  const __m512i m = _mm512_set1_epi8(0x30);
  if constexpr (G == 0) return _mm512_and_si512(_mm512_slli_epi16(h, 4), m);
  if constexpr (G == 1) return _mm512_and_si512(_mm512_slli_epi16(h, 2), m);
  if constexpr (G == 2) return _mm512_and_si512(h, m);
  if constexpr (G == 3) return _mm512_and_si512(_mm512_srli_epi16(h, 2), m);
}

// q5's fifth bit of group g (bit g for columns 0-15, bit 4+g for 16-31) moved to bit 4.
template <int G, int Half>
inline __m512i q5_high_bit(__m512i h) {
  constexpr int from = G + 4 * Half;
  const __m512i m = _mm512_set1_epi8(0x10);
  if constexpr (from < 4) return _mm512_and_si512(_mm512_slli_epi16(h, 4 - from), m);
  if constexpr (from == 4) return _mm512_and_si512(h, m);
  if constexpr (from > 4) return _mm512_and_si512(_mm512_srli_epi16(h, from - 4), m);
}

// Group G's two value vectors (columns 4G.. and 16+4G..) of a q5 or q6 block.
template <panel_format F, int G>
inline void wide_group(const std::byte* qs, __m512i qh0, __m512i qh1, __m512i* wv) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i v = _mm512_loadu_si512(qs + 64 * G);
  const __m512i lo = _mm512_and_si512(v, low4),
                hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  if constexpr (F == panel_format::q5) {
    wv[G] = _mm512_or_si512(lo, q5_high_bit<G, 0>(qh0));
    wv[G + 4] = _mm512_or_si512(hi, q5_high_bit<G, 1>(qh0));
  } else {
    wv[G] = _mm512_or_si512(lo, q6_high_bits<G>(qh0));
    wv[G + 4] = _mm512_or_si512(hi, q6_high_bits<G>(qh1));
  }
}

// NT tokens x 16 rows of a quantized panel: per 32-column block, eight vpdpbusd per token on
// weights loaded once, the offset correction, then one FMA with the two scales (q6: per half).
template <panel_format F, int NT, bool TwoLevels>
void quant_tile(const std::byte* panel, std::int64_t blocks, const quantized_rows& xq, float* y,
                std::int64_t ldy, __mmask16 mask) {
  constexpr std::int64_t step = panel_step_bytes(F);
  constexpr int offset = quant_offset(F);
  constexpr int H = F == panel_format::q6 ? 2 : 1;  // halves summed apart
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* blk = panel + b * step;
    for (std::int64_t line = 0; line < step; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + line), _MM_HINT_T0);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512 dw[H];
    if constexpr (F == panel_format::q6) {
      for (int h = 0; h < 2; ++h)
        dw[h] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                     reinterpret_cast<const __m128i*>(blk + 32 + 16 * h)))));
    } else {
      dw[0] = d;
    }
    const std::byte* qs = blk + quant_header_bytes(F);
    __m512i wv[8];
    if constexpr (F == panel_format::q8) {
      for (int g = 0; g < 8; ++g) wv[g] = _mm512_loadu_si512(qs + 64 * g);
    } else if constexpr (F == panel_format::q5 || F == panel_format::q6) {
      const __m512i qh0 = _mm512_loadu_si512(qs + 256);
      const __m512i qh1 = F == panel_format::q6 ? _mm512_loadu_si512(qs + 320) : qh0;
      wide_group<F, 0>(qs, qh0, qh1, wv);
      wide_group<F, 1>(qs, qh0, qh1, wv);
      wide_group<F, 2>(qs, qh0, qh1, wv);
      wide_group<F, 3>(qs, qh0, qh1, wv);
    } else {
      for (int g = 0; g < 4; ++g) {
        const __m512i v = _mm512_loadu_si512(qs + 64 * g);
        wv[g] = _mm512_and_si512(v, low4);
        wv[g + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const std::int8_t* x = xq.q + t * xq.q_stride + b * qblock;
      const std::int64_t i = t * xq.block_stride + b;
      __m512i hi[H], lo[H];  // lo starts at - offset x the activations' sum (of its half)
      for (int h = 0; h < H; ++h) {
        hi[h] = _mm512_setzero_si512();
        lo[h] = _mm512_set1_epi32(-offset * xq.part_sum(i, h, H));
      }
      for (int g = 0; g < 8; ++g) {
        const int h = g * H / 8;
        hi[h] = _mm512_dpbusd_epi32(hi[h], wv[g], bcast4(x + 4 * g));
        if constexpr (TwoLevels)
          lo[h] = _mm512_dpbusd_epi32(lo[h], wv[g], bcast4(x + xq.lo + 4 * g));
      }
      const __m512 dx = _mm512_set1_ps(xq.scale[t * xq.block_stride + b]);
      for (int h = 0; h < H; ++h)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(level_total(hi[h], lo[h])),
                                 _mm512_mul_ps(dw[h], dx), acc[t]);
      if constexpr (F == panel_format::q4m) {  // - min x the block's activation sum
        const __m512 mw = _mm512_cvtph_ps(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2 * panel_rows)));
        acc[t] = _mm512_fnmadd_ps(mw, _mm512_mul_ps(dx, _mm512_set1_ps(float(xq.sum[i]))), acc[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

template <panel_format F, bool TwoLevels>
void matmul_quant_avx512(const panel_matrix& w, std::int64_t p0, std::int64_t p1,
                         const activations& a, float* y, std::int64_t ldy) {
  constexpr int tile = 6;
  const std::int64_t blocks = w.cols / qblock;
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::byte* panel = w.panel(p);
    const __mmask16 mask = row_mask(w, p);
    for (int t0 = 0; t0 < a.tokens; t0 += tile) {
      quantized_rows xq = a.xq;
      xq.q += t0 * xq.q_stride;
      xq.scale += t0 * xq.block_stride;
      xq.sum += t0 * xq.block_stride;
      xq.half_sum += t0 * xq.block_stride;
      float* yt = y + t0 * ldy + p * panel_rows;
      switch (min_int(tile, a.tokens - t0)) {
        case 1:
          quant_tile<F, 1, TwoLevels>(panel, blocks, xq, yt, ldy, mask);
          break;
        case 2:
          quant_tile<F, 2, TwoLevels>(panel, blocks, xq, yt, ldy, mask);
          break;
        case 3:
          quant_tile<F, 3, TwoLevels>(panel, blocks, xq, yt, ldy, mask);
          break;
        case 4:
          quant_tile<F, 4, TwoLevels>(panel, blocks, xq, yt, ldy, mask);
          break;
        case 5:
          quant_tile<F, 5, TwoLevels>(panel, blocks, xq, yt, ldy, mask);
          break;
        default:
          quant_tile<F, 6, TwoLevels>(panel, blocks, xq, yt, ldy, mask);
          break;
      }
    }
  }
}

template <panel_format F>
void matmul_quant_avx512(const panel_matrix& w, std::int64_t p0, std::int64_t p1,
                         const activations& a, float* y, std::int64_t ldy) {
  if (a.xq.one_level)
    matmul_quant_avx512<F, false>(w, p0, p1, a, y, ldy);
  else
    matmul_quant_avx512<F, true>(w, p0, p1, a, y, ldy);
}

void matmul(const panel_matrix& w, std::int64_t p0, std::int64_t p1, const activations& a, float* y,
            std::int64_t ldy) {
  switch (w.format) {
    case panel_format::f32:
      return matmul_float_avx512<panel_format::f32>(w, p0, p1, a, y, ldy);
    case panel_format::f16:
      return matmul_float_avx512<panel_format::f16>(w, p0, p1, a, y, ldy);
    case panel_format::bf16:
      return matmul_float_avx512<panel_format::bf16>(w, p0, p1, a, y, ldy);
    case panel_format::q8:
      return matmul_quant_avx512<panel_format::q8>(w, p0, p1, a, y, ldy);
    case panel_format::q4:
      return matmul_quant_avx512<panel_format::q4>(w, p0, p1, a, y, ldy);
    case panel_format::q4m:
      return matmul_quant_avx512<panel_format::q4m>(w, p0, p1, a, y, ldy);
    case panel_format::q5:
      return matmul_quant_avx512<panel_format::q5>(w, p0, p1, a, y, ldy);
    case panel_format::q6:
      return matmul_quant_avx512<panel_format::q6>(w, p0, p1, a, y, ldy);
  }
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// ---- AVX2: 16 rows as two 8-row halves ------------------------------------------------------

void quantize_row(const float* x, std::int64_t cols, std::int8_t* q, float* scale,
                  std::int32_t* sum, std::int32_t* half_sum, bool one_level) {
  quantize_row_generic(x, cols, q, scale, sum, half_sum, one_level);
}

inline __m256 load_half_column(panel_format f, const std::byte* col) {
  if (f == panel_format::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(col));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col));
  if (f == panel_format::f16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline void store_rows(float* y, const __m256 lo, const __m256 hi, int valid) {
  if (valid == panel_rows) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
    return;
  }
  alignas(32) float tmp[16];
  _mm256_store_ps(tmp, lo);
  _mm256_store_ps(tmp + 8, hi);
  for (int r = 0; r < valid; ++r) y[r] = tmp[r];
}

template <panel_format F, int NT>
void float_tile(const std::byte* panel, std::int64_t cols, const float* x, std::int64_t x_stride,
                float* y, std::int64_t ldy, int valid) {
  constexpr std::int64_t step = F == panel_format::f32 ? 64 : 32;
  constexpr std::int64_t half = F == panel_format::f32 ? 32 : 16;
  constexpr int U = NT == 1 ? 2 : 1;
  __m256 lo[NT][U], hi[NT][U];
  for (int t = 0; t < NT; ++t)
    for (int u = 0; u < U; ++u) lo[t][u] = hi[t][u] = _mm256_setzero_ps();
  std::int64_t c = 0;
  for (; c + U <= cols; c += U) {
    for (int u = 0; u < U; ++u) {
      const __m256 w0 = load_half_column(F, panel + (c + u) * step);
      const __m256 w1 = load_half_column(F, panel + (c + u) * step + half);
      for (int t = 0; t < NT; ++t) {
        const __m256 xv = _mm256_set1_ps(x[t * x_stride + c + u]);
        lo[t][u] = _mm256_fmadd_ps(w0, xv, lo[t][u]);
        hi[t][u] = _mm256_fmadd_ps(w1, xv, hi[t][u]);
      }
    }
  }
  for (; c < cols; ++c) {
    const __m256 w0 = load_half_column(F, panel + c * step);
    const __m256 w1 = load_half_column(F, panel + c * step + half);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_set1_ps(x[t * x_stride + c]);
      lo[t][0] = _mm256_fmadd_ps(w0, xv, lo[t][0]);
      hi[t][0] = _mm256_fmadd_ps(w1, xv, hi[t][0]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m256 l = lo[t][0], h = hi[t][0];
    for (int u = 1; u < U; ++u) {
      l = _mm256_add_ps(l, lo[t][u]);
      h = _mm256_add_ps(h, hi[t][u]);
    }
    store_rows(y + t * ldy, l, h, valid);
  }
}

template <panel_format F>
void matmul_float_avx2(const panel_matrix& w, std::int64_t p0, std::int64_t p1,
                       const activations& a, float* y, std::int64_t ldy) {
  constexpr int tile = 3;
  for (std::int64_t p = p0; p < p1; ++p) {
    const int valid = int(min_i64(panel_rows, w.rows - p * panel_rows));
    for (int t0 = 0; t0 < a.tokens; t0 += tile) {
      const float* x = a.x + t0 * a.x_stride;
      float* yt = y + t0 * ldy + p * panel_rows;
      switch (min_int(tile, a.tokens - t0)) {
        case 1:
          float_tile<F, 1>(w.panel(p), w.cols, x, a.x_stride, yt, ldy, valid);
          break;
        case 2:
          float_tile<F, 2>(w.panel(p), w.cols, x, a.x_stride, yt, ldy, valid);
          break;
        default:
          float_tile<F, 3>(w.panel(p), w.cols, x, a.x_stride, yt, ldy, valid);
          break;
      }
    }
  }
}

// u8 x s8 with vpmaddubsw: its 16-bit pair sums saturate above 32767, so q8 weights (u8 up to
// 255) go through the sign trick (|w| x sign(x, w), at most 2 x 128 x 127); q4, q5 and q6 values
// (at most 63: 2 x 63 x 127 fits) multiply directly.
template <panel_format F>
inline __m256i dot_group(__m256i w, __m256i x) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (F == panel_format::q8) {
    const __m256i ws = _mm256_xor_si256(w, _mm256_set1_epi8(char(0x80)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(x, ws)),
                             ones);
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
  }
}

inline __m256i bcast4_256(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// q6's high two bits of group g moved to bits 4 and 5 of each byte (as q6_high_bits above).
inline __m256i q6_high_bits_256(__m256i h, int g) {
  const __m256i m = _mm256_set1_epi8(0x30);
  switch (g) {
    case 0:
      return _mm256_and_si256(_mm256_slli_epi16(h, 4), m);
    case 1:
      return _mm256_and_si256(_mm256_slli_epi16(h, 2), m);
    case 2:
      return _mm256_and_si256(h, m);
    default:
      return _mm256_and_si256(_mm256_srli_epi16(h, 2), m);
  }
}

// q5's fifth bit of value group g (0-7) moved to bit 4 (as q5_high_bit above).
inline __m256i q5_high_bit_256(__m256i h, int g) {
  const __m256i m = _mm256_set1_epi8(0x10);
  if (g < 4) return _mm256_and_si256(_mm256_sll_epi16(h, _mm_cvtsi32_si128(4 - g)), m);
  return _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(g - 4)), m);
}

// Rows 0-7 and 8-15 of a quantized block's value group g (0-7: columns 4g..4g+3).
template <panel_format F>
inline void load_group_256(const std::byte* qs, int g, __m256i& w_lo, __m256i& w_hi) {
  const auto* q = reinterpret_cast<const __m256i*>(qs);
  if constexpr (F == panel_format::q8) {
    w_lo = _mm256_loadu_si256(q + 2 * g);
    w_hi = _mm256_loadu_si256(q + 2 * g + 1);
    return;
  }
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i v0 = _mm256_loadu_si256(q + 2 * (g & 3)),
                v1 = _mm256_loadu_si256(q + 2 * (g & 3) + 1);
  w_lo = g < 4 ? _mm256_and_si256(v0, low4) : _mm256_and_si256(_mm256_srli_epi16(v0, 4), low4);
  w_hi = g < 4 ? _mm256_and_si256(v1, low4) : _mm256_and_si256(_mm256_srli_epi16(v1, 4), low4);
  if constexpr (F == panel_format::q5) {
    w_lo = _mm256_or_si256(w_lo, q5_high_bit_256(_mm256_loadu_si256(q + 8), g));
    w_hi = _mm256_or_si256(w_hi, q5_high_bit_256(_mm256_loadu_si256(q + 9), g));
  }
  if constexpr (F == panel_format::q6) {
    const auto* high = q + 8 + 2 * (g >> 2);
    w_lo = _mm256_or_si256(w_lo, q6_high_bits_256(_mm256_loadu_si256(high), g & 3));
    w_hi = _mm256_or_si256(w_hi, q6_high_bits_256(_mm256_loadu_si256(high + 1), g & 3));
  }
}

// 8 rows' scales of a block: f16 d (times q6's int8 sub-block scale of half h) times dx.
template <panel_format F>
inline __m256 block_scale_256(const std::byte* blk, int rows0, int h, __m256 dx) {
  __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 * rows0)));
  if constexpr (F == panel_format::q6) {
    const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 32 + 16 * h + rows0));
    d = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
  }
  return _mm256_mul_ps(d, dx);
}

template <panel_format F>
void matmul_quant_avx2(const panel_matrix& w, std::int64_t p0, std::int64_t p1,
                       const activations& a, float* y, std::int64_t ldy) {
  constexpr std::int64_t step = panel_step_bytes(F);
  constexpr int H = F == panel_format::q6 ? 2 : 1;  // halves summed apart
  const std::int64_t blocks = w.cols / qblock;
  const __m256i ratio = _mm256_set1_epi32(level_ratio);
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::byte* panel = w.panel(p);
    const int valid = int(min_i64(panel_rows, w.rows - p * panel_rows));
    for (int t = 0; t < a.tokens; ++t) {
      __m256 acc_lo = _mm256_setzero_ps(), acc_hi = _mm256_setzero_ps();
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = panel + b * step;
        const std::byte* qs = blk + quant_header_bytes(F);
        const std::int8_t* x = a.xq.q + t * a.xq.q_stride + b * qblock;
        __m256i s_lo[H], s_hi[H];  // rows 0-7, 8-15 (per half, q6)
        for (int h = 0; h < H; ++h) s_lo[h] = s_hi[h] = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g) {
          __m256i w_lo, w_hi;
          load_group_256<F>(qs, g, w_lo, w_hi);
          const __m256i xh = bcast4_256(x + 4 * g);
          __m256i d_lo = _mm256_mullo_epi32(dot_group<F>(w_lo, xh), ratio);
          __m256i d_hi = _mm256_mullo_epi32(dot_group<F>(w_hi, xh), ratio);
          if (!a.xq.one_level) {
            const __m256i xl = bcast4_256(x + a.xq.lo + 4 * g);
            d_lo = _mm256_add_epi32(d_lo, dot_group<F>(w_lo, xl));
            d_hi = _mm256_add_epi32(d_hi, dot_group<F>(w_hi, xl));
          }
          const int h = g * H / 8;
          s_lo[h] = _mm256_add_epi32(s_lo[h], d_lo);
          s_hi[h] = _mm256_add_epi32(s_hi[h], d_hi);
        }
        if constexpr (F != panel_format::q8 && F != panel_format::q4m) {  // offset x the sums
          for (int h = 0; h < H; ++h) {
            const __m256i corr =
                _mm256_set1_epi32(quant_offset(F) * a.xq.part_sum(t * a.xq.block_stride + b, h, H));
            s_lo[h] = _mm256_sub_epi32(s_lo[h], corr);
            s_hi[h] = _mm256_sub_epi32(s_hi[h], corr);
          }
        }
        const __m256 dx = _mm256_set1_ps(a.xq.scale[t * a.xq.block_stride + b]);
        for (int h = 0; h < H; ++h) {
          acc_lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_lo[h]), block_scale_256<F>(blk, 0, h, dx),
                                   acc_lo);
          acc_hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_hi[h]), block_scale_256<F>(blk, 8, h, dx),
                                   acc_hi);
        }
        if constexpr (F == panel_format::q4m) {  // - min x the block's activation sum
          const std::int64_t i = t * a.xq.block_stride + b;
          const __m256 xs = _mm256_set1_ps(a.xq.scale[i] * float(a.xq.sum[i]));
          const auto* mins = reinterpret_cast<const __m128i*>(blk + 2 * panel_rows);
          acc_lo = _mm256_fnmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(mins)), xs, acc_lo);
          acc_hi = _mm256_fnmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(mins + 1)), xs, acc_hi);
        }
      }
      store_rows(y + t * ldy + p * panel_rows, acc_lo, acc_hi, valid);
    }
  }
}

void matmul(const panel_matrix& w, std::int64_t p0, std::int64_t p1, const activations& a, float* y,
            std::int64_t ldy) {
  switch (w.format) {
    case panel_format::f32:
      return matmul_float_avx2<panel_format::f32>(w, p0, p1, a, y, ldy);
    case panel_format::f16:
      return matmul_float_avx2<panel_format::f16>(w, p0, p1, a, y, ldy);
    case panel_format::bf16:
      return matmul_float_avx2<panel_format::bf16>(w, p0, p1, a, y, ldy);
    case panel_format::q8:
      return matmul_quant_avx2<panel_format::q8>(w, p0, p1, a, y, ldy);
    case panel_format::q4:
      return matmul_quant_avx2<panel_format::q4>(w, p0, p1, a, y, ldy);
    case panel_format::q4m:
      return matmul_quant_avx2<panel_format::q4m>(w, p0, p1, a, y, ldy);
    case panel_format::q5:
      return matmul_quant_avx2<panel_format::q5>(w, p0, p1, a, y, ldy);
    case panel_format::q6:
      return matmul_quant_avx2<panel_format::q6>(w, p0, p1, a, y, ldy);
  }
}

#else
// ---- scalar -----------------------------------------------------------------------------------

void quantize_row(const float* x, std::int64_t cols, std::int8_t* q, float* scale,
                  std::int32_t* sum, std::int32_t* half_sum, bool one_level) {
  quantize_row_generic(x, cols, q, scale, sum, half_sum, one_level);
}

void matmul(const panel_matrix& w, std::int64_t p0, std::int64_t p1, const activations& a, float* y,
            std::int64_t ldy) {
  for (std::int64_t p = p0; p < p1; ++p) {
    if (is_quantized(w.format))
      matmul_quant_scalar(w, p, a, y, ldy);
    else
      matmul_float_scalar(w, p, a, y, ldy);
  }
}
#endif

// ---- attention ---------------------------------------------------------------------------------

// One query (token t, head h) over the cache rows 0..pos0+t: plain loops the tier's flags
// vectorize (a horizontal sum per key).
void attention_one(const attention_args& a, int t, int h, float* scores) {
  const int dim = a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const int last = a.pos0 + t;
  const float scale = 1.f / std::sqrt(float(dim));
  const float* q = a.q + std::int64_t(t) * a.n_head * dim + std::int64_t(h) * dim;
  float* out = a.out + std::int64_t(t) * a.n_head * dim + std::int64_t(h) * dim;
  const std::int64_t kv_base = std::int64_t(h / group) * a.n_ctx * dim;
  float best = -INFINITY;
  for (int j = 0; j <= last; ++j) {
    float s = 0;
    if (a.bf16_cache) {
      const auto* k = static_cast<const std::uint16_t*>(a.k) + kv_base + std::int64_t(j) * dim;
#pragma omp simd reduction(+ : s)
      for (int i = 0; i < dim; ++i) s += q[i] * bf16_to_f32(k[i]);
    } else {
      const float* k = static_cast<const float*>(a.k) + kv_base + std::int64_t(j) * dim;
#pragma omp simd reduction(+ : s)
      for (int i = 0; i < dim; ++i) s += q[i] * k[i];
    }
    s *= scale;
    scores[j] = s;
    best = s > best ? s : best;
  }
  float total = 0;
  for (int j = 0; j <= last; ++j) {
    scores[j] = std::exp(scores[j] - best);
    total += scores[j];
  }
  const float inv = 1.f / total;
  for (int i = 0; i < dim; ++i) out[i] = 0;
  for (int j = 0; j <= last; ++j) {
    const float pj = scores[j] * inv;
    if (a.bf16_cache) {
      const auto* v = static_cast<const std::uint16_t*>(a.v) + kv_base + std::int64_t(j) * dim;
#pragma omp simd
      for (int i = 0; i < dim; ++i) out[i] += pj * bf16_to_f32(v[i]);
    } else {
      const float* v = static_cast<const float*>(a.v) + kv_base + std::int64_t(j) * dim;
#pragma omp simd
      for (int i = 0; i < dim; ++i) out[i] += pj * v[i];
    }
  }
}

#if defined(__AVX512F__)
// exp of 16 floats: 2^n e^r with |r| <= ln2 / 2, a degree-6 polynomial (relative error ~2e-7).
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

inline __m512 load_cache16(const void* base, bool bf16, std::int64_t i) {
  if (!bf16) return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  const __m256i h = _mm256_loadu_si256(
      reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(base) + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Tokens [t0, t1) of heads [h0, h1) (one KV head's): the keys they read are transposed once into
// 16-key blocks [block][dim][16], then each query's scores come 16 keys per FMA without
// horizontal sums, the softmax and P V 16 values at a time.
void attention_blocked(const attention_args& a, int t0, int t1, int h0, int h1, float* scratch) {
  const int dim = a.head_dim;
  const int kv = h0 / (a.n_head / a.n_head_kv);
  const int keys = a.pos0 + t1;  // the last token reads rows 0..keys-1
  const int blocks = (keys + 15) / 16;
  const std::int64_t kv_base = std::int64_t(kv) * a.n_ctx * dim;
  float* kt = scratch;
  float* scores = scratch + std::int64_t(blocks) * 16 * dim;
  for (int j = 0; j < blocks * 16; ++j) {
    float* col = kt + std::int64_t(j / 16) * 16 * dim + j % 16;
    if (j >= keys) {
      for (int i = 0; i < dim; ++i) col[i * 16] = 0;
    } else if (a.bf16_cache) {
      const auto* k = static_cast<const std::uint16_t*>(a.k) + kv_base + std::int64_t(j) * dim;
      for (int i = 0; i < dim; ++i) col[i * 16] = bf16_to_f32(k[i]);
    } else {
      const float* k = static_cast<const float*>(a.k) + kv_base + std::int64_t(j) * dim;
      for (int i = 0; i < dim; ++i) col[i * 16] = k[i];
    }
  }
  const __m512 scale = _mm512_set1_ps(1.f / std::sqrt(float(dim)));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int t = t0; t < t1; ++t)
    for (int h = h0; h < h1; ++h) {
      const float* q = a.q + std::int64_t(t) * a.n_head * dim + std::int64_t(h) * dim;
      float* out = a.out + std::int64_t(t) * a.n_head * dim + std::int64_t(h) * dim;
      const int n = a.pos0 + t + 1;  // keys this query reads
      const int nb = (n + 15) / 16;
      __m512 best = _mm512_set1_ps(-INFINITY);
      int b = 0;
      for (; b + 2 <= nb; b += 2) {  // two blocks: two FMA chains
        const float* k0 = kt + std::int64_t(b) * 16 * dim;
        const float* k1 = k0 + 16 * dim;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (int i = 0; i < dim; ++i) {
          const __m512 qi = _mm512_set1_ps(q[i]);
          s0 = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k0 + 16 * i), s0);
          s1 = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k1 + 16 * i), s1);
        }
        _mm512_storeu_ps(scores + 16 * b, _mm512_mul_ps(s0, scale));
        _mm512_storeu_ps(scores + 16 * b + 16, _mm512_mul_ps(s1, scale));
      }
      for (; b < nb; ++b) {
        const float* k0 = kt + std::int64_t(b) * 16 * dim;
        __m512 s0 = _mm512_setzero_ps();
        for (int i = 0; i < dim; ++i)
          s0 = _mm512_fmadd_ps(_mm512_set1_ps(q[i]), _mm512_loadu_ps(k0 + 16 * i), s0);
        _mm512_storeu_ps(scores + 16 * b, _mm512_mul_ps(s0, scale));
      }
      // keys past this query's position do not count
      const __mmask16 tail = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(n - 16 * (nb - 1)));
      _mm512_storeu_ps(scores + 16 * (nb - 1),
                       _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), tail,
                                          _mm512_loadu_ps(scores + 16 * (nb - 1))));
      for (b = 0; b < nb; ++b) best = _mm512_max_ps(best, _mm512_loadu_ps(scores + 16 * b));
      const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(best));
      __m512 total = _mm512_setzero_ps();
      for (b = 0; b < nb; ++b) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + 16 * b), top));
        _mm512_storeu_ps(scores + 16 * b, e);
        total = _mm512_add_ps(total, e);
      }
      const float inv = 1.f / _mm512_reduce_add_ps(total);
      for (int i0 = 0; i0 < dim; i0 += 16) {  // out = P V, 16 dims at a time, two chains
        __m512 o0 = _mm512_setzero_ps(), o1 = _mm512_setzero_ps();
        const std::int64_t base = kv_base + i0;
        int j = 0;
        for (; j + 2 <= n; j += 2) {
          o0 = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]),
                               load_cache16(a.v, a.bf16_cache, base + std::int64_t(j) * dim), o0);
          o1 = _mm512_fmadd_ps(_mm512_set1_ps(scores[j + 1]),
                               load_cache16(a.v, a.bf16_cache, base + std::int64_t(j + 1) * dim),
                               o1);
        }
        if (j < n)
          o0 = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]),
                               load_cache16(a.v, a.bf16_cache, base + std::int64_t(j) * dim), o0);
        _mm512_storeu_ps(out + i0, _mm512_mul_ps(_mm512_add_ps(o0, o1), _mm512_set1_ps(inv)));
      }
    }
}
#endif

void swiglu(float* g, const float* u, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512F__)
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.f), e));
    _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, u + i)));
  }
#endif
  for (; i < n; ++i) g[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

void attention(const attention_args& a, int t0, int t1, int h0, int h1, float* scratch) {
#if defined(__AVX512F__)
  if (a.head_dim % 16 == 0 && t1 - t0 > 1) return attention_blocked(a, t0, t1, h0, h1, scratch);
#endif
  for (int t = t0; t < t1; ++t)
    for (int h = h0; h < h1; ++h) attention_one(a, t, h, scratch);
}

}  // namespace

const kernel_table& KFUSE_LLM_TABLE() {
  static const kernel_table table{KFUSE_LLM_TIER_NAME, &matmul, &quantize_row, &swiglu, &attention};
  return table;
}

}  // namespace kfuse::llm::detail
