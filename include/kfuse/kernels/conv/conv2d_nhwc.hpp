#pragma once
// conv2d's NHWC implicit-GEMM path (kernels/conv/conv2d.hpp): tiles of MR consecutive output
// pixels read through per-pixel pointers into the input or its padded row copies, and the
// grouped convs' diagonal tiles. Its slot layout in the per-thread workspace and its run.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kfuse/kernels/conv/conv2d_base.hpp"
#include "kfuse/kernels/conv/nhwc_geometry.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

template <class Base>
struct conv2d_nhwc_path : Base {
  using typename Base::microkernel;
  using typename Base::vec;
  using typename Base::weight_storage;
  using typename Base::weights;
  using Elem = typename Base::recipe;
  using Ep = typename Base::epilogue_type;
  using Base::diagonal_tiles;
  using Base::G;
  using Base::integer;
  using Base::MR;
  using Base::NR;
  using Base::NV;

  /// The tile types diagonal_tiles() needs.
  template <class TX>
  static constexpr bool diagonal_capable =
      std::is_same_v<Elem, f32>&& std::is_same_v<TX, float>&& NV >= 2 && NV <= 4;
  /// The NHWC path's geometry (copied rows, values per pixel, tile span, channel chunks).
  static constexpr detail::nhwc_geometry nhwc_geom{
      G, NR, MR, index_t(sizeof(typename microkernel::storage)), integer};
  /// One thread's slot of the NHWC path: its padded input rows, the rows a tile needs (R per
  /// output row it touches), the tile's pixel pointers and the partial sums of a band (chunked
  /// channels only; a band is at most the whole image).
  template <class TX>
  struct nhwc_slot {
    detail::padded_rows<TX> rows;
    index_t* need;
    const TX** rowptr;
    const TX** px;
    char* valid;
    float* part;
  };
  template <class TX>
  static nhwc_slot<TX> nhwc_layout(detail::slot_cursor& cur, const conv_shape& s) {
    const index_t cg = s.c / s.groups, wp = s.w + s.pad_left + s.pad_right;
    const index_t chunks = (cg + nhwc_geom.chunk_channels(s) - 1) / nhwc_geom.chunk_channels(s);
    const index_t n_need = s.r * nhwc_geom.span(s);
    const index_t ntiles = (s.out_h() * s.out_w() + MR - 1) / MR;
    detail::padded_rows<TX> rows(cur, nhwc_geom.copy_rows(s) ? int(n_need) : 0,
                                 wp * nhwc_geom.pixel_values(s));
    index_t* need = cur.take<index_t>(std::size_t(n_need));
    const TX** rowptr = cur.take<const TX*>(std::size_t(n_need));
    const TX** px = cur.take<const TX*>(std::size_t(s.r * MR));
    char* valid = cur.take<char>(std::size_t(n_need));
    float* part = cur.take<float>(chunks > 1 ? std::size_t(ntiles * MR * NR) : 0);
    return {rows, need, rowptr, px, valid, part};
  }

