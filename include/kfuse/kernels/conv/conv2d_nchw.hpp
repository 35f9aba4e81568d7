#pragma once
// conv2d's NCHW paths ("channel rows", kernels/conv/conv2d.hpp): f32 reads its pixel operand
// from padded input bands, bf16 and int8 build panels in the k-grouped order of their
// dot-product instructions. Each path: its slot layout in the per-thread workspace and its run.
#include <algorithm>
#include <cstddef>

#include "kfuse/kernels/conv/conv2d_base.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

template <class Base>
struct conv2d_nchw_paths : Base {
  using typename Base::microkernel;
  using typename Base::vec;
  using typename Base::weight_storage;
  using typename Base::weights;
  using Ep = typename Base::epilogue_type;
  using Base::G;
  using Base::integer;
  using Base::MR;
  using Base::NR;
  using Base::NV;

  /// The f32 NCHW path's bands of output rows: each band's padded input copy ~384 KiB (in L2).
  struct band_plan {
    index_t rows, bands, wph, extra;
  };
  static band_plan band_plan_of(const conv_shape& s) {
    const index_t OH = s.out_h(), cg = s.c / s.groups, sh = s.stride_h, sw = s.stride_w;
    band_plan b{};
    b.wph = (s.w + s.pad_left + s.pad_right + sw - 1) / sw;
    const index_t row_bytes = std::max<index_t>(1, cg * sh * sw * b.wph * index_t(sizeof(float)));
    b.extra = ((s.r - 1) * s.dilation_h) / sh + 1;
    b.rows = std::clamp<index_t>(index_t(384 * 1024) / row_bytes - b.extra, 1, OH);
    b.bands = (OH + b.rows - 1) / b.rows;
    b.rows = (OH + b.bands - 1) / b.bands;
    return b;
  }
  static bool band_direct(const conv_shape& s) {
    return s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 && s.pad_left == 0 &&
           s.pad_bottom == 0 && s.pad_right == 0;
  }
  /// One thread's slot of the band path: the band copy, the tap offsets (in the band, and in
  /// the input for unpadded stride-1 shapes), the partial sums of its channel tiles.
  struct band_slot {
    float* buf;
    index_t *taps, *taps_direct;
    float* part;
  };
  static band_slot band_layout(detail::slot_cursor& cur, const conv_shape& s) {
    const index_t crs = (s.c / s.groups) * s.r * s.s, ktiles = (s.k / s.groups + MR - 1) / MR;
    const detail::band_geometry bg(s, band_plan_of(s).rows, 2 * NR);
    band_slot b{};
    b.buf = cur.take<float>(std::size_t(bg.size));
    b.taps = cur.take<index_t>(std::size_t(crs));
    b.taps_direct = cur.take<index_t>(std::size_t(band_direct(s) ? crs : 0));
    b.part = cur.take<float>(std::size_t(ktiles * MR * NR));  // every tile: one K part at most
    return b;
  }

