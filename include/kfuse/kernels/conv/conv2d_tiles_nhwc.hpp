#pragma once
// conv2d's NHWC register tiles (kernels/conv/conv2d.hpp, path conv2d_nhwc.hpp) and the operands
// they read: the implicit-GEMM tile over pixel pointers into padded input rows (nhwc_input over
// padded_rows, a per-thread row cache), the block-diagonal tiles of grouped convs, and the im2col
// patches of few-channel stems (build_patches).
#include <algorithm>
#include <cstring>
#include <limits>

#include "kfuse/detail/checks.hpp"
#include "kfuse/detail/copy_short.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/workspace.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

// -------------------------------------------------------------------------------- NHWC tiles

/// The padded input rows one NHWC conv thread reads: slots, each remembering which row it holds
/// (a key >= 0, or pad_row: a row of padding values). Consecutive tiles of a stride-1 conv share
/// most of their input rows, so each row is copied about once instead of R times.
template <class TX>
struct padded_rows {
  static constexpr index_t pad_row = -2, empty = -1;
  TX* data = nullptr;
  index_t row_size = 0;
  index_t* key = nullptr;
  char* used = nullptr;
  int slots = 0;

  /// Its arrays, carved from a workspace slot (or measured): every row starts empty.
  padded_rows(slot_cursor& cur, int slot_count, index_t row_size_)
      : data(cur.take<TX>(std::size_t(slot_count * row_size_))),
        row_size(row_size_),
        key(cur.take<index_t>(std::size_t(slot_count))),
        used(cur.take<char>(std::size_t(slot_count))),
        slots(slot_count) {
    if (key) std::fill(key, key + slots, empty);
  }

  /// ptr[i] = the slot holding row need[i] for i < count (at most `slots` distinct rows),
  /// filling missing rows with fill(key, row) in slots that no row of this call needs.
  template <class Fill>
  void assign(const index_t* need, int count, const TX** ptr, Fill&& fill) {
    std::fill(used, used + slots, char(0));
    auto find = [&](index_t k) {
      for (int i = 0; i < slots; ++i)
        if (key[std::size_t(i)] == k) return i;
      return -1;
    };
    for (int r = 0; r < count; ++r) {  // rows already held keep their slots
      const int i = find(need[r]);
      if (i >= 0) used[std::size_t(i)] = 1;
    }
    for (int r = 0; r < count; ++r) {
      int i = find(need[r]);
      if (i < 0) {
        i = int(std::find(used, used + slots, char(0)) - used);
        key[std::size_t(i)] = need[r];
        used[std::size_t(i)] = 1;
        fill(need[r], data + i * row_size);
      }
      ptr[r] = data + i * row_size;
    }
  }
};

/// The input a tile of output pixels reads: px[r * MR + i] points at the first tap of kernel row
/// r of the tile's pixel i (input column ow_i * stride_w of its input row, channel 0), pix values
/// apart per input column; px[r * MR] is null when row r is padding for every pixel of the tile
/// and is skipped (float recipes). Pixels of one tile may sit on different output rows.
template <class TX>
struct nhwc_pixels {
  const TX* const* px = nullptr;
  int mr = 0;
  index_t pix = 0;
};

/// The input one thread's NHWC tiles read: copies of the input rows padded with `pad` (pix values
/// per pixel: the group's channels padded to the k group), or the input itself when nothing is
/// padded (copy == false), and each tile's pixel pointers (px, read by the tile as nhwc_pixels).
/// Arrays from the thread's workspace slot: need / rowptr / valid of R per output row a tile can
/// touch, px of R x MR.
template <class TX, int MR>
struct nhwc_input {
  const TX* x;
  const conv_shape& s;
  padded_rows<TX>& rows;
  index_t* need;
  const TX** rowptr;
  const TX** px;
  char* valid;
  index_t pix;
  TX pad;
  bool copy;
  bool keep_pad_rows;  // int8: rows of zero points are read, never skipped
  index_t held_key = -1, held_span = 0;

  nhwc_pixels<TX> pixels() const { return {px, MR, pix}; }

