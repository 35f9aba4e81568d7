#pragma once
// The squeeze-excite gate of a pointwise conv, applied where the conv loads its input:
// conv2d<..., nhwc>::run_gated multiplies each value of the feature map by its sample's channel
// gate (int8: and quantizes it to u8) one block of rows at a time, into a per-thread slot that
// stays in L1 / L2 while the GEMM reads it. The gated tensor is never written to memory and the
// multiply has no pass of its own. int8 always gates this way (its weights cannot absorb a
// per-sample scale without being requantized); f32 and bf16 where scaling a copy of the
// weights would cost more (K > H x W).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kfuse/epilogue/quantize.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// out[r, i] = x[r, i] * gate[i] for `rows` rows of c values, stored as T: u8 as a multiply and
/// then quantize<u8> compute it (clamp(round_even(x * g / scale) + zero_point, 0, 255)), bf16
/// rounded to nearest even as a conversion pass does, or f32. So the gated conv reads the values
/// the unfused plan's multiply pass (and its conversion) would have written.
template <class V, class TX, class T>
void gate_rows(const TX* x, index_t rows, index_t c, const float* gate, T* out, float scale,
               std::int32_t zero_point) {
  constexpr int L = V::lanes;
  const V s(scale), z = V(float(zero_point));
  auto q = [&](V v, V g) {
    if constexpr (std::is_same_v<T, std::uint8_t>)
      return stage_detail::saturate<u8>(simd::round_even(v * g / s) + z);
    else
      return v * g;
  };
  for (index_t r = 0; r < rows; ++r) {
    const TX* xr = x + r * c;
    T* o = out + r * c;
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
