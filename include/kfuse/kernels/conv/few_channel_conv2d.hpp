#pragma once
// few_channel_conv2d<Arch, Epilogue, Backend>: an f32 convolution of at most 4 input channels
// (a CNN's RGB stem) that reads NCHW and writes NHWC, so a network's entry conversion and its
// stem are one pass (the graph fuses convert_layout nchw->nhwc into the conv:
// passes/entry_layout.hpp).
//
//   using stem = kfuse::few_channel_conv2d<kfuse::arch::native, kfuse::epilogue<kfuse::bias>>;
//   const auto w = stem::pack(w_oihw, shape);                                    // once
//   stem::run(kfuse::view<kfuse::nchw>(x, shape.in_dims()), w,
//             kfuse::view<kfuse::nhwc>(y, shape.out_dims()), {{bias}}, ws);      // every call
//
// With 3 channels the implicit GEMM of conv2d reduces 3 values per tap and call: its loop
// overhead, pointer setup and padded row copies cost more than the multiply-adds (MobileNetV3's
// stem ran at ~40% of the FMA peak). Here a tile is 12 consecutive output pixels of a row x 16
// or 32 output channels; per tap (r, s, c) one weight vector (or two) and 12 broadcasts of
// input values read straight from a padded copy of the band's NCHW rows, at constant offsets
// (the stride is a template parameter), so the R x S x C taps are one loop of FMAs.
#include <algorithm>
#include <chrono>
#include <string>

#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/conv/conv_weights.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/register_tile.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/kernels/workspace.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {
/// Shapes few_channel_conv2d takes: at most 4 input channels, one group, horizontal stride 1
/// or 2.
constexpr bool few_channel_shape(const conv_shape& s) {
  return s.c <= 4 && s.groups == 1 && (s.stride_w == 1 || s.stride_w == 2) && s.out_h() > 0 &&
         s.out_w() > 0;
}
}  // namespace detail

template <class A = arch::native, class Ep = epilogue<>, class B = backend::xsimd>
struct few_channel_conv2d {
  using vec = simd::vec_for<A, B>;
  static constexpr int L = vec::lanes;
  /// Output pixels per tile; 1 or 2 vectors of output channels per tile (16 / 32 on AVX-512).
  static constexpr int MR = L == 1 ? 4 : 12, PV_MAX = 2;
  static constexpr std::string_view name = "few_channel_conv2d";
  using extents = dims4;  // what a view needs besides its pointer (graph_ops::kernel_params)

  static constexpr bool takes(const conv_shape& s) { return detail::few_channel_shape(s); }

  /// Weights as panels of P = PV lanes of output channels (PV = 1 when K fits one vector):
  /// panel kb holds, per tap (r, s) and channel c, the P weights w[kb * P + j][c][r][s].
  struct packed {
    conv_shape shape{};
    int pv = 1;
    index_t panels = 0;
    detail::aligned_array<float> w;
    double pack_seconds_ = 0;
    bool empty() const noexcept { return w.size() == 0; }
    double pack_seconds() const noexcept { return pack_seconds_; }
  };

  static packed pack(const float* oihw, const conv_shape& s) {
    constexpr std::string_view k = "few_channel_conv2d pack";
    detail::check_conv_shape(k, s);
    if (!takes(s))
      detail::fail(k,
                   "needs at most 4 input channels, one group and a horizontal stride of 1 or "
                   "2 (conv2d takes the others)");
    detail::check_buffer(k, "weights", oihw, s.weight_count());
    const auto t0 = std::chrono::steady_clock::now();
    packed p;
    p.shape = s;
    p.pv = s.k <= L ? 1 : PV_MAX;
    const index_t P = p.pv * L, taps = s.r * s.s * s.c;
    p.panels = (s.k + P - 1) / P;
    p.w = detail::aligned_array<float>(std::size_t(p.panels * taps * P));
    float* o = p.w.data();
    for (index_t kb = 0; kb < p.panels; ++kb)
      for (index_t r = 0; r < s.r; ++r)
        for (index_t t = 0; t < s.s; ++t)
          for (index_t c = 0; c < s.c; ++c)
            for (index_t j = 0; j < P; ++j) {
              const index_t kk = kb * P + j;
              *o++ = kk < s.k ? oihw[((kk * s.c + c) * s.r + r) * s.s + t] : 0.f;
            }
    p.pack_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return p;
  }

