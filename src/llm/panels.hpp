#pragma once
// The weight formats the kernels read: a matrix of `rows` outputs x `cols` inputs cut into panels
// of 16 rows (the last one zero-padded), each panel laid out so that one 64-byte load feeds one
// SIMD instruction for all 16 rows, with no horizontal reduction:
//   f32 / f16 / bf16: [col][16 rows]                      (a column of the panel per load)
//   q8 (from Q8_0):   per 32-column block: 16 f16 scales, then [8 groups of 4 cols][16 rows][4]
//                     bytes stored as u8 = q + 128 (vpdpbusd multiplies u8 by s8)
//   q4 (from Q4_0):   per 32-column block: 16 f16 scales, then [4][16 rows][4] bytes; byte t of
//                     group g holds column 4g+t in its low nibble and 16+4g+t in its high one
//                     (GGUF's own nibble order), values u8 = q + 8
//   q4m (from Q4_K):  as q4, with 16 f16 mins after the scales: value = scale q - min, q the
//                     nibble (Q4_K's 32-value sub-blocks with their 6-bit scales and mins applied
//                     to the super-block's d and dmin: exact up to the f16 rounding of the product)
//   q5 (from Q5_0):   as q4, then one [16 rows][4] byte array of the fifth bits: bit g of byte t
//                     belongs to column 4g+t, bit 4+g to column 16+4g+t; values u8 = q + 16,
//                     5.5 bits per weight (as Q5_0), exact
//   q6 (from Q6_K):   per 32-column block: 16 f16 d (the rows' super-block scales), then 16 int8
//                     scales of columns 0-15 and 16 of columns 16-31 (Q6_K's 16-value sub-blocks),
//                     the low four bits as q4's nibbles, then two [16 rows][4] byte arrays of the
//                     high two bits: bits 2g, 2g+1 of byte t of array h belong to column 16h+4g+t;
//                     values u8 = q + 32 (q in -32..31), 7 bits per weight (Q6_K: 6.56), exact
// Quantized formats multiply u8 weights by the int8 activations of a 32-column block; the offset
// (128, 16 or 8) times the block's activation sum is subtracted once per block; q4m subtracts its
// min times the block's activation sum instead; q6 sums its two 16-column halves apart (each has
// its scale) and subtracts 32 times each half's activation sum.
//
// Activations are quantized in two int8 levels per 32-value block: x = d (254 hi + lo) with
// hi = round(x / 254d) and lo the rounded remainder, so ~15 bits of each value survive (one level,
// llama.cpp's scheme, keeps 8 and costs the logits a cosine of ~0.9998 against fp32). Decoding
// reads weights at memory speed, so the second vpdpbusd per weight load is free there. Prefill is
// bound by the dot products instead: session_options::fast_prefill quantizes a prompt's tokens
// in one level (lo = 0, skipped), llama.cpp's arithmetic.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kfuse::llm::detail {

inline constexpr int panel_rows = 16;
inline constexpr int qblock = 32;

enum class panel_format { f32, f16, bf16, q8, q4, q4m, q5, q6 };

inline const char* panel_format_name(panel_format f) {
  switch (f) {
    case panel_format::f32:
      return "f32";
    case panel_format::f16:
      return "f16";
    case panel_format::bf16:
      return "bf16";
    case panel_format::q8:
      return "q8_0";
    case panel_format::q4:
      return "q4_0";
    case panel_format::q4m:
      return "q4_k";
    case panel_format::q5:
      return "q5_0";
    case panel_format::q6:
      return "q6_k";
  }
  return "?";
}
constexpr bool is_quantized(panel_format f) {
  return f == panel_format::q8 || f == panel_format::q4 || f == panel_format::q4m ||
         f == panel_format::q5 || f == panel_format::q6;
}
/// Bytes before a quantized block's values: the 16 rows' f16 scales (and mins, q4m; and two
/// int8 sub-block scales, q6).
constexpr std::int64_t quant_header_bytes(panel_format f) {
  return (f == panel_format::q4m || f == panel_format::q6 ? 4 : 2) * panel_rows;
}

/// Bytes of one panel's 32-column block (quantized formats) or one panel column (float formats).
constexpr std::int64_t panel_step_bytes(panel_format f) {
  switch (f) {
    case panel_format::f32:
      return 4 * panel_rows;
    case panel_format::f16:
    case panel_format::bf16:
      return 2 * panel_rows;
    case panel_format::q8:
      return 2 * panel_rows + qblock * panel_rows;
    case panel_format::q4:
    case panel_format::q4m:
      return quant_header_bytes(f) + qblock / 2 * panel_rows;
    case panel_format::q5:
      return quant_header_bytes(f) + qblock / 2 * panel_rows + qblock / 8 * panel_rows;
    case panel_format::q6:
      return quant_header_bytes(f) + qblock / 2 * panel_rows + qblock / 4 * panel_rows;
  }
  return 0;
}

struct aligned_free {
  void operator()(std::byte* p) const noexcept;
};
using aligned_bytes = std::unique_ptr<std::byte[], aligned_free>;
/// 64-byte aligned; from 2 MiB up, 2 MiB aligned and (with `huge_pages`) marked for huge pages.
aligned_bytes allocate_aligned(std::size_t bytes, bool huge_pages = true);

struct panel_matrix {
  panel_format format = panel_format::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t panels = 0;
  std::int64_t panel_bytes = 0;  // stride between panels
  aligned_bytes data;

  const std::byte* panel(std::int64_t p) const { return data.get() + p * panel_bytes; }
  /// Bytes a product with one token reads (the padded panels).
  std::uint64_t bytes() const { return std::uint64_t(panels * panel_bytes); }
};

/// Two-level int8 activations of `tokens` rows of `cols` values: per token the `cols` high
/// values, then the `cols` low ones; per 32-value block the unit d, the sum 254 hi + lo, and that
/// sum over the block's first 16 values (q6's sub-blocks).
struct quantized_rows {
  const std::int8_t* q = nullptr;
  const float* scale = nullptr;
  const std::int32_t* sum = nullptr;
  const std::int32_t* half_sum = nullptr;
  std::int64_t q_stride = 0;      // int8 values between tokens (2 cols)
  std::int64_t block_stride = 0;  // blocks between tokens
  std::int64_t lo = 0;            // from a token's high values to its low ones (cols)
  bool one_level = false;         // the low values are all zero: kernels may skip them

  /// Block i's activation sum, or that of half h of it (halves 2: q6's sub-blocks).
  std::int32_t part_sum(std::int64_t i, int h, int halves) const {
    return halves == 1 ? sum[i] : h == 0 ? half_sum[i] : sum[i] - half_sum[i];
  }
};
inline constexpr int level_ratio = 254;

/// The input of a matrix product: f32 rows (float formats) and / or their quantized form.
struct activations {
  const float* x = nullptr;
  std::int64_t x_stride = 0;
  quantized_rows xq;
  int tokens = 1;
};

}  // namespace kfuse::llm::detail
