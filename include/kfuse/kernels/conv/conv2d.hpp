#pragma once
// conv2d<Elem, Layout, Arch, Epilogue, Backend>: y = epilogue(conv(x, w)) for dense and grouped
// 2-D convolutions, NCHW and NHWC both first class.
//
//   using conv = kfuse::conv2d<kfuse::f32, kfuse::nhwc, kfuse::arch::native,
//                              kfuse::epilogue<kfuse::bias, kfuse::relu>>;
//   const auto w = conv::pack(weights_oihw, shape);                       // once
//   conv::run(kfuse::view<kfuse::nhwc>(x, shape.in_dims()), w,
//             kfuse::view<kfuse::nhwc>(y, shape.out_dims()), {{bias}, {}});  // every call
//
// Elem is the recipe, as for gemm: f32, bf16 (bf16 activations and weights, f32 accumulation),
// i8 (u8 or s8 activations with a zero point x s8 weights -> s32 accumulators; the epilogue
// dequantizes or requantizes). Weights come in PyTorch's OIHW order [K, C/groups, R, S].
//
// Both layouts run the GEMM micro-kernels (kernels/gemm/microkernels.hpp) on tiles read straight
// from the activations; the accumulators of a tile are final before the epilogue runs on them
// and the tile is stored once:
//  * NHWC, 1x1, stride 1, no padding, one group: literally gemm [N*H*W, C] x [C, K].
//  * NHWC otherwise ("implicit gemm"): a register tile is MR consecutive output pixels (which
//    may span output rows: a 7x7 map runs as tiles of 5 and 6, not 4 + 3 per row) x NR output
//    channels; for each tap (r, s) the micro-kernel reduces over the group's input channels,
//    reading each pixel through a pointer of its own (an indirection, as XNNPACK's). Inputs with
//    padding are read from per-thread copies of the input rows padded with zeros (or the zero
//    point), so no tap needs a bounds check.
//  * NCHW ("channel rows"): the GEMM [K, C*R*S] x [C*R*S, pixels] per image, with the weights
//    as the broadcast operand (OIHW rows are exactly its rows) and lanes = consecutive output
//    pixels, so every store and the residual read are contiguous NCHW runs and the epilogue's
//    channel is the tile row. The pixel operand is a per-thread panel of NR output pixels
//    (flattened over rows, so small images waste no lanes) x a chunk of the C*R*S taps, built
//    from the NCHW rows with vector copies; it stays in L1/L2 while every channel row tile uses it.
//  * f32 NHWC 3x3 stride-1 shapes where it pays run as Winograd F(4x4, 3x3)
//    (kernels/conv/winograd.hpp; pack's conv_algorithm chooses).
//  * Depthwise shapes (groups == C == K > 1) go to kfuse::depthwise_conv2d
//    (kernels/conv/depthwise.hpp), whose packed weights the conv2d weights then hold.
// The tiles and the operands they read live in conv2d_tiles_nchw.hpp / _nhwc.hpp; the recipe's
// types, the weight packing and the path predicates in conv2d_base.hpp; the NCHW and NHWC paths'
// threading and workspace slots in conv2d_nchw.hpp and conv2d_nhwc.hpp. This header is the
// kernel's contract: the call checks, the dispatch to a path, the channel-gated entry points.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/conv/conv2d_base.hpp"
#include "kfuse/kernels/conv/conv2d_nchw.hpp"
#include "kfuse/kernels/conv/conv2d_nhwc.hpp"
#include "kfuse/kernels/conv/conv2d_tiles_nchw.hpp"
#include "kfuse/kernels/conv/conv2d_tiles_nhwc.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/conv/conv_weights.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"
#include "kfuse/kernels/conv/gated_conv2d.hpp"
#include "kfuse/kernels/conv/nhwc_geometry.hpp"
#include "kfuse/kernels/conv/winograd.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/thread_pool.hpp"

KFUSE_BEGIN_NAMESPACE

template <class Elem, class Layout, class A = arch::native, class Ep = epilogue<>,
          class B = backend::xsimd>