  /// Copies input row `key` ((image, group, row) as point() sets it) with its padding columns.
  void fill_row(index_t key, TX* row) const {
    const index_t cg = s.c / s.groups, wp = s.w + s.pad_left + s.pad_right;
    if (key == rows.pad_row) {
      std::fill(row, row + wp * pix, pad);
      return;
    }
    const index_t ih = key % s.h, ng = key / s.h, g = ng % s.groups, C = s.in_channels();
    const TX* src = x + ((ng / s.groups * s.h + ih) * s.w) * C + g * cg;
    // The group's channels in the tensor (a group with phantom blocks has fewer).
    const index_t real = std::min(cg, C - g * cg);
    std::fill(row, row + s.pad_left * pix, pad);
    if (cg == C && pix == cg) {
      std::memcpy(row + s.pad_left * cg, src, sizeof(TX) * std::size_t(s.w * cg));
    } else {
      for (index_t iw = 0; iw < s.w; ++iw) {
        TX* o = row + (s.pad_left + iw) * pix;
        std::memcpy(o, src + iw * C, sizeof(TX) * std::size_t(real));
        std::fill(o + real, o + pix, pad);
      }
    }
    std::fill(row + (s.pad_left + s.w) * pix, row + wp * pix, pad);
  }

  /// Points px at the inputs of the tile of output pixels [p, p + count) of image n, group g
  /// (p flat within the image): R pointers per pixel, px[r * MR] null for a kernel row that is
  /// padding for every pixel of a float tile.
  void point(index_t n, index_t g, index_t p, int count) {
    const index_t OW = s.out_w(), cg = s.c / s.groups;
    const index_t oh_a = p / OW, nspan = (p + count - 1) / OW - oh_a + 1;
    // Most tiles read the output rows the previous one did: the rows are then in place.
    const index_t key = (n * s.groups + g) * s.out_h() + oh_a;
    if (key != held_key || nspan != held_span) {
      held_key = key, held_span = nspan;
      for (index_t j = 0; j < nspan; ++j)
        for (index_t r = 0; r < s.r; ++r) {
          const index_t ih = (oh_a + j) * s.stride_h - s.pad_top + r * s.dilation_h;
          const bool in_image = ih >= 0 && ih < s.h;
          const index_t k = j * s.r + r;
          valid[k] = char(in_image);
          if (copy)
            need[k] = in_image ? (n * s.groups + g) * s.h + ih : rows.pad_row;
          else  // no padding at all: every row is in the image
            rowptr[k] = x + ((n * s.h + ih) * s.w) * s.in_channels() + g * cg;
        }
      if (copy)
        rows.assign(need, int(nspan * s.r), rowptr,
                    [this](index_t k, TX* row) { fill_row(k, row); });
    }
    // Pixel i: its output row's index in the span, and its first input value in that row
    // (stepped, not divided: two divisions per pixel were most of a 3-channel stem's time).
    index_t span_of[MR], col_of[MR];
    const index_t step = s.stride_w * pix;
    index_t span = 0, ow = p - oh_a * OW;
    for (int i = 0; i < count; ++i) {
      span_of[i] = span;
      col_of[i] = ow * step;
      if (++ow == OW) ow = 0, ++span;
    }
    for (index_t r = 0; r < s.r; ++r) {
      bool any = keep_pad_rows;
      for (int i = 0; i < count; ++i) {
        const index_t k = span_of[i] * s.r + r;
        px[r * MR + i] = rowptr[k] + col_of[i];
        any = any || valid[k];
      }
      if (!any) px[r * MR] = nullptr;
    }
  }
};

/// The input channels [c0, c1) of a tile's reduction (a multiple of the k group apart); the tile
/// starts from `part` unless `first` and saves to it unless `last` (then the epilogue runs).
struct nhwc_chunk {
  index_t c0 = 0, c1 = 0;
  float* part = nullptr;
  bool first = true, last = true;
};

