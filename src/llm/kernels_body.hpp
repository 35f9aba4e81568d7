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

void quantize_row(const float* x, std::int64_t cols, std::int8_t* q, float* scale,
                  std::int32_t* sum, bool one_level) {
  for (std::int64_t b = 0; b < cols / qblock; ++b) {
    const float* xb = x + b * qblock;
    float amax = 0;
#pragma omp simd reduction(max : amax)
    for (int i = 0; i < qblock; ++i) amax = amax > std::fabs(xb[i]) ? amax : std::fabs(xb[i]);
    const float D = amax / 127.f;
    const float d = D / float(level_ratio);
    const float inv_D = D > 0 ? 1.f / D : 0.f, inv_d = d > 0 ? 1.f / d : 0.f;
    std::int32_t s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < qblock; ++i) {
      const float hi = std::nearbyint(xb[i] * inv_D);
      float lo = one_level ? 0.f : std::nearbyint((xb[i] - hi * D) * inv_d);
      lo = lo > 127.f ? 127.f : lo < -127.f ? -127.f : lo;
      q[b * qblock + i] = std::int8_t(hi);
      q[cols + b * qblock + i] = std::int8_t(lo);
      s += std::int32_t(hi) * level_ratio + std::int32_t(lo);
    }
    scale[b] = d;
    sum[b] = s;
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

// Weight value (u8, offset included) of row r, column c of a quantized block.
inline int quant_at(panel_format f, const std::uint8_t* qs, int r, int c) {
  if (f == panel_format::q8) return qs[(c / 4) * 64 + r * 4 + c % 4];
  const int g = (c % 16) / 4, t = c % 4;
  const std::uint8_t byte = qs[g * 64 + r * 4 + t];
  return c < 16 ? byte & 15 : byte >> 4;
}

[[maybe_unused]] void matmul_quant_scalar(const panel_matrix& w, std::int64_t p,
                                          const activations& a, float* y, std::int64_t ldy) {
  const std::byte* panel = w.panel(p);
  const std::int64_t step = panel_step_bytes(w.format);
  const int offset = w.format == panel_format::q8 ? 128 : w.format == panel_format::q4 ? 8 : 0;
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
        std::uint16_t h;
        std::memcpy(&h, blk + 2 * r, 2);
        const auto* qs = reinterpret_cast<const std::uint8_t*>(blk + quant_header_bytes(w.format));
        std::int32_t dot = 0;
        for (int c = 0; c < qblock; ++c)
          dot += quant_at(w.format, qs, r, c) *
                 (level_ratio * xq[b * qblock + c] + xq[a.xq.lo + b * qblock + c]);
        dot -= offset * xs[b];
        acc += float(dot) * (f16_to_f32(h) * xd[b]);
        if (w.format == panel_format::q4m) {  // - min x the block's activation sum
          std::memcpy(&h, blk + 2 * (panel_rows + r), 2);
          acc -= f16_to_f32(h) * (xd[b] * float(xs[b]));
        }
      }
      y[t * ldy + p * panel_rows + r] = acc;
    }
  }
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
// ---- AVX-512 (VNNI) --------------------------------------------------------------------------

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

