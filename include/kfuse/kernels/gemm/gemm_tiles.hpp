#pragma once
// The register tiles of gemm (gemm.hpp): a tile of C accumulated by a micro-kernel over K, its
// epilogue on the registers and one store; the panels of row tiles over one packed weight
// panel; AMX accumulator blocks through the same epilogue.
#include <cstring>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/gemm/amx.hpp"
#include "kfuse/kernels/gemm/config.hpp"
#include "kfuse/kernels/gemm/microkernels.hpp"
#include "kfuse/kernels/register_tile.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// What integer micro-kernels need to turn accumulators into real values.
struct int_args {
  const std::int32_t* col_sums = nullptr;  // per column of B
  std::int32_t a_zero = 0;                 // A's zero point (after any s8 -> u8 shift)
};

/// The K loop of an int8 tile in a function of its own. Inlined into the tile, GCC 12 allocates
/// the vpdpbusd accumulators together with the epilogue's constants and reloads them from the
/// stack inside the loop (requantize measured 20-55% slower than bare); outlined, every
/// accumulator stays in a register (bare +5-35%, requantize within noise of bare). The call
/// costs one store and reload of the tile per K range. The FMA kernels stay inlined: their
/// accumulators are simd::vec objects, which GCC keeps in memory across such a call (f32 at 40%).
template <class MK, class V, int Rows, int NV, int NR, class AR>
KFUSE_NOINLINE void accumulate_tile(V (&acc)[Rows][NV], const AR a,
                                    const typename MK::storage* KFUSE_RESTRICT bp, index_t k0,
                                    index_t k1) {
  MK::template accumulate<V, Rows, NV, NR>(acc, a, bp, k0, k1);
}

/// A finished tile out of a kernel: int8 accumulators corrected for A's zero point (and made
/// real unless C takes the raw int32), then every epilogue stage and one store.
template <class MK, class V, int Rows, int NV, class Out, class Ep>
KFUSE_INLINE void finish_tile(V (&acc)[Rows][NV], Out* KFUSE_RESTRICT c, index_t ldc, index_t row0,
                              index_t col0, index_t N, const Ep& ep, const int_args& ia,
                              index_t flat_base) {
  constexpr int L = V::lanes;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    const index_t row = row0 + r;
    if constexpr (MK::integer && std::is_same_v<Out, std::int32_t>) {
      // The raw int32 accumulators minus the zero-point correction: exact, no epilogue.
      MK::template finish_int<V, NV>(acc[r], ia.col_sums + col0, ia.a_zero);
      for (int j = 0; j < NV && col0 + j * L < N; ++j) {
        const int n = int(std::min<index_t>(L, N - (col0 + j * L)));
        std::int32_t* dst = c + row * ldc + col0 + j * L;
        // A constant size is one vector store; a variable one would call memcpy per vector.
        if (n == L)
          std::memcpy(dst, &acc[r][j].r, sizeof(std::int32_t) * L);
        else
          std::memcpy(dst, &acc[r][j].r, sizeof(std::int32_t) * std::size_t(n));
      }
    } else if constexpr (MK::integer) {
      MK::template finish<V, NV>(acc[r], ia.col_sums + col0, ia.a_zero);
    }
  }
  if constexpr (!(MK::integer && std::is_same_v<Out, std::int32_t>))
    store_tile<true, !std::is_same_v<typename MK::storage, float>>(
        acc, c + row0 * ldc + col0, ldc, flat_base + row0 * N + col0, N, col0, N - col0, ep);
}

// One register tile: Rows x NV vectors of C, accumulated by micro-kernel MK over rows k0..k1 of K.
// `bp` points at the tile's panel. With a partial-sum buffer `part` (Rows x NV x L floats) the
// tile starts from `part` unless `first` and ends by saving to `part` unless Last; when Last,
// every epilogue stage runs on the registers and C is stored once.
template <class MK, class V, int Rows, int NV, int NR, bool Last = true, class TA, class Out,
          class Ep>
