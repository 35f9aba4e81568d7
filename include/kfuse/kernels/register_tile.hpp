#pragma once
// A register tile of accumulators (Rows x NV vectors) on its way out of a kernel: zeroed or
// resumed from partial sums, saved as partial sums, or finished by the epilogue and stored once.
// Shared by the gemm, conv and depthwise tiles.
#include <algorithm>

#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Starts a tile's accumulators at zero, or from the partial sums (Rows x NV x L floats) that an
/// earlier range of K saved with save_tile.
template <class V, int Rows, int NV>
KFUSE_INLINE void start_tile(V (&acc)[Rows][NV], const float* part, bool first) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j)
      acc[r][j] = first ? V(0.f) : simd::load<V>(part + (r * NV + j) * V::lanes);
}

/// Saves a tile's accumulators as partial sums for the next range of K.
template <class V, int Rows, int NV>
KFUSE_INLINE void save_tile(const V (&acc)[Rows][NV], float* part) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) simd::store(part + (r * NV + j) * V::lanes, acc[r][j]);
}

/// Runs the epilogue on a finished Rows x NV tile and stores it once: row r goes to
/// out + r * ld (its first `valid` columns); lane_ctx gets flat index flat0 + r * flat_ld + col
/// and channel ch0 + col (PerLane) or ch0 + r * ch_step (rows of channels: 1; rows of one
/// channel's plane, an NCHW tile's: 0). An out-of-line epilogue (the graph's run-time
/// chain, epilogue_traits) would be a call per output vector, and each call clobbers every
/// vector register (GCC saved and restored the tile around each one, and the chain dispatched
/// its stages once per vector: gemm ran 10-15% slower than with the same compile-time stages).
/// So the tile is saved to memory and the epilogue runs on it stage by stage.
template <bool PerLane, class V, int Rows, int NV, class Out, class Ep>
KFUSE_INLINE void store_tile(const V (&acc)[Rows][NV], Out* KFUSE_RESTRICT out, index_t ld,
                             index_t flat0, index_t flat_ld, index_t ch0, index_t valid,
                             const Ep& ep, index_t ch_step = 1) {
  constexpr int L = V::lanes;
  constexpr bool saved_first = epilogue_traits<Ep>::out_of_line;
  alignas(64) float saved[saved_first ? Rows * NV * L : 1];
  if constexpr (saved_first) {
    save_tile(acc, saved);
    apply_to_tile<V, PerLane>(ep, saved_tile{saved, Rows, NV, valid, flat0, flat_ld, ch0, ch_step});
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const index_t col = j * L;
      if (col >= valid) break;
      const int n = int(std::min<index_t>(L, valid - col));
      V y;
      if constexpr (saved_first) {
        y = simd::load<V>(saved + (r * NV + j) * L);
      } else {
        const lane_ctx<V, PerLane> ctx{flat0 + r * flat_ld + col,
                                       PerLane ? ch0 + col : ch0 + r * ch_step, n};
        y = apply(ep, acc[r][j], ctx);
      }
      if (n == L)
        simd::store(out + r * ld + col, y);
      else
        simd::store_partial(out + r * ld + col, y, n);
    }
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