  /// Output rows per work item, and the padded band of input rows an item copies (per channel:
  /// rows x width floats; ~64 KiB for all channels).
  struct band_plan {
    index_t rows, in_rows, width;
  };
  static band_plan band_of(const conv_shape& s) {
    band_plan b{};
    b.width = s.w + s.pad_left + s.pad_right;
    const index_t row_bytes = std::max<index_t>(1, s.c * s.stride_h * b.width * 4);
    b.rows = std::clamp<index_t>(index_t(64 * 1024) / row_bytes, 1, s.out_h());
    b.in_rows = (b.rows - 1) * s.stride_h + (s.r - 1) * s.dilation_h + 1;
    return b;
  }
  /// Per thread: the band, and each tap's offset in it.
  static std::size_t workspace_size(const conv_shape& s, int threads) {
    if (!takes(s)) return 0;
    const band_plan b = band_of(s);
    return workspace_slots_bytes(
        threads, workspace_round(std::size_t(s.c * b.in_rows * b.width) * sizeof(float)) +
                     workspace_round(std::size_t(s.r * s.s * s.c) * sizeof(index_t)));
  }

  /// y (NHWC) = epilogue(conv(x (NCHW), w)); scratch from ws (workspace_size()).
  template <class Out>
  static run_info run(tensor_view<const float, nchw> x, const packed& w, tensor_view<Out, nhwc> y,
                      const Ep& ep, workspace ws, const run_options& opt = {}) {
    constexpr std::string_view k = "few_channel_conv2d";
    if (w.empty()) detail::fail(k, "packed weights are empty");
    conv_shape s = w.shape;
    if (x.dims.c != s.c || x.dims.h != s.h || x.dims.w != s.w)
      detail::fail(k, "the input is not N x " + std::to_string(s.c) + " x " + std::to_string(s.h) +
                          " x " + std::to_string(s.w) + " as the weights were packed for");
    s.n = x.dims.n;
    if (!(y.dims == s.out_dims()))
      detail::fail(k, "the output shape is not N x K x OH x OW = " + std::to_string(s.n) + " x " +
                          std::to_string(s.k) + " x " + std::to_string(s.out_h()) + " x " +
                          std::to_string(s.out_w()));
    const index_t n_in = numel(x.dims), n_out = numel(y.dims);
    detail::check_buffer(k, "input", x.data, n_in);
    detail::check_buffer(k, "output", y.data, n_out);
    detail::check_disjoint(k, "input", x.data, n_in, y.data, n_out);
    validate(ep, k, n_out, s.k, y.data, sizeof(*y.data) * std::size_t(n_out), sizeof(*y.data));
    run_info info{k, A::name, simd::impl_name<A, B>(), micro_kernel(w.pv), 1};
    if (n_out == 0) return info;
    const std::size_t slot = workspace_size(s, 1);
    const int pool =
        detail::workspace_threads(k, ws, slot, pool_threads(opt.threads, "few_channel_conv2d"));
    if (s.stride_w == 2)
      info.threads = w.pv == 1 ? run_with<1, 2>(x.data, w, y.data, s, ep, pool, ws, slot)
                               : run_with<2, 2>(x.data, w, y.data, s, ep, pool, ws, slot);
    else
      info.threads = w.pv == 1 ? run_with<1, 1>(x.data, w, y.data, s, ep, pool, ws, slot)
                               : run_with<2, 1>(x.data, w, y.data, s, ep, pool, ws, slot);
    return info;
  }

 private:
  /// "nchw->nhwc 12x1v": the tile's pixels x vectors of output channels.
  static const char* micro_kernel(int pv) {
    static const std::string one = "nchw->nhwc " + std::to_string(MR) + "x1v",
                             two = "nchw->nhwc " + std::to_string(MR) + "x2v";
    return pv == 1 ? one.c_str() : two.c_str();
  }