struct conv2d : detail::conv2d_nhwc_path<
                    detail::conv2d_nchw_paths<detail::conv2d_base<Elem, Layout, A, Ep, B>>> {
  using base = detail::conv2d_nhwc_path<
      detail::conv2d_nchw_paths<detail::conv2d_base<Elem, Layout, A, Ep, B>>>;
  using base::amx_shape;
  using base::band_layout;
  using base::band_path;
  using base::diagonal_tiles;
  using base::G;
  using base::gemm_shape;
  using base::has_winograd;
  using base::int8_weight_limit;
  using base::integer;
  using base::is_nhwc;
  using base::L;
  using base::MR;
  using base::NR;
  using base::NV;
  using base::pack;
  using base::panel_layout;
  using base::patch_pixels;
  using base::patch_values;
  using base::run_nchw;
  using base::run_nchw_band;
  using base::run_nhwc;
  using base::uses_patches;
  using typename base::depthwise;
  using typename base::gemm_type;
  using typename base::microkernel;
  using typename base::TXs;
  using typename base::vec;
  using typename base::weight_storage;
  using typename base::weights;
  using typename base::winograd;

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  static constexpr std::string_view name = "conv2d";
  using problem = conv_shape;
  using packed = weights;

  static kernel_status can_implement(const conv_shape& s) {
    return detail::status_of(name, [&] { detail::check_conv_shape(name, s); });
  }
  /// Scratch per thread of the shape's path: padded input rows or bands, pixel panels, partial
  /// sums (the depthwise path: depthwise_conv2d's; 1x1 GEMM: none).
  static std::size_t workspace_size(const conv_shape& s, int threads) {
    detail::require(name, can_implement(s));
    std::size_t bytes = workspace_slots_bytes(threads, slot_bytes(s));
    if (s.is_depthwise()) bytes = std::max(bytes, depthwise::workspace_size(s, threads));
    return bytes;
  }
  /// initialize = pack (below).
  template <class Src>
  static weights initialize(const conv_shape& s, const Src* oihw) {
    return pack(oihw, s);
  }

  /// s with NV (else 2) of its groups run as the diagonal blocks of one group, when the diagonal
  /// tiles take that; s itself otherwise. A group count that neither divides is padded with
  /// phantom blocks (conv_shape::phantom_blocks: c and k grow by their channels, the weights
  /// need zeros there): RegNetX's 25 groups of 16 channels ran one vector wide, at a quarter of
  /// the peak, and run as 7 groups of 4 blocks.
  static conv_shape with_diagonal(const conv_shape& s) {
    for (const bool padded : {false, true})
      for (const index_t d : {index_t(NV), index_t(2)}) {
        const index_t phantom = (d - s.groups % d) % d;
        if (d < 2 || s.groups < 2 || (phantom > 0) != padded) continue;
        conv_shape t = s;
        t.c += phantom * (s.c / s.groups);
        t.k += phantom * (s.k / s.groups);
        t.groups = (s.groups + phantom) / d;
        t.diagonal = d;
        t.phantom_blocks = phantom;
        if (diagonal_tiles(t)) return t;
      }
    return s;
  }
  /// "conv implicit-gemm nhwc f32 fma 6x4v", "conv 1x1 gemm f32 fma 6x4v", ...
  /// amx: the GEMM paths on AMX tiles ("conv 1x1 gemm bf16 amx 32x32").
  static const char* micro_kernel(detail::conv_path p, bool amx = false) {
    if (p == detail::conv_path::depthwise) return "depthwise";
    static const std::string tile = std::string(microkernel::name) + " " + std::to_string(MR) +
                                    "x" + std::to_string(NV) + (L == 1 ? "" : "v");
    static const std::string names[] = {
        // in conv_path's order
        "conv 1x1 gemm " + tile,
        "conv implicit-gemm nhwc " + tile,
        std::string("conv channel-rows nchw ") + (band_path ? "" : "panel ") + tile,
        "",
        "conv patches gemm nhwc " + tile,
        "conv winograd f(4x4,3x3) nhwc " + tile,
        std::string("conv 1x1 gemm ") + gemm_type::micro_kernel(true),
        std::string("conv patches gemm nhwc ") + gemm_type::micro_kernel(true)};
    if (amx) return names[p == detail::conv_path::gemm_1x1 ? 6 : 7].c_str();
    return names[int(p)].c_str();
  }

  /// The convenience form for direct callers: a workspace per call.
  template <class TX, class Out>
  static run_info run(tensor_view<const TX, Layout> x, const weights& w, tensor_view<Out, Layout> y,
                      const Ep& ep = {}, const run_options& opt = {},
                      std::int32_t x_zero_point = 0) {
    conv_shape s = w.shape_;
    s.n = x.dims.n;
    const workspace_buffer ws =
        w.empty() ? workspace_buffer{}
                  : detail::own_workspace<conv2d>(s, pool_threads(opt.threads, "conv2d"));
    return run(x, w, y, ep, ws.view(), opt, x_zero_point);
  }

  /// The checks of a call: types, the packed weights against x and y, buffers, the epilogue.
  /// (i8's run_gated reads float and quantizes it to u8 with x_zero_point as it loads it.)
  template <class TX, class Out>
  static void check_call(tensor_view<const TX, Layout> x, const weights& w,
                         tensor_view<Out, Layout> y, const Ep& ep, std::int32_t x_zero_point) {
    constexpr std::string_view k = "conv2d";
    using zero_type = std::conditional_t<std::is_same_v<TX, float>, std::uint8_t, TX>;
    if constexpr (integer)
      static_assert(std::is_same_v<zero_type, std::uint8_t> || std::is_same_v<TX, std::int8_t>,
                    "kfuse::conv2d<i8>: activations are uint8_t or int8_t");
    else
      static_assert(std::is_same_v<TX, storage_t<Elem>>,
                    "kfuse::conv2d: the activations' element type does not match the recipe "
                    "(f32: float, bf16: bf16_t)");
    using produced = typename epilogue_traits<Ep>::output_elem;
    static_assert(
        std::is_same_v<elem_of<Out>, std::conditional_t<std::is_void_v<produced>, f32, produced>> ||
            (std::is_void_v<produced> && elem_traits<elem_of<Out>>::is_float),
        "kfuse::conv2d: the output type does not match what the epilogue produces "
        "(integer outputs need requantize<E> / quantize<E> last)");
    if (w.empty()) detail::fail(k, "packed weights are empty");
    const conv_shape& s = w.shape_;
    if (w.layout_ != Layout::name)
      detail::fail(k, "weights were packed for layout " + std::string(w.layout_) + ", not " +
                          std::string(Layout::name));
    if (x.dims.c != s.in_channels())
      detail::fail(
          k, "channel mismatch: the input has " + std::to_string(x.dims.c) +
                 " channels, the packed weights expect C = " + std::to_string(s.in_channels()));
    if (y.dims.c != s.out_channels())
      detail::fail(
          k, "channel mismatch: the output has " + std::to_string(y.dims.c) +
                 " channels, the packed weights produce K = " + std::to_string(s.out_channels()));
    if (x.dims.h != s.h || x.dims.w != s.w)
      detail::fail(k, "the input is " + std::to_string(x.dims.h) + "x" + std::to_string(x.dims.w) +
                          ", the weights were packed for " + std::to_string(s.h) + "x" +
                          std::to_string(s.w));
    if (x.dims.n < 0) detail::fail(k, "negative batch");
    if (!(y.dims == dims4{x.dims.n, s.out_channels(), s.out_h(), s.out_w()}))
      detail::fail(k, "the output shape is not N x K x OH x OW = " + std::to_string(x.dims.n) +
                          " x " + std::to_string(s.out_channels()) + " x " +
                          std::to_string(s.out_h()) + " x " + std::to_string(s.out_w()));
    if (w.block_ != (w.path_ == detail::conv_path::nchw_rows ? MR : NR))
      detail::fail(k, "weights were packed for another micro-kernel");
    if constexpr (integer) {
      if (x_zero_point < std::numeric_limits<zero_type>::min() ||
          x_zero_point > std::numeric_limits<zero_type>::max())
        detail::fail(k, "the input zero point " + std::to_string(x_zero_point) +
                            " is outside its element range");
    } else if (x_zero_point != 0) {
      detail::fail(k, "a zero point is only meaningful for the i8 recipe");
    }
    const index_t n_in = numel(x.dims), n_out = numel(y.dims);
    detail::check_buffer(k, "input", x.data, n_in);
    detail::check_buffer(k, "output", y.data, n_out);
    detail::check_disjoint(k, "input", x.data, n_in, y.data, n_out);
    validate(ep, k, n_out, s.out_channels(), y.data, sizeof(*y.data) * std::size_t(n_out),
             sizeof(*y.data));
  }

  /// y = epilogue(conv(x, w)). x holds float (f32), bf16_t (bf16), or uint8_t / int8_t with zero
  /// point `x_zero_point` (i8). Out is float or what the epilogue's last stage produces. A
  /// residual `add` reads a tensor in the output's layout. Scratch from `ws`
  /// (workspace_size() of the shape with x's batch); allocates nothing.
  template <class TX, class Out>
  static run_info run(tensor_view<const TX, Layout> x, const weights& w, tensor_view<Out, Layout> y,
                      const Ep& ep, workspace ws, const run_options& opt = {},
                      std::int32_t x_zero_point = 0) {
    constexpr std::string_view k = "conv2d";
    check_call(x, w, y, ep, x_zero_point);
    const conv_shape& s = w.shape_;
    const index_t n_out = numel(y.dims);
    run_info info{k, A::name, simd::impl_name<A, B>(), micro_kernel(w.path_), 1};
    if (n_out == 0) return info;
    conv_shape sh = s;
    sh.n = x.dims.n;
    const std::size_t slot = w.path_ == detail::conv_path::depthwise ? 0 : slot_bytes(sh);
    const int pool = detail::workspace_threads(k, ws, slot, pool_threads(opt.threads, "conv2d"));
    switch (w.path_) {
      case detail::conv_path::depthwise: {
        const run_info di = depthwise::run(x, w.dw_, y, ep, ws, opt, x_zero_point);
        info.micro_kernel = di.micro_kernel;
        info.threads = di.threads;
        break;
      }
      case detail::conv_path::gemm_1x1: {
        const index_t M = sh.n * sh.h * sh.w;
        const run_info gi = gemm_type::run(x.data, M, sh.c, w.gemm_, y.data, sh.k, ep,
                                           run_options{pool}, x_zero_point);
        info.threads = gi.threads;
        info.micro_kernel = micro_kernel(w.path_, gemm_type::uses_amx(M, w.gemm_));
        break;
      }
      case detail::conv_path::nhwc_implicit:
        if constexpr (is_nhwc)
          info.threads = run_nhwc(x.data, w, y.data, sh, ep, pool, ws, slot, x_zero_point);
        break;
      case detail::conv_path::nhwc_patches:
        if constexpr (is_nhwc) {
          info.threads = detail::run_patch_blocks<gemm_type>(x.data, w.gemm_, y.data, sh, w.crsp_,
                                                             patch_pixels(sh), ep, pool, ws, slot,
                                                             x_zero_point);
          const index_t pixels = std::min(patch_pixels(sh), numel(y.dims) / sh.k);
          info.micro_kernel = micro_kernel(w.path_, gemm_type::uses_amx(pixels, w.gemm_));
        }
        break;
      case detail::conv_path::winograd:
        if constexpr (has_winograd)
          info.threads = winograd::run(x.data, w.data_.data(), y.data, sh, ep, pool, ws, slot);
        break;
      case detail::conv_path::nchw_rows:
        if constexpr (!is_nhwc) {
          if constexpr (band_path)
            info.threads = run_nchw_band(x.data, w, y.data, sh, ep, pool, ws, slot);
          else
            info.threads = run_nchw(x.data, w, y.data, sh, ep, pool, ws, slot, x_zero_point);
        }
        break;
    }
    return info;
  }

  /// Whether run_gated takes this shape: the 1x1 GEMM path (NHWC).
  static constexpr bool takes_channel_gate(const conv_shape& s) { return gemm_shape(s); }
  /// Whether run_gated gates the input rows as it loads them (else a copy of the weights):
  /// kernels/conv/gated_conv2d.hpp.
  static constexpr bool gates_rows(const conv_shape& s) { return detail::gates_rows(s, integer); }
  /// Scratch of run_gated: one scaled copy of the packed weights, or a block of gated rows per
  /// thread (gates_rows).
  static std::size_t gated_workspace_size(const weights& w, int threads = 1) {
    return detail::gated_conv2d<conv2d>::workspace_size(w, threads);
  }

  /// i8: y = epilogue(conv(quantize(x * gate), w)) for f32 activations x and a gate per (sample,
  /// input channel) as below: the gated values are quantized with (x_scale, x_zero_point) to u8
  /// as the conv loads them, a block of rows at a time into a slot of `ws` per thread
  /// (gated_workspace_size(w, threads)), so neither the multiply nor the quantization makes a
  /// pass over the feature map of its own. The result equals run() on the unfused u8 tensor.
  template <class Out>
  static run_info run_gated(tensor_view<const float, Layout> x, const float* gate,
                            index_t gate_stride, float x_scale, std::int32_t x_zero_point,
                            const weights& w, tensor_view<Out, Layout> y, const Ep& ep,
                            workspace ws, const run_options& opt = {}) {
    static_assert(integer, "kfuse::conv2d::run_gated: a scale and zero point are for i8 only");
    check_call(x, w, y, ep, x_zero_point);
    if (!(x_scale > 0.f) || !std::isfinite(x_scale))
      detail::fail("conv2d", "the input scale must be positive and finite");
    return detail::gated_conv2d<conv2d>::run(x.data, gate, gate_stride, x_scale, x_zero_point, w, y,
                                             ep, ws, opt, gated_info(w));
  }

  /// y = epilogue(conv(x * gate, w)) for a gate per (sample, input channel): sample n's gate is
  /// gate[n * gate_stride, + C) (gate_stride 0: one gate for every sample). The squeeze-excite
  /// multiply fused into the 1x1 conv after it, on a per-sample copy of the weights or (K > H x
  /// W: gates_rows) on the input rows as the conv loads them (kernels/conv/gated_conv2d.hpp).
  /// `ws`: gated_workspace_size(w, threads). x: float (f32) or bf16_t (bf16).
  template <class TX, class Out>
  static run_info run_gated(tensor_view<const TX, Layout> x, const float* gate, index_t gate_stride,
                            const weights& w, tensor_view<Out, Layout> y, const Ep& ep,
                            workspace ws, const run_options& opt = {}) {
    static_assert(std::is_same_v<Elem, f32> || std::is_same_v<Elem, bf16>,
                  "kfuse::conv2d::run_gated: a channel gate needs the f32 or bf16 recipe");
    check_call(x, w, y, ep, 0);
    return detail::gated_conv2d<conv2d>::run(x.data, gate, gate_stride, 1.f, 0, w, y, ep, ws, opt,
                                             gated_info(w));
  }

 private:
  static run_info gated_info(const weights& w) {
    return {"conv2d", A::name, simd::impl_name<A, B>(), micro_kernel(w.path_), 1};
  }

  /// One thread's scratch on the shape's path (measured from the path's slot layout).
  static std::size_t slot_bytes(const conv_shape& s) {
    if (s.n <= 0 || s.out_h() <= 0 || s.out_w() <= 0 || gemm_shape(s)) return 0;
    if constexpr (has_winograd)  // either path may have been packed: room for both
      if (detail::winograd_shape(s)) return std::max(winograd::slot_bytes(s), direct_slot_bytes(s));
    return direct_slot_bytes(s);
  }
  static std::size_t direct_slot_bytes(const conv_shape& s) {
    detail::slot_cursor m;
    const std::size_t patches =
        workspace_round(std::size_t(patch_pixels(s) * patch_values(s)) * sizeof(TXs));
    if constexpr (is_nhwc)
      if (uses_patches(s)) return patches;
    if constexpr (is_nhwc)
      (void)base::template nhwc_layout<TXs>(m, s);
    else if constexpr (band_path)
      (void)band_layout(m, s);
    else
      (void)panel_layout(m, s);
    // Packed with AMX on or off: room for either path.
    return amx_shape(s) ? std::max(m.used(), patches) : m.used();
  }
};

KFUSE_END_NAMESPACE