KFUSE_INLINE void gemm_tile(const TA* KFUSE_RESTRICT a, index_t lda,
                            const typename MK::storage* KFUSE_RESTRICT bp, index_t k0, index_t k1,
                            Out* KFUSE_RESTRICT c, index_t ldc, index_t row0, index_t col0,
                            index_t N, const Ep& ep, const int_args& ia, float* part = nullptr,
                            index_t flat_base = 0, bool first = true) {
  V acc[Rows][NV];
  start_tile(acc, part, first);
  const strided_rows<TA> ar{a, lda};
  if constexpr (MK::integer && V::lanes > 1)
    accumulate_tile<MK, V, Rows, NV, NR>(acc, ar, bp, k0, k1);
  else
    MK::template accumulate<V, Rows, NV, NR>(acc, ar, bp, k0, k1);
  if constexpr (!Last) {
    save_tile(acc, part);
    return;
  }
  finish_tile<MK, V, Rows, NV>(acc, c, ldc, row0, col0, N, ep, ia, flat_base);
}

/// gemm_tile out of line, for the tiles other than the full MR-row ones: the rows of a small M
/// and of the last row tile, and the K-chunked halves of a 7- or 8-row tile. Each shape is then
/// compiled once per kernel instead of once per call site (the tile code was nearly all of a
/// kernel's build time); such a tile runs once per panel, where the call costs nothing
/// measurable. The full tiles, which run for every MR rows, stay inline (out of line, a K = 16
/// gemm ran 6% slower).
template <class MK, class V, int Rows, int NV, int NR, bool Last = true, class TA, class Out,
          class Ep>
KFUSE_NOINLINE void gemm_tile_outlined(const TA* a, index_t lda, const typename MK::storage* bp,
                                       index_t k0, index_t k1, Out* c, index_t ldc, index_t row0,
                                       index_t col0, index_t N, const Ep& ep, const int_args& ia,
                                       float* part, index_t flat_base, bool first) {
  gemm_tile<MK, V, Rows, NV, NR, Last>(a, lda, bp, k0, k1, c, ldc, row0, col0, N, ep, ia, part,
                                       flat_base, first);
}

// A full panel for `rows` rows, 1 <= rows <= Rows. Tiles of more than MR rows (the small-M path,
// 7 <= M <= 8) do not fit the registers in one piece: they run as two row groups over K chunks
// small enough to stay in L2, keeping partial sums in a small buffer, so each weight still comes
// from memory once. flat_base offsets the epilogue's flat index (batched_gemm: the matrix's
// place in the batch).
template <class MK, class V, int MR, int NV, int Rows, class TA, class Out, class Ep>
KFUSE_INLINE void gemm_panel_rows(int rows, const TA* a, index_t lda,
                                  const typename MK::storage* bp, index_t K, Out* c, index_t ldc,
                                  index_t row0, index_t col0, index_t N, const Ep& ep,
                                  const int_args& ia, index_t flat_base = 0) {
  constexpr int L = V::lanes, NR = NV * L;
  if constexpr (Rows >= 1) {
    if (rows != Rows) {
      gemm_panel_rows<MK, V, MR, NV, Rows - 1>(rows, a, lda, bp, K, c, ldc, row0, col0, N, ep, ia,
                                               flat_base);
    } else if constexpr (Rows == MR) {
      gemm_tile<MK, V, Rows, NV, NR>(a, lda, bp, 0, K, c, ldc, row0, col0, N, ep, ia, nullptr,
                                     flat_base);
    } else if constexpr (Rows < MR) {
      gemm_tile_outlined<MK, V, Rows, NV, NR>(a, lda, bp, 0, K, c, ldc, row0, col0, N, ep, ia,
                                              nullptr, flat_base, true);
    } else {
      constexpr int G0 = Rows / 2, G1 = Rows - G0;
      constexpr index_t kc = 512;  // 512 k of one panel: 128 KiB of f32 weights with NR = 64
      const TA* a1 = a + G0 * lda;
      alignas(64) float part0[G0 * NV * L], part1[G1 * NV * L];
      index_t k = 0;
      do {  // at least once: K = 0 still stores the epilogue of zero sums
        const index_t k1 = K - k <= kc ? K : k + kc;
        if (k1 == K) {
          gemm_tile_outlined<MK, V, G0, NV, NR>(a, lda, bp, k, K, c, ldc, row0, col0, N, ep, ia,
                                                part0, flat_base, k == 0);
          gemm_tile_outlined<MK, V, G1, NV, NR>(a1, lda, bp, k, K, c, ldc, row0 + G0, col0, N, ep,
                                                ia, part1, flat_base, k == 0);
        } else {
          gemm_tile_outlined<MK, V, G0, NV, NR, false>(a, lda, bp, k, k1, c, ldc, row0, col0, N, ep,
                                                       ia, part0, flat_base, k == 0);
          gemm_tile_outlined<MK, V, G1, NV, NR, false>(a1, lda, bp, k, k1, c, ldc, row0 + G0, col0,
                                                       N, ep, ia, part1, flat_base, k == 0);
        }
        k = k1;
      } while (k < K);
    }
  }
}

