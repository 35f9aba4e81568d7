#pragma once
// The squeeze-excite gate of a pointwise NHWC conv: conv2d::run_gated computes
// epilogue(conv(x * gate, w)) for a gate per (sample, input channel) without a pass of its own
// over the feature map, in one of two ways:
//  * weights: a copy of the packed weights scaled by the sample's gate (C x K multiplies per
//    sample; bf16 rounds each scaled weight once), where that costs less than the map's
//    H x W x C (f32 / bf16 with K <= H x W);
//  * rows (gates_rows): each value of the map multiplied by its gate (int8: and quantized to u8,
//    as a multiply and then quantize<u8> would) one block of whole row tiles at a time, into a
//    per-thread slot that stays in L1 while the GEMM reads it. int8 always gates this way (its
//    weights cannot absorb a per-sample scale without being requantized).
// conv2d holds the entry points; this header is their body, detail::gated_conv2d<Conv>.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/quantize.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/kernels/workspace.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Whether the gate goes on the input rows (else on a copy of the weights): always for integer
/// recipes, and where the weights' C x K multiplies per sample exceed the map's H x W x C.
constexpr bool gates_rows(const conv_shape& s, bool integer) { return integer || s.k > s.h * s.w; }

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

/// The body of Conv::run_gated (Conv = conv2d<...>, whose call checks have passed).
template <class Conv>
struct gated_conv2d {
  using weights = typename Conv::weights;
  using TXs = typename Conv::TXs;  // the GEMM's A: u8 (i8), float (f32), bf16_t (bf16)
  static constexpr int MR = Conv::MR;

  /// One thread's slot (rows) or the scaled weights' copy (weights), aligned.
  static std::size_t slot_bytes(const weights& w) {
    const conv_shape& s = w.shape_;
    const index_t rows = std::min(gated_slot_rows(s.c, MR), s.h * s.w);
    const std::size_t bytes =
        Conv::gates_rows(s) ? std::size_t(rows * s.c) * sizeof(TXs) : w.gemm_.bytes();
    return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
  }
  static std::size_t workspace_size(const weights& w, int threads) {
    return workspace_slots_bytes(Conv::gates_rows(w.shape_) ? threads : 1, slot_bytes(w));
  }

  /// y = epilogue(conv(x * gate, w)); x_scale / x_zero_point quantize the gated values (i8).
  template <class TX, class Y, class Ep>
  static run_info run(const TX* x, const float* gate, index_t gate_stride, float x_scale,
                      std::int32_t x_zero_point, const weights& w, Y y, const Ep& ep,
                      const workspace& ws, const run_options& opt, run_info info) {
    constexpr std::string_view k = "conv2d";
    const conv_shape& s = w.shape_;
    if (!Conv::takes_channel_gate(s) || w.path_ != conv_path::gemm_1x1)
      fail(k, "a channel gate needs a 1x1, stride 1, unpadded, one-group NHWC conv");
    if (gate_stride < 0) fail(k, "negative gate stride");
    const index_t n = y.dims.n;
    if (n == 0 || numel(y.dims) == 0) return info;
    check_buffer(k, "gate", gate,
                 checked_add(k, "the gate's extent",
                             checked_mul(k, "the gate's extent", n - 1, gate_stride), s.c));
    const std::size_t slot = slot_bytes(w);
    if (ws.bytes < slot || ws.data == nullptr)
      fail(k, "workspace of " + std::to_string(ws.bytes) + " bytes is smaller than the " +
                  std::to_string(slot) + " bytes of " +
                  (Conv::gates_rows(s) ? "one thread's gated row block" : "the gated weights") +
                  " (size it with gated_workspace_size())");
    if constexpr (Conv::integer)  // (int8 weights have no scaled copy)
      info.threads = run_rows(x, gate, gate_stride, x_scale, x_zero_point, w, y, ep, ws, opt);
    else
      info.threads = Conv::gates_rows(s)
                         ? run_rows(x, gate, gate_stride, x_scale, x_zero_point, w, y, ep, ws, opt)
                         : run_weights(x, gate, gate_stride, w, y, ep, ws, opt);
    return info;
  }

 private:
  /// Per block of whole row tiles of one sample: x * gate into this thread's slot as the GEMM's
  /// A, then the GEMM on that block while it is in L1.
  template <class TX, class Y, class Ep>
  static int run_rows(const TX* x, const float* gate, index_t gate_stride, float x_scale,
                      std::int32_t x_zero_point, const weights& w, Y y, const Ep& ep,
                      const workspace& ws, const run_options& opt) {
    const conv_shape& s = w.shape_;
    const index_t n = y.dims.n, hw = s.h * s.w, whole = numel(y.dims);
    const std::size_t slot = slot_bytes(w);
    const int threads = workspace_threads("conv2d", ws, slot, pool_threads(opt.threads, "conv2d"));
    const index_t rows = gated_block_rows(hw, s.c, MR, threads), blocks = (hw + rows - 1) / rows;
    parallel_for(
        0, n * blocks, 1,
        [&](range r, int worker) {
          TXs* a = ws.slot<TXs>(worker, slot);
          for (index_t t = r.begin; t < r.end; ++t) {
            const index_t b = t / blocks, r0 = (t % blocks) * rows, m = std::min(rows, hw - r0),
                          row = b * hw + r0;
            gate_rows<typename Conv::vec>(x + row * s.c, m, s.c, gate + b * gate_stride, a, x_scale,
                                          x_zero_point);
            Conv::gemm_type::run(a, m, s.c, w.gemm_, y.data + row * s.k, s.k, ep, run_options{1},
                                 x_zero_point, output_slice{row * s.k, whole});
          }
        },
        threads);
    return int(std::min<index_t>(threads, n * blocks));
  }

  /// Per sample: the packed weights' rows scaled by its gate (one copy serves every sample when
  /// the stride is 0), then the GEMM over the sample's rows.
  template <class TX, class Y, class Ep>
  static int run_weights(const TX* x, const float* gate, index_t gate_stride, const weights& w, Y y,
                         const Ep& ep, const workspace& ws, const run_options& opt) {
    if (reinterpret_cast<std::uintptr_t>(ws.data) % workspace_alignment != 0)
      fail("conv2d",
           "workspace is not aligned to " + std::to_string(workspace_alignment) + " bytes");
    const conv_shape& s = w.shape_;
    const index_t n = y.dims.n, hw = s.h * s.w;
    using wt = std::remove_cvref_t<decltype(*w.gemm_.panel(0))>;  // float or bf16_t
    wt* scaled = reinterpret_cast<wt*>(ws.data);
    auto wb = w.gemm_.template scaled_rows<typename Conv::vec>(gate, scaled);
    int threads = 1;
    for (index_t b = 0; b < n; ++b) {
      if (b > 0 && gate_stride != 0)
        wb = w.gemm_.template scaled_rows<typename Conv::vec>(gate + b * gate_stride, scaled);
      threads = Conv::gemm_type::run(x + b * hw * s.c, hw, s.c, wb, y.data + b * hw * s.k, s.k, ep,
                                     opt, 0, output_slice{b * hw * s.k, numel(y.dims)})
                    .threads;
    }
    return threads;
  }
};

}  // namespace detail

KFUSE_END_NAMESPACE