  template <class TX, class Out>
  static int run_nchw_band(const TX* x, const weights& w, Out* y, const conv_shape& s, const Ep& ep,
                           int pool, const workspace& ws, std::size_t slot) {
    const index_t OH = s.out_h(), OW = s.out_w(), P = OH * OW, cg = s.c / s.groups,
                  kg = s.k / s.groups, crs = cg * s.r * s.s, crsp = w.crsp_;
    const index_t sh = s.stride_h, sw = s.stride_w;
    const band_plan bp = band_plan_of(s);
    const index_t wph = bp.wph, extra = bp.extra, rows = bp.rows, bands = bp.bands;
    const detail::band_geometry bg(s, rows, 2 * NR);
    const bool direct = band_direct(s);
    const float* x_end = x + s.n * s.c * s.h * s.w;
    // The taps of one chunk of input channels: their pixel operand (about 16 KiB) stays in L1
    // while every channel tile of the item uses it; partial sums carry across chunks.
    const index_t bytes_per_c =
        index_t(sizeof(float)) * sh * sw * (extra * (NR + s.s * s.dilation_w));
    const index_t chunk = std::max<index_t>(1, index_t(16 * 1024) / bytes_per_c) * s.r * s.s;
    const index_t ktiles = (kg + MR - 1) / MR;
    const index_t outer = s.n * s.groups * bands;
    const index_t kparts =
        std::min<index_t>(ktiles, std::max<index_t>(1, (2 * pool + outer - 1) / outer));
    const index_t items = outer * kparts;
    const int threads = int(std::min<index_t>(pool, items));
    auto body = [&](range rg, int worker) {
      detail::slot_cursor cur(ws.slot<std::byte>(worker, slot));
      const band_slot sl = band_layout(cur, s);
      float* const buf = sl.buf;
      std::fill(buf + (bg.size - 2 * NR), buf + bg.size, 0.f);
      index_t* const taps = sl.taps;
      index_t* const taps_direct = sl.taps_direct;
      for (index_t c = 0, q = 0; c < cg; ++c)
        for (index_t r = 0; r < s.r; ++r)
          for (index_t t = 0; t < s.s; ++t, ++q) {
            const index_t dr = r * s.dilation_h, dt = t * s.dilation_w;
            taps[q] = ((c * sh + dr % sh) * sw + dt % sw) * bg.plane + (dr / sh) * wph + dt / sw;
            if (direct) taps_direct[q] = c * s.h * s.w + dr * s.w + dt;
          }
      const index_t kt_per = (ktiles + kparts - 1) / kparts;
      float* const part = sl.part;
      for (index_t it = rg.begin; it < rg.end; ++it) {
        const index_t kp = it % kparts, b = (it / kparts) % bands,
                      g = (it / (kparts * bands)) % s.groups, n = it / (kparts * bands * s.groups);
        const index_t kt0 = kp * kt_per, kt1 = std::min(ktiles, kt0 + kt_per);
        if (kt0 >= kt1) continue;
        const index_t oh0 = b * rows, nrows = std::min(rows, OH - oh0);
        const float* xg = x + (n * s.c + g * cg) * s.h * s.w;
        const index_t nv_valid = (nrows - 1) * wph + OW;
        const float* band = buf;
        const index_t* tp = taps;
        // Without padding (stride 1) the input rows are the band: read them in place, unless the
        // last tile's lanes would read past the end of the input.
        if (direct && xg + (cg - 1) * s.h * s.w + oh0 * s.w + (nv_valid + NR - 1) / NR * NR +
                              taps_direct[crs - 1] - (cg - 1) * s.h * s.w <=
                          x_end) {
          band = xg + oh0 * s.w;
          tp = taps_direct;
        } else {
          detail::build_band(xg, s, bg, oh0, nrows, buf);
        }
        for (index_t v0 = 0; v0 < nv_valid; v0 += NR) {
          const index_t nv = std::min<index_t>(NR, nv_valid - v0);
          for (index_t q0 = 0; q0 < crs; q0 += chunk) {
            const index_t nq = std::min(chunk, crs - q0);
            const bool first = q0 == 0, last = q0 + nq == crs;
            for (index_t kt = kt0; kt < kt1; ++kt) {
              const index_t kk = g * kg + kt * MR;
              const int krows = int(std::min<index_t>(MR, kg - kt * MR));
              detail::band_tile_rows<vec, NV, MR>(
                  krows, w.data_.data() + kk * crsp + q0, crsp, band, tp + q0, nq, v0, nv, wph, OW,
                  y + (n * s.k + kk) * P, P, (n * s.k + kk) * P, oh0 * OW, kk, ep,
                  part + (kt - kt0) * MR * NR, first, last);
            }
          }
        }
      }
    };
    parallel_for(0, items, (items + threads - 1) / threads, body, threads);
    return threads;
  }

  /// The NCHW panel path's chunk of the reduction: panel chunks of about 64 KiB stay in L1/L2
  /// while every channel row tile reads them.
  static constexpr index_t panel_chunk = std::max<index_t>(
      G, index_t(64 * 1024) / index_t(NR * sizeof(typename microkernel::storage)) / G * G);
  /// One thread's slot of the NCHW panel path: the pixel panel of one chunk and the partial
  /// sums of its channel tiles (several chunks only).
  struct panel_slot {
    typename microkernel::storage* panel;
    float* part;
  };
  static panel_slot panel_layout(detail::slot_cursor& cur, const conv_shape& s) {
    const index_t crs = (s.c / s.groups) * s.r * s.s, crsp = (crs + G - 1) / G * G;
    const index_t chunks = (crsp + panel_chunk - 1) / panel_chunk;
    const index_t ktiles = (s.k / s.groups + MR - 1) / MR;
    panel_slot p{};
    p.panel = cur.take<typename microkernel::storage>(std::size_t(panel_chunk * NR));
    p.part = cur.take<float>(chunks > 1 ? std::size_t(ktiles * MR * NR) : 0);
    return p;
  }