/// NR is the weight block's width as packed; the tile computes its first NV vectors.
template <class MK, class V, int Rows, int NV, int NR, class TX, class Out, class Ep>
KFUSE_INLINE void nhwc_tile(const nhwc_pixels<TX>& in, const conv_shape& s,
                            const typename MK::storage* KFUSE_RESTRICT wblock, const nhwc_chunk& ck,
                            index_t cgp, Out* KFUSE_RESTRICT out, index_t flat0, index_t ch0,
                            index_t ch_valid, const std::int32_t* sums, std::int32_t a_zero,
                            const Ep& ep) {
  V acc[Rows][NV];
  start_tile(acc, ck.part, ck.first);
  // A row's S taps over whole channels of one group, without dilation, are one contiguous run
  // of S * C inputs per pixel and of weights (packed tap by tap): one reduction of S * C instead
  // of S reductions of C (a 3x3 conv over 3 input channels: 9 per call instead of 3).
  const bool taps_in_one = ck.c0 == 0 && ck.c1 == cgp && cgp == in.pix && s.dilation_w == 1;
  for (index_t r = 0; r < s.r; ++r) {
    const TX* const* row = in.px + r * in.mr;
    if (!row[0]) continue;
    pointer_rows<TX, Rows> a;
    if (taps_in_one) {
#pragma GCC unroll 8
      for (int i = 0; i < Rows; ++i) a.p[i] = row[i];
      MK::template accumulate<V, Rows, NV, NR>(acc, a, wblock + r * s.s * cgp * NR, 0, s.s * cgp);
      continue;
    }
    for (index_t q = 0; q < s.s; ++q) {
      const index_t off = q * s.dilation_w * in.pix + ck.c0;
#pragma GCC unroll 8
      for (int i = 0; i < Rows; ++i) a.p[i] = row[i] + off;
      MK::template accumulate<V, Rows, NV, NR>(
          acc, a, wblock + (r * s.s + q) * cgp * NR + ck.c0 * NR, 0, ck.c1 - ck.c0);
    }
  }
  if (!ck.last) {
    save_tile(acc, ck.part);
    return;
  }
  if constexpr (MK::integer) {
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) MK::template finish<V, NV>(acc[r], sums, a_zero);
  }
  store_tile<true>(acc, out, s.out_channels(), flat0, s.out_channels(), ch0, ch_valid, ep);
}

/// nhwc_tile out of line, for tiles of fewer than MR - 1 pixels (the ends of rows and maps):
/// one copy per shape instead of one per call site, as gemm_tile_outlined.
template <class MK, class V, int Rows, int NV, int NR, class TX, class Out, class Ep>
KFUSE_NOINLINE void nhwc_tile_outlined(const nhwc_pixels<TX>& in, const conv_shape& s,
                                       const typename MK::storage* wblock, const nhwc_chunk& ck,
                                       index_t cgp, Out* out, index_t flat0, index_t ch0,
                                       index_t ch_valid, const std::int32_t* sums,
                                       std::int32_t a_zero, const Ep& ep) {
  nhwc_tile<MK, V, Rows, NV, NR>(in, s, wblock, ck, cgp, out, flat0, ch0, ch_valid, sums, a_zero,
                                 ep);
}

/// Dispatches `rows` (Floor < rows <= Rows) to the tile of that many rows.
template <class MK, class V, int MR, int NV, int Rows, int NR, int Floor = 0, class TX, class Out,
          class Ep>
KFUSE_INLINE void nhwc_tile_rows(int rows, const nhwc_pixels<TX>& in, const conv_shape& s,
                                 const typename MK::storage* wblock, const nhwc_chunk& ck,
                                 index_t cgp, Out* out, index_t flat0, index_t ch0,
                                 index_t ch_valid, const std::int32_t* sums, std::int32_t a_zero,
                                 const Ep& ep) {
  if constexpr (Rows > Floor) {
    if (rows != Rows)
      nhwc_tile_rows<MK, V, MR, NV, Rows - 1, NR, Floor>(rows, in, s, wblock, ck, cgp, out, flat0,
                                                         ch0, ch_valid, sums, a_zero, ep);
    else if constexpr (Rows >= MR - 1)
      nhwc_tile<MK, V, Rows, NV, NR>(in, s, wblock, ck, cgp, out, flat0, ch0, ch_valid, sums,
                                     a_zero, ep);
    else
      nhwc_tile_outlined<MK, V, Rows, NV, NR>(in, s, wblock, ck, cgp, out, flat0, ch0, ch_valid,
                                              sums, a_zero, ep);
  }
}