/// Calls f(std::integral_constant<int, nv>) with the vectors a tile of NV vectors of L lanes
/// needs for `width` real columns: 1, 2 or 3 when they fit in a tile of 4 or more (AVX-512 f32
/// panels are 64 columns: a 16-, 24- or 40-channel layer did 4x, 2.7x or 1.6x the FMAs it
/// needed), NV otherwise.
template <int NV, int L, class F>
KFUSE_INLINE void with_needed_vectors(index_t width, F&& f) {
  if constexpr (NV >= 4) {
    if (width <= L) return f(std::integral_constant<int, 1>{});
    if (width <= 2 * L) return f(std::integral_constant<int, 2>{});
    if (width <= 3 * L) return f(std::integral_constant<int, 3>{});
  }
  f(std::integral_constant<int, NV>{});
}

/// gemm_panel_rows on a panel of which only the columns below N are real: a full row tile
/// computes only the vectors those need (with_needed_vectors; full tiles only: narrow tiles of
/// every row count would triple the tile code).
template <class MK, class V, int MR, int NV, int Rows, class TA, class Out, class Ep>
KFUSE_INLINE void gemm_panel(int rows, const TA* a, index_t lda, const typename MK::storage* bp,
                             index_t K, Out* c, index_t ldc, index_t row0, index_t col0, index_t N,
                             const Ep& ep, const int_args& ia, index_t flat_base = 0) {
  constexpr int L = V::lanes, NR = NV * L;
  if (rows == MR)
    return with_needed_vectors<NV, L>(N - col0, [&](auto nv) KFUSE_INLINE_LAMBDA {
      gemm_tile<MK, V, MR, decltype(nv)::value, NR>(a, lda, bp, 0, K, c, ldc, row0, col0, N, ep, ia,
                                                    nullptr, flat_base);
    });
  gemm_panel_rows<MK, V, MR, NV, Rows>(rows, a, lda, bp, K, c, ldc, row0, col0, N, ep, ia,
                                       flat_base);
}

/// Whether micro-kernel MK has an AMX tile path (kernels/gemm/amx.hpp): vdpbf16ps's bf16 and
/// vpdpbusd's i8 on zmm, whose blocks of 32 columns leave the tiles as 2 vectors a row.
#if KFUSE_AMX
template <class MK, class V>
constexpr bool amx_kernel = V::lanes == 16 &&
                            (std::is_same_v<MK, mk_bf16_dp> || std::is_same_v<MK, mk_int8_vnni>);
#else
template <class MK, class V>
constexpr bool amx_kernel = false;
#endif

/// A block of AMX accumulators (`rows` rows of 32, 32 a row: f32, or int32 bits) through
/// finish_tile, 4 rows at a time.
template <class MK, class V, class Acc, class Out, class Ep>
void store_amx_block(const Acc* acc, index_t rows, Out* c, index_t ldc, index_t row0, index_t col0,
                     index_t N, const Ep& ep, const int_args& ia, index_t flat_base) {
  static_assert(V::lanes == 16);
  const auto* bits = reinterpret_cast<const float*>(acc);
  auto rows_of = [&]<int R>(index_t r) {
    V t[R][2];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < 2; ++j) t[i][j] = simd::load<V>(bits + (r + i) * 32 + j * 16);
    finish_tile<MK, V, R, 2>(t, c, ldc, row0 + r, col0, N, ep, ia, flat_base);
  };
  index_t r = 0;
  for (; r + 4 <= rows; r += 4) rows_of.template operator()<4>(r);
  for (; r < rows; ++r) rows_of.template operator()<1>(r);
}

}  // namespace detail

KFUSE_END_NAMESPACE