  template <class TX, class Out>
  static int run_nchw(const TX* x, const weights& w, Out* y, const conv_shape& s, const Ep& ep,
                      int pool, const workspace& ws, std::size_t slot, std::int32_t za) {
    using MK = microkernel;
    using PS = typename MK::storage;
    using TW = weight_storage;
    const index_t OH = s.out_h(), OW = s.out_w(), P = OH * OW, cg = s.c / s.groups,
                  kg = s.k / s.groups;
    const index_t crsp = w.crsp_;
    const index_t kc = panel_chunk;
    const index_t chunks = (crsp + kc - 1) / kc;
    const index_t ptiles = (P + NR - 1) / NR, ktiles = (kg + MR - 1) / MR;
    const index_t outer = s.n * s.groups * ptiles;
    // Split channel tiles too when there are too few pixel tiles to feed every thread.
    const index_t kparts =
        std::min<index_t>(ktiles, std::max<index_t>(1, (2 * pool + outer - 1) / outer));
    const index_t items = outer * kparts;
    const int threads = int(std::min<index_t>(pool, items));
    const TX pad = TX(integer ? za : 0);
    std::int32_t shift_minus_zero = 0;
    if constexpr (integer) shift_minus_zero = (std::is_unsigned_v<TX> ? 128 : 0) - za;
    auto body = [&](range rg, int worker) {
      detail::slot_cursor cur(ws.slot<std::byte>(worker, slot));
      const panel_slot sl = panel_layout(cur, s);
      PS* const panel = sl.panel;
      const index_t kt_per = (ktiles + kparts - 1) / kparts;
      float* const part = sl.part;
      alignas(64) std::int32_t vsum[NR];
      for (index_t it = rg.begin; it < rg.end; ++it) {
        const index_t kp = it % kparts, pt = (it / kparts) % ptiles,
                      g = (it / (kparts * ptiles)) % s.groups,
                      n = it / (kparts * ptiles * s.groups);
        const index_t kt0 = kp * kt_per, kt1 = std::min(ktiles, kt0 + kt_per);
        if (kt0 >= kt1) continue;
        const index_t p0 = pt * NR, np = std::min<index_t>(NR, P - p0);
        const TX* xg = x + (n * s.c + g * cg) * s.h * s.w;
        std::fill(vsum, vsum + NR, 0);
        for (index_t ch = 0; ch < chunks; ++ch) {
          const index_t q0 = ch * kc, q1 = std::min(crsp, q0 + kc);
          detail::build_panel<PS, G, NR>(xg, s, OW, q0, q1, p0, np, pad, panel, vsum);
          for (index_t kt = kt0; kt < kt1; ++kt) {
            const index_t kl = kt * MR, kk = g * kg + kl;
            const int rows = int(std::min<index_t>(MR, kg - kl));
            const TW* wrow = w.data_.data() + kk * crsp + q0;
            Out* o = y + (n * s.k + kk) * P + p0;
            const index_t flat0 = (n * s.k + kk) * P + p0;
            float* pt_part = chunks > 1 ? part + (kt - kt0) * MR * NR : nullptr;
            detail::nchw_int_args ia{};
            if constexpr (integer) ia = {vsum, w.sums_.data() + kk, shift_minus_zero};
            const bool first = ch == 0;
            if (ch + 1 == chunks)
              detail::nchw_tile_rows<MK, vec, NV, true, MR>(rows, wrow, crsp, panel, q1 - q0, o, P,
                                                            flat0, kk, np, ep, pt_part, ia, first);
            else
              detail::nchw_tile_rows<MK, vec, NV, false, MR>(rows, wrow, crsp, panel, q1 - q0, o, P,
                                                             flat0, kk, np, ep, pt_part, ia, first);
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