  template <int PV, int SW, class Out>
  static int run_with(const float* x, const packed& w, Out* y, const conv_shape& s, const Ep& ep,
                      int pool, const workspace& ws, std::size_t slot) {
    constexpr index_t P = PV * L;
    const band_plan bp = band_of(s);
    const index_t OH = s.out_h(), OW = s.out_w(), K = s.k, taps = s.r * s.s * s.c;
    const index_t bands = (OH + bp.rows - 1) / bp.rows;
    const index_t items = s.n * bands * w.panels;
    const int threads = int(std::min<index_t>(pool, items));
    auto body = [&](range rg, int worker) {
      detail::slot_cursor cur(ws.slot<std::byte>(worker, slot));
      float* const band = cur.take<float>(std::size_t(s.c * bp.in_rows * bp.width));
      index_t* const offs = cur.take<index_t>(std::size_t(taps));
      // One loop over the taps in the weights' order (r, s, c): as nested loops GCC kept the
      // 24 accumulators in memory across them (42 GFLOP/s on MobileNetV3's stem).
      for (index_t r = 0, q = 0; r < s.r; ++r)
        for (index_t t = 0; t < s.s; ++t)
          for (index_t c = 0; c < s.c; ++c, ++q)
            offs[q] = c * bp.in_rows * bp.width + r * s.dilation_h * bp.width + t * s.dilation_w;
      index_t have = -1;  // the (image, band) the copy holds
      for (index_t it = rg.begin; it < rg.end; ++it) {
        const index_t kb = it % w.panels, b = (it / w.panels) % bands, n = it / (w.panels * bands);
        const index_t oh0 = b * bp.rows, nrows = std::min(bp.rows, OH - oh0);
        if (have != n * bands + b) copy_band(x, s, bp, n, oh0 * s.stride_h - s.pad_top, band);
        have = n * bands + b;
        const float* wb = w.w.data() + kb * taps * P;
        const index_t ch0 = kb * P, valid = std::min<index_t>(P, K - ch0);
        for (index_t r = 0; r < nrows; ++r) {
          const float* row = band + r * s.stride_h * bp.width;
          const index_t pix0 = (n * OH + oh0 + r) * OW;
          index_t ow = 0;
          for (; ow + MR <= OW; ow += MR)
            tile<MR, PV, SW>(row, offs, taps, s, wb, y, (pix0 + ow) * K + ch0, ch0, valid, ow, ep);
          for (; ow + 4 <= OW; ow += 4)
            tile<4, PV, SW>(row, offs, taps, s, wb, y, (pix0 + ow) * K + ch0, ch0, valid, ow, ep);
          for (; ow < OW; ++ow)
            tile<1, PV, SW>(row, offs, taps, s, wb, y, (pix0 + ow) * K + ch0, ch0, valid, ow, ep);
        }
      }
    };
    parallel_for(0, items, (items + threads - 1) / threads, body, threads);
    return threads;
  }

  /// The band's input rows ih0 .. ih0 + in_rows of image n, each channel's rows padded with
  /// zeros to the padded width (rows above or below the image: zeros).
  static void copy_band(const float* x, const conv_shape& s, const band_plan& bp, index_t n,
                        index_t ih0, float* band) {
    for (index_t c = 0; c < s.c; ++c)
      for (index_t i = 0; i < bp.in_rows; ++i) {
        float* o = band + (c * bp.in_rows + i) * bp.width;
        const index_t ih = ih0 + i;
        if (ih < 0 || ih >= s.h) {
          std::fill(o, o + bp.width, 0.f);
          continue;
        }
        std::fill(o, o + s.pad_left, 0.f);
        std::copy_n(x + ((n * s.c + c) * s.h + ih) * s.w, s.w, o + s.pad_left);
        std::fill(o + s.pad_left + s.w, o + bp.width, 0.f);
      }
  }

  /// Rows consecutive output pixels from column ow of the row whose band rows start at `row`
  /// x P output channels: per tap one FMA per pixel and vector, then the epilogue, stored once.
  template <int Rows, int PV, int SW, class Out>
  static KFUSE_INLINE void tile(const float* row, const index_t* KFUSE_RESTRICT offs, index_t taps,
                                const conv_shape& s, const float* KFUSE_RESTRICT wb, Out* y,
                                index_t flat0, index_t ch0, index_t valid, index_t ow,
                                const Ep& ep) {
    using V = vec;
    constexpr int P = PV * L;
    V acc[Rows][PV];
    detail::start_tile(acc, nullptr, true);
    const float* base = row + ow * SW;
    for (index_t q = 0; q < taps; ++q) {
      const float* KFUSE_RESTRICT in = base + offs[q];
      V bv[PV];
#pragma GCC unroll 2
      for (int j = 0; j < PV; ++j) bv[j] = simd::load<V>(wb + q * P + j * L);
#pragma GCC unroll 12
      for (int i = 0; i < Rows; ++i) {
        const V a(in[i * SW]);
#pragma GCC unroll 2
        for (int j = 0; j < PV; ++j) acc[i][j] = simd::fma(a, bv[j], acc[i][j]);
      }
    }
    detail::store_tile<true>(acc, y + flat0, s.k, flat0, s.k, ch0, valid, ep);
  }
};

KFUSE_END_NAMESPACE
