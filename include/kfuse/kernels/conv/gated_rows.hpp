#pragma once
// The squeeze-excite gate of an int8 pointwise conv, applied where the conv loads its input:
// conv2d<i8, nhwc>::run_gated reads the f32 feature map, multiplies each value by its sample's
// channel gate and quantizes it to u8 one block of rows at a time, into a per-thread slot that
// stays in L1 / L2 while the int8 GEMM reads it. The gated u8 tensor is never written to
// memory and the multiply has no pass of its own. (The f32 and bf16 recipes scale a copy of the
// weights instead; int8 weights cannot absorb a per-sample scale without being requantized.)
#include <algorithm>
#include <cstdint>

#include "kfuse/epilogue/quantize.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// out[r, i] = clamp(round_even(x[r, i] * gate[i] / scale) + zero_point, 0, 255) for `rows` rows
/// of c values: exactly what a multiply stage followed by quantize<u8> computes, so the gated
/// conv reads the bytes the unfused plan's multiply pass would have written.
template <class V>
void quantize_gated_rows(const float* x, index_t rows, index_t c, const float* gate, float scale,
                         std::int32_t zero_point, std::uint8_t* out) {
  constexpr int L = V::lanes;
  const V s(scale), z = V(float(zero_point));
  auto q = [&](V v, V g) { return stage_detail::saturate<u8>(simd::round_even(v * g / s) + z); };
  for (index_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    std::uint8_t* o = out + r * c;
    index_t i = 0;
    for (; i + L <= c; i += L)
      simd::store(o + i, q(simd::load<V>(xr + i), simd::load<V>(gate + i)));
    if (i < c) {
      const int n = int(c - i);
      simd::store_partial(
          o + i, q(simd::load_partial<V>(xr + i, n), simd::load_partial<V>(gate + i, n)), n);
    }
  }
}

/// Rows of one thread's slot: whole row tiles of `mr` whose u8 rows take about 32 KiB (so a
/// block is in L1 when the GEMM's first panel reads it), at least one tile.
inline index_t gated_slot_rows(index_t c, int mr) {
  return std::max<index_t>(mr, (index_t(32) << 10) / std::max<index_t>(c, 1) / mr * mr);
}

/// Rows of one block for a sample of `rows` rows: at most a slot, and small enough that each of
/// `threads` threads gets a block of a single sample.
inline index_t gated_block_rows(index_t rows, index_t c, int mr, int threads) {
  const index_t share = (rows + threads - 1) / std::max(threads, 1);
  const index_t split = std::max<index_t>(mr, (share + mr - 1) / mr * mr);
  return std::min({gated_slot_rows(c, mr), split, std::max<index_t>(rows, 1)});
}

}  // namespace detail

KFUSE_END_NAMESPACE