/// nhwc_tile_rows on a weight block of which only ch_valid channels are real: tiles of MR or
/// MR - 1 pixels (balanced tiles have those sizes but on tiny maps; each size more would add tile
/// code to every instantiation) compute only the vectors those need (with_needed_vectors).
template <class MK, class V, int MR, int NV, class TX, class Out, class Ep>
KFUSE_INLINE void nhwc_tile_any(int rows, const nhwc_pixels<TX>& in, const conv_shape& s,
                                const typename MK::storage* wblock, const nhwc_chunk& ck,
                                index_t cgp, Out* out, index_t flat0, index_t ch0, index_t ch_valid,
                                const std::int32_t* sums, std::int32_t a_zero, const Ep& ep) {
  constexpr int L = V::lanes, NR = NV * L;
  static_assert(MR >= 2);
  if (rows >= MR - 1)
    return with_needed_vectors<NV, L>(ch_valid, [&](auto nv) KFUSE_INLINE_LAMBDA {
      nhwc_tile_rows<MK, V, MR, decltype(nv)::value, MR, NR, MR - 2>(
          rows, in, s, wblock, ck, cgp, out, flat0, ch0, ch_valid, sums, a_zero, ep);
    });
  nhwc_tile_rows<MK, V, MR, NV, MR - 2, NR>(rows, in, s, wblock, ck, cgp, out, flat0, ch0, ch_valid,
                                            sums, a_zero, ep);
}