// NT tokens x 16 rows of a quantized panel: per 32-column block, eight vpdpbusd per token on
// weights loaded once, the offset correction, then one FMA with the two scales.
template <panel_format F, int NT, bool TwoLevels>
void quant_tile(const std::byte* panel, std::int64_t blocks, const quantized_rows& xq, float* y,
                std::int64_t ldy, __mmask16 mask) {
  constexpr std::int64_t step = panel_step_bytes(F);
  constexpr int offset = F == panel_format::q8 ? 128 : F == panel_format::q4 ? 8 : 0;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* blk = panel + b * step;
    _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 64), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 128), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 192), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 256), _MM_HINT_T0);
    if constexpr (F == panel_format::q8) {
      _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 320), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 384), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 448), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + 8 * step + 512), _MM_HINT_T0);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const std::byte* qs = blk + quant_header_bytes(F);
    __m512i wv[8];
    if constexpr (F == panel_format::q8) {
      for (int g = 0; g < 8; ++g) wv[g] = _mm512_loadu_si512(qs + 64 * g);
    } else {
      for (int g = 0; g < 4; ++g) {
        const __m512i v = _mm512_loadu_si512(qs + 64 * g);
        wv[g] = _mm512_and_si512(v, low4);
        wv[g + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const std::int8_t* x = xq.q + t * xq.q_stride + b * qblock;
      __m512i hi = _mm512_setzero_si512();
      __m512i lo = _mm512_set1_epi32(-offset * xq.sum[t * xq.block_stride + b]);
      for (int g = 0; g < 8; ++g) {
        hi = _mm512_dpbusd_epi32(hi, wv[g], bcast4(x + 4 * g));
        if constexpr (TwoLevels) lo = _mm512_dpbusd_epi32(lo, wv[g], bcast4(x + xq.lo + 4 * g));
      }
      // 254 hi + lo, with 254 hi = 256 hi - 2 hi
      const __m512i total = _mm512_add_epi32(
          _mm512_sub_epi32(_mm512_slli_epi32(hi, 8), _mm512_slli_epi32(hi, 1)), lo);
      const float dx = xq.scale[t * xq.block_stride + b];
      acc[t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[t]);
      if constexpr (F == panel_format::q4m) {  // - min x the block's activation sum
        const __m512 mw = _mm512_cvtph_ps(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2 * panel_rows)));
        acc[t] = _mm512_fnmadd_ps(mw, _mm512_set1_ps(dx * float(xq.sum[t * xq.block_stride + b])),
                                  acc[t]);
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
  }
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// ---- AVX2: 16 rows as two 8-row halves ------------------------------------------------------

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
// 255) go through the sign trick (|w| x sign(x, w), at most 2 x 128 x 127); q4 nibbles (at most
// 15) multiply directly.
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

template <panel_format F>
void matmul_quant_avx2(const panel_matrix& w, std::int64_t p0, std::int64_t p1,
                       const activations& a, float* y, std::int64_t ldy) {
  constexpr std::int64_t step = panel_step_bytes(F);
  const std::int64_t blocks = w.cols / qblock;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
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
        __m256i s_lo = _mm256_setzero_si256(), s_hi = _mm256_setzero_si256();  // rows 0-7, 8-15
        for (int g = 0; g < 8; ++g) {
          __m256i w_lo, w_hi;
          if constexpr (F == panel_format::q8) {
            w_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64 * g));
            w_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64 * g + 32));
          } else {
            const __m256i v0 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64 * (g & 3)));
            const __m256i v1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64 * (g & 3) + 32));
            w_lo = g < 4 ? _mm256_and_si256(v0, low4)
                         : _mm256_and_si256(_mm256_srli_epi16(v0, 4), low4);
            w_hi = g < 4 ? _mm256_and_si256(v1, low4)
                         : _mm256_and_si256(_mm256_srli_epi16(v1, 4), low4);
          }
          const __m256i xh = bcast4_256(x + 4 * g);
          __m256i d_lo = _mm256_mullo_epi32(dot_group<F>(w_lo, xh), ratio);
          __m256i d_hi = _mm256_mullo_epi32(dot_group<F>(w_hi, xh), ratio);
          if (!a.xq.one_level) {
            const __m256i xl = bcast4_256(x + a.xq.lo + 4 * g);
            d_lo = _mm256_add_epi32(d_lo, dot_group<F>(w_lo, xl));
            d_hi = _mm256_add_epi32(d_hi, dot_group<F>(w_hi, xl));
          }
          s_lo = _mm256_add_epi32(s_lo, d_lo);
          s_hi = _mm256_add_epi32(s_hi, d_hi);
        }
        if constexpr (F == panel_format::q4) {
          const __m256i corr = _mm256_set1_epi32(8 * a.xq.sum[t * a.xq.block_stride + b]);
          s_lo = _mm256_sub_epi32(s_lo, corr);
          s_hi = _mm256_sub_epi32(s_hi, corr);
        }
        const __m256 dx = _mm256_set1_ps(a.xq.scale[t * a.xq.block_stride + b]);
        const __m256 d_lo = _mm256_mul_ps(
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk))), dx);
        const __m256 d_hi = _mm256_mul_ps(
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16))), dx);
        acc_lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_lo), d_lo, acc_lo);
        acc_hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_hi), d_hi, acc_hi);
        if constexpr (F == panel_format::q4m) {  // - min x the block's activation sum
          const __m256 xs = _mm256_set1_ps(a.xq.scale[t * a.xq.block_stride + b] *
                                           float(a.xq.sum[t * a.xq.block_stride + b]));
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
  }
}

#else
// ---- scalar -----------------------------------------------------------------------------------

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

// ---- attention (plain loops; the tier's flags vectorize them) ----------------------------------

inline float cache_at(const void* base, bool bf16, std::int64_t i) {
  return bf16 ? bf16_to_f32(static_cast<const std::uint16_t*>(base)[i])
              : static_cast<const float*>(base)[i];
}

void attention(const attention_args& a, int t, int h0, int h1, float* scores) {
  const int dim = a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const int last = a.pos0 + t;  // attends to cache rows 0..last
  const float scale = 1.f / std::sqrt(float(dim));
  for (int h = h0; h < h1; ++h) {
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
  (void)cache_at;
}

}  // namespace

const kernel_table& KFUSE_LLM_TABLE() {
  static const kernel_table table{KFUSE_LLM_TIER_NAME, &matmul, &quantize_row, &attention};
  return table;
}

}  // namespace kfuse::llm::detail