  template <class TX, class Out>
  static int run_nhwc(const TX* x, const weights& w, Out* y, const conv_shape& s, const Ep& ep,
                      int pool, const workspace& ws, std::size_t slot, std::int32_t za) {
    using MK = microkernel;
    const index_t OH = s.out_h(), OW = s.out_w(), cg = s.c / s.groups, kg = s.k / s.groups;
    const index_t K = s.out_channels();  // the output's channels: its pixel stride
    const index_t KB = w.kblocks_, cgp = w.cgp_, rs = s.r * s.s;
    const bool copy_rows = nhwc_geom.copy_rows(s);
    const index_t pix = nhwc_geom.pixel_values(s);
    // The channels a chunk reduces end at the row's last value: the padding channels of a copy
    // are reduced too (against zero weights) so that each reduction is whole k groups.
    const index_t c_end = copy_rows ? pix : cg;
    const TX pad = TX(integer ? za : 0);
    std::int32_t a_zero = 0;
    if constexpr (integer) a_zero = za + MK::template zero_point_shift<TX>;
    const bool diagonal = diagonal_tiles(s);
    const index_t nw = Base::narrow_width(s);
    const index_t cc = diagonal ? cg : nhwc_geom.chunk_channels(s);
    const index_t chunks = (cg + cc - 1) / cc;
    // Work items ordered (group, K block, image, band of output rows): consecutive items share
    // the weight block, so each thread keeps its block in L2. An image is split into bands only
    // as far as the threads need items (about two each, a multiple of the threads where the
    // image has the rows): a band boundary ends the tiles' row spans.
    const index_t outer = s.groups * KB * s.n;
    index_t per_image = pool == 1 ? 1 : std::min(OH, (2 * pool + outer - 1) / outer);
    while ((outer * per_image) % pool != 0 && per_image < OH) ++per_image;
    const index_t band_rows = (OH + per_image - 1) / per_image;
    const index_t bands = (OH + band_rows - 1) / band_rows;
    const index_t items = outer * bands;
    const int threads = int(std::min<index_t>(pool, items));
    auto body = [&](range rg, int worker) {
      detail::slot_cursor cur(ws.slot<std::byte>(worker, slot));
      nhwc_slot<TX> sl = nhwc_layout<TX>(cur, s);
      detail::nhwc_input<TX, MR> in{x,        s,   sl.rows, sl.need,   sl.rowptr, sl.px,
                                    sl.valid, pix, pad,     copy_rows, integer};
      for (index_t it = rg.begin; it < rg.end; ++it) {
        const index_t b = it % bands, n = (it / bands) % s.n, kb = (it / (bands * s.n)) % KB,
                      g = it / (bands * s.n * KB);
        const typename MK::storage* wblock = w.data_.data() + ((g * KB + kb) * rs) * cgp * NR;
        // The narrow tiles' panel follows the block-diagonal one (conv2d_base::pack).
        const typename MK::storage* narrow =
            nw > 0 ? w.data_.data() + (s.groups * KB * cgp + (g * KB + kb) * nw) * rs * NR
                   : nullptr;
        // Phantom blocks (conv_shape) end the last group: their channels are not stored.
        const index_t ch0 = g * kg + kb * NR,
                      ch_valid = std::min<index_t>({NR, kg - kb * NR, K - ch0});
        const std::int32_t* sums = integer ? w.sums_.data() + (g * KB + kb) * NR : nullptr;
        // Balanced tiles of at most MR consecutive pixels of the band, spanning output rows (7x7
        // maps run as tiles of 5 and 6 pixels, not 4 + 3 per row).
        const index_t p_begin = b * band_rows * OW,
                      npix = std::min(OH, (b + 1) * band_rows) * OW - p_begin;
        const index_t ntiles = (npix + MR - 1) / MR, base = npix / ntiles, extra = npix % ntiles;
        for (index_t ck = 0; ck < chunks; ++ck) {
          index_t p = p_begin;
          for (index_t t = 0; t < ntiles; ++t) {
            const int rows = int(base + (t < extra ? 1 : 0));
            in.point(n, g, p, rows);
            const index_t pix0 = n * OH * OW + p;
            const detail::nhwc_chunk chunk{ck * cc, std::min(c_end, (ck + 1) * cc),
                                           chunks > 1 ? sl.part + t * MR * NR : nullptr, ck == 0,
                                           ck + 1 == chunks};
            if constexpr (diagonal_capable<TX>) {
              if (diagonal && rows >= MR - 1) {
                detail::nhwc_diagonal_tile_rows<vec, MR, NV, NR>(
                    rows, in.pixels(), s, wblock, cgp, cg / s.diagonal, narrow, nw,
                    y + pix0 * K + ch0, pix0 * K + ch0, ch0, ch_valid, ep);
                p += rows;
                continue;
              }
            }
            detail::nhwc_tile_any<MK, vec, MR, NV>(rows, in.pixels(), s, wblock, chunk, cgp,
                                                   y + pix0 * K + ch0, pix0 * K + ch0, ch0,
                                                   ch_valid, sums, a_zero, ep);
            p += rows;
          }
        }
      }
    };
    parallel_for(0, items, (items + threads - 1) / threads, body, threads);
    return threads;
  }
};

}  // namespace detail

KFUSE_END_NAMESPACE