/// A narrow tile (conv2d's narrow tiles: diagonal blocks of nw-channel groups; `narrow` is
/// their own panel), vector by vector, each over every tap. Its own function: the vector loop
/// indexes the tile's accumulators at run time, which would keep the block-diagonal tile's
/// in memory too.
template <bool InLane, class V, int Rows, int NV, int NR, class Out, class Ep>
void narrow_tile(const nhwc_pixels<float>& in, const conv_shape& s,
                 const float* KFUSE_RESTRICT narrow, index_t nw, Out* KFUSE_RESTRICT out,
                 index_t flat0, index_t ch0, index_t ch_valid, const Ep& ep) {
  using MK = mk_fma_diagonal<float>;
  V acc[Rows][NV];
  for (int j = 0; j < NV; ++j) {
    V col[Rows], odd[Rows];
#pragma GCC unroll 8
    for (int i = 0; i < Rows; ++i) col[i] = odd[i] = V(0.f);
    for (index_t r = 0; r < s.r; ++r) {
      const float* const* row = in.px + r * in.mr;
      if (!row[0]) continue;
      const float* bp = narrow + r * s.s * nw * NR;
      // The tile's pixels side by side in one row of a 3-wide window: taps share the loads.
      bool side_by_side = s.s == 3 && s.stride_w == 1 && s.dilation_w == 1;
#pragma GCC unroll 8
      for (int i = 1; i < Rows; ++i) side_by_side = side_by_side && row[i] == row[0] + i * in.pix;
      if (side_by_side) {
        MK::template groups_row3<InLane, V, Rows, NR>(col, odd, row[0], in.pix, j, bp, nw);
        continue;
      }
      pointer_rows<float, Rows> a;
      for (index_t q = 0; q < s.s; ++q) {
        const index_t off = q * s.dilation_w * in.pix;
#pragma GCC unroll 8
        for (int i = 0; i < Rows; ++i) a.p[i] = row[i] + off;
        MK::template groups_tap<InLane, V, Rows, NR>(col, odd, a, j, bp + q * nw * NR, nw);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < Rows; ++i) acc[i][j] = col[i] + odd[i];
  }
  store_tile<true>(acc, out, s.out_channels(), flat0, s.out_channels(), ch0, ch_valid, ep);
}

/// A tile of a block-diagonal group (conv_shape::diagonal): vector j is its own diagonal block
/// of cs input channels (mk_fma_diagonal), for each of the R x S taps. f32 only; one chunk.
/// `narrow` (conv2d's narrow tiles) is their panel, nw channels a group (narrow_tile).
template <class V, int Rows, int NV, int NR, class Out, class Ep>
KFUSE_INLINE void nhwc_diagonal_tile(const nhwc_pixels<float>& in, const conv_shape& s,
                                     const float* KFUSE_RESTRICT wblock, index_t cgp, index_t cs,
                                     const float* KFUSE_RESTRICT narrow, index_t nw,
                                     Out* KFUSE_RESTRICT out, index_t flat0, index_t ch0,
                                     index_t ch_valid, const Ep& ep) {
  if constexpr (requires { requires V::impl::has_group_broadcast; }) {
    if (narrow) {
      // Groups of up to 4 channels permute within 128-bit lanes (vpermilps), 8 across.
      if (nw <= 4)
        return narrow_tile<true, V, Rows, NV, NR>(in, s, narrow, nw, out, flat0, ch0, ch_valid, ep);
      return narrow_tile<false, V, Rows, NV, NR>(in, s, narrow, nw, out, flat0, ch0, ch_valid, ep);
    }
  }
  V acc[Rows][NV];
  start_tile(acc, nullptr, true);
  const bool three_wide = s.s == 3 && s.dilation_w == 1 && s.stride_w == 1;
  for (index_t r = 0; r < s.r; ++r) {
    const float* const* row = in.px + r * in.mr;
    if (!row[0]) continue;
    const float* bp = wblock + r * s.s * cgp * NR;
    // The tile's pixels side by side in one row of a 3-wide window: taps share the broadcasts.
    bool side_by_side = three_wide;
#pragma GCC unroll 8
    for (int i = 1; i < Rows; ++i) side_by_side = side_by_side && row[i] == row[0] + i * in.pix;
    if (side_by_side) {
      mk_fma_diagonal<float>::template row3<V, Rows, NV, NR>(acc, row[0], in.pix, bp, cgp, cs);
      continue;
    }
    pointer_rows<float, Rows> a;
    for (index_t q = 0; q < s.s; ++q) {
      const index_t off = q * s.dilation_w * in.pix;
#pragma GCC unroll 8
      for (int i = 0; i < Rows; ++i) a.p[i] = row[i] + off;
      mk_fma_diagonal<float>::template accumulate<V, Rows, NV, NR>(acc, a, bp + q * cgp * NR, cs);
    }
  }
  store_tile<true>(acc, out, s.out_channels(), flat0, s.out_channels(), ch0, ch_valid, ep);
}

/// nhwc_diagonal_tile for a full tile of MR or MR - 1 pixels (shorter tiles, the ends of small
/// maps, run nhwc_tile_any over the whole block-diagonal block: its zeros are in the packed
/// weights, and a copy of the diagonal tiles per row count cost 8 s of build per tier) and
/// W = ch_valid / L diagonal blocks (2 or NV).
template <class V, int MR, int NV, int NR, class Out, class Ep>
KFUSE_INLINE void nhwc_diagonal_tile_rows(int rows, const nhwc_pixels<float>& in,
                                          const conv_shape& s, const float* wblock, index_t cgp,
                                          index_t cs, const float* narrow, index_t nw, Out* out,
                                          index_t flat0, index_t ch0, index_t ch_valid,
                                          const Ep& ep) {
  const auto tile = [&]<int Rows, int W>() KFUSE_INLINE_LAMBDA {
    nhwc_diagonal_tile<V, Rows, W, NR>(in, s, wblock, cgp, cs, narrow, nw, out, flat0, ch0,
                                       ch_valid, ep);
  };
  const auto width = [&]<int Rows>() KFUSE_INLINE_LAMBDA {
    static_assert(NV >= 2 && NV <= 4);
    if constexpr (NV > 2)
      if (ch_valid <= 2 * V::lanes) return tile.template operator()<Rows, 2>();
    tile.template operator()<Rows, NV>();
  };
  if (rows == MR)
    width.template operator()<MR>();
  else
    width.template operator()<MR - 1>();
}

// -------------------------------------------------------------------------------- NHWC patches

/// Few input channels (an RGB stem): each output pixel's R x S x C inputs are one short row of
/// an im2col block (27 values for 3x3 x 3) and the conv is a GEMM over such blocks. The tiles
/// above reduce one kernel row per micro-kernel call, each pixel padded to the k group (an RGB
/// pixel is 4 bf16 or int8 values: a third of the work is padding); a block row is padded once.
/// bf16 / int8 stems ran 1.2-2x faster this way; f32 ones (k group 1) 5-30% slower (building
/// the block costs more than the calls it saves), so conv2d takes it for bf16 and int8 only.
constexpr bool patch_shape(const conv_shape& s) {
  return s.groups == 1 && !s.is_pointwise() && s.c <= 4 && s.c * s.r * s.s <= 256;
}
/// The im2col rows of output pixels [p0, p0 + np) (flat over the batch) of a patch_shape conv:
/// row i (ld values) holds pixel p0 + i's inputs in (r, s, c) order, padding taps and the values
/// past R x S x C as `pad`.
template <class TX>
void build_patches(const TX* KFUSE_RESTRICT x, const conv_shape& s, index_t p0, index_t np,
                   index_t ld, TX pad, TX* KFUSE_RESTRICT out) {
  const index_t OH = s.out_h(), OW = s.out_w(), C = s.c, SC = s.s * C;
  index_t n = p0 / (OH * OW), oh = p0 / OW % OH, ow = p0 % OW;
  for (index_t i = 0; i < np; ++i) {
    TX* o = out + i * ld;
    const TX* img = x + n * s.h * s.w * C;
    const index_t ih0 = oh * s.stride_h - s.pad_top, iw0 = ow * s.stride_w - s.pad_left;
    // Without dilation, a kernel row inside the image is one run of S x C inputs.
    const bool run = s.dilation_w == 1 && iw0 >= 0 && iw0 + s.s <= s.w;
    for (index_t r = 0; r < s.r; ++r, o += SC) {
      const index_t ih = ih0 + r * s.dilation_h;
      if (ih < 0 || ih >= s.h) {
        for (index_t j = 0; j < SC; ++j) o[j] = pad;
        continue;
      }
      const TX* row = img + ih * s.w * C;
      if (run) {
        copy_short(o, row + iw0 * C, sizeof(TX) * std::size_t(SC));
        continue;
      }
      for (index_t q = 0; q < s.s; ++q) {
        const index_t iw = iw0 + q * s.dilation_w;
        const bool in = iw >= 0 && iw < s.w;
        for (index_t c = 0; c < C; ++c) o[q * C + c] = in ? row[iw * C + c] : pad;
      }
    }
    for (index_t j = s.r * SC; j < ld; ++j) out[i * ld + j] = pad;
    if (++ow == OW) {
      ow = 0;
      if (++oh == OH) oh = 0, ++n;
    }
  }
}

/// A patch_shape (or AMX) conv as blocks of `block` output pixels over the whole batch: each an
/// im2col block (ld values a row) in the worker's slot of `ws` and one Gemm with the epilogue
/// (its flat index offset to the block). Fewer blocks than threads on AMX (a late layer's small
/// map): the blocks one after another, each tile GEMM split over the threads instead.
template <class Gemm, class TX, class W, class Out, class Ep>
int run_patch_blocks(const TX* x, const W& w, Out* y, const conv_shape& s, index_t ld,
                     index_t block, const Ep& ep, int pool, const workspace& ws, std::size_t slot,
                     std::int32_t za) {
  const index_t total = s.n * s.out_h() * s.out_w(), items = (total + block - 1) / block;
  const TX pad = TX(std::is_integral_v<TX> ? za : 0);
  auto block_at = [&](TX* patches, index_t it, int threads) {
    const index_t p0 = it * block, np = std::min(block, total - p0);
    build_patches(x, s, p0, np, ld, pad, patches);
    return Gemm::run(patches, np, ld, w, y + p0 * s.k, s.k, ep, run_options{threads}, za,
                     output_slice{p0 * s.k, total * s.k})
        .threads;
  };
  if (items < pool && Gemm::uses_amx(std::min(block, total), w)) {
    int used = 1;
    for (index_t it = 0; it < items; ++it)
      used = std::max(used, block_at(ws.slot<TX>(0, slot), it, pool));
    return used;
  }
  const int threads = int(std::min<index_t>(pool, items));
  parallel_for(
      0, items, (items + threads - 1) / threads,
      [&](range rg, int worker) {
        for (index_t it = rg.begin; it < rg.end; ++it) block_at(ws.slot<TX>(worker, slot), it, 1);
      },
      threads);
  return threads;
}

}  // namespace detail

KFUSE_END_NAMESPACE
