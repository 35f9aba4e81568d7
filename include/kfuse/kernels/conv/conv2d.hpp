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
// The tiles and the operands they read live in kernels/conv/conv2d_tiles.hpp; this header is the
// kernel: packing, path choice, threading and the per-thread workspace slots.
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
#include "kfuse/kernels/conv/conv2d_tiles.hpp"
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
struct conv2d : image_kernel_types<Layout, Ep> {
  static_assert(std::is_same_v<Elem, f32> || std::is_same_v<Elem, bf16> || std::is_same_v<Elem, i8>,
                "kfuse::conv2d: the recipe must be f32, bf16 or i8");
  static_assert(layout_tag<Layout>, "kfuse::conv2d: the layout must be kfuse::nchw or kfuse::nhwc");
  using vec = simd::vec_for<A, B>;
  using config = default_config<Elem, A, vec::lanes>;
  using kernels = detail::conv_kernels<Elem, A, vec>;
  using microkernel = typename kernels::mk;
  using gemm_type = gemm<Elem, A, Ep, B>;
  static constexpr int int8_weight_limit = gemm_type::int8_weight_limit;  // i8: pack()'s max |w|
  static constexpr bool is_nhwc = std::is_same_v<Layout, nhwc>;
  using weight_storage =
      std::conditional_t<is_nhwc, typename kernels::storage, typename kernels::row_weight>;
  using depthwise = depthwise_conv2d<Elem, Layout, A, Ep, B>;
  /// Winograd F(4x4, 3x3): the f32 NHWC recipe only.
  static constexpr bool has_winograd = is_nhwc && std::is_same_v<Elem, f32>;
  using winograd = detail::winograd_f43<vec, microkernel, config::mr, config::nv>;
  using weights =
      conv_weights<weight_storage, typename kernels::storage, typename depthwise::packed>;
  static constexpr int G = microkernel::k_group;
  static constexpr int MR = config::mr, NV = config::nv, NR = config::nr, L = vec::lanes;
  /// The weights' element type in OIHW: float (f32, bf16 recipes; bf16_t accepted too) or int8_t.
  static constexpr bool integer = microkernel::integer;
  /// The activations' storage type (int8: u8; s8 inputs have the same size).
  using TXs = std::conditional_t<integer, std::uint8_t, storage_t<Elem>>;

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
    std::size_t bytes = std::size_t(std::max(threads, 1)) * slot_bytes(s);
    if (s.is_depthwise()) bytes = std::max(bytes, depthwise::workspace_size(s, threads));
    return bytes;
  }
  /// initialize = pack (below).
  template <class Src>
  static weights initialize(const conv_shape& s, const Src* oihw) {
    return pack(oihw, s);
  }

  /// Block-diagonal groups (conv_shape::diagonal) whose blocks are one vector of output channels
  /// each run as diagonal tiles (detail::nhwc_diagonal_tile): f32 NHWC, 2 or NV blocks per
  /// group (each other count would be two more tile bodies in every f32 conv's build).
  static constexpr bool diagonal_tiles(const conv_shape& s) {
    return is_nhwc && std::is_same_v<Elem, f32> && NV >= 2 && NV <= 4 &&
           (s.diagonal == 2 || s.diagonal == NV) && s.k / s.groups == s.diagonal * L;
  }
  /// s with NV (else 2) of its groups run as the diagonal blocks of one group, when the diagonal
  /// tiles take that; s itself otherwise.
  static conv_shape with_diagonal(const conv_shape& s) {
    for (const index_t d : {index_t(NV), index_t(2)}) {
      if (d < 2 || s.groups % d != 0) continue;
      conv_shape t = s;
      t.groups /= d;
      t.diagonal = d;
      if (diagonal_tiles(t)) return t;
    }
    return s;
  }
  /// True when this shape runs as one GEMM [N*H*W, C] x [C, K] (NHWC only).
  static constexpr bool gemm_shape(const conv_shape& s) { return is_nhwc && s.is_pointwise(); }

  /// Packs OIHW weights [K, C/groups, R, S] once. `count` (if given) must equal
  /// shape.weight_count(). `algo`: automatic takes Winograd F(4x4, 3x3) for f32 NHWC 3x3
  /// stride-1 shapes where detail::winograd_pays (s.n is the batch it plans for); direct never;
  /// winograd wherever the shape allows it (else kfuse::error).
  template <class Src>
  static weights pack(const Src* oihw, const conv_shape& s, index_t count = -1,
                      conv_algorithm algo = conv_algorithm::automatic) {
    constexpr std::string_view k = "conv2d pack";
    if constexpr (integer)
      static_assert(std::is_same_v<Src, std::int8_t>,
                    "kfuse::conv2d<i8>::pack: int8 weights are given as int8_t (s8)");
    else
      static_assert(!std::is_integral_v<Src>,
                    "kfuse::conv2d::pack: float recipes take float (or bf16_t) weights");
    detail::check_conv_shape(k, s);
    if (count >= 0 && count != s.weight_count())
      detail::fail(k, "wrong weight count: " + std::to_string(count) +
                          " values given, the shape needs K * C/groups * R * S = " +
                          std::to_string(s.weight_count()));
    detail::check_buffer(k, "weights", oihw, s.weight_count());
    if constexpr (integer)  // depthwise int8 computes in f32: any s8 weight
      detail::check_int8_weights(k, A::name, oihw, s.is_depthwise() ? 0 : s.weight_count(),
                                 int8_weight_limit);
    const auto t0 = std::chrono::steady_clock::now();
    weights w;
    w.shape_ = s;
    w.layout_ = Layout::name;
    const index_t cg = s.c / s.groups, kg = s.k / s.groups, rs = s.r * s.s;
    constexpr bool dw_takes = integer || std::is_same_v<Src, float> ||
                              (std::is_same_v<Elem, bf16> && std::is_same_v<Src, bf16_t>);
    if (detail::winograd_chosen(s, algo, has_winograd, k)) {
      w.path_ = detail::conv_path::winograd;
      w.block_ = NR;
      if constexpr (has_winograd)
        w.kblocks_ = winograd::panels(s.k), w.data_ = winograd::pack(oihw, s);
    } else if (s.is_depthwise() && dw_takes) {
      w.path_ = detail::conv_path::depthwise;
      w.block_ = NR;
      if constexpr (dw_takes) w.dw_ = depthwise::pack(oihw, s);
    } else if (gemm_shape(s)) {
      w.path_ = detail::conv_path::gemm_1x1;
      w.block_ = NR;
      w.gemm_ = gemm_type::pack(oihw, s.c, s.k, b_layout::nk);
    } else if (uses_patches(s) || (amx_shape(s) && gemm_type::amx_active())) {
      // A GEMM [pixels, R*S*C] x [R*S*C, K] over im2col blocks: weights as [K, (r, s, c)],
      // padded with zero rows to the k group.
      w.path_ = detail::conv_path::nhwc_patches;
      w.block_ = NR;
      w.crsp_ = patch_values(s);
      std::vector<Src> b(std::size_t(s.k * w.crsp_), Src{});
      for (index_t kk = 0; kk < s.k; ++kk)
        for (index_t c = 0; c < s.c; ++c)
          for (index_t t = 0; t < rs; ++t)
            b[std::size_t(kk * w.crsp_ + t * s.c + c)] = oihw[(kk * s.c + c) * rs + t];
      w.gemm_ = gemm_type::pack(b.data(), w.crsp_, s.k, b_layout::nk);
    } else if constexpr (is_nhwc) {
      w.path_ = detail::conv_path::nhwc_implicit;
      w.block_ = NR;
      w.kblocks_ = (kg + NR - 1) / NR;
      w.cgp_ = (cg + G - 1) / G * G;
      const index_t blk = rs * w.cgp_ * NR;
      w.data_ = detail::aligned_array<weight_storage>(std::size_t(s.groups * w.kblocks_ * blk));
      if constexpr (integer) w.sums_.assign(std::size_t(s.groups * w.kblocks_ * NR), 0);
      weight_storage* o = w.data_.data();
      for (index_t g = 0; g < s.groups; ++g)
        for (index_t kb = 0; kb < w.kblocks_; ++kb)
          for (index_t t = 0; t < rs; ++t)
            for (index_t c0 = 0; c0 < w.cgp_; c0 += G)
              for (int j = 0; j < NR; ++j)
                for (int gi = 0; gi < G; ++gi) {
                  const index_t kl = kb * NR + j, c = c0 + gi;
                  float v = 0.f;
                  if (kl < kg && c < cg) v = to_float(oihw[((g * kg + kl) * cg + c) * rs + t]);
                  *o++ = from_float<weight_storage>(v);
                  if constexpr (integer)
                    w.sums_[std::size_t((g * w.kblocks_ + kb) * NR + j)] += std::int32_t(v);
                }
    } else {
      w.path_ = detail::conv_path::nchw_rows;
      w.block_ = MR;
      const index_t crs = cg * rs;
      w.crsp_ = (crs + G - 1) / G * G;
      w.data_ = detail::aligned_array<weight_storage>(std::size_t(s.k * w.crsp_));
      if constexpr (integer) w.sums_.assign(std::size_t(s.k), 0);
      for (index_t kk = 0; kk < s.k; ++kk) {
        weight_storage* o = w.data_.data() + kk * w.crsp_;
        for (index_t q = 0; q < w.crsp_; ++q) {
          if constexpr (integer) {
            // vpdpbusd's broadcast operand: u8 = w + weight_shift (the finish step removes it).
            const std::int32_t v = q < crs ? std::int32_t(oihw[kk * crs + q]) : 0;
            o[q] = std::uint8_t(v + microkernel::weight_shift);
            w.sums_[std::size_t(kk)] += v;
          } else {
            const float v = q < crs ? to_float(oihw[kk * crs + q]) : 0.f;
            o[q] = from_float<weight_storage>(v);
          }
        }
      }
    }
    w.pack_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return w;
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
    if (x.dims.c != s.c)
      detail::fail(k, "channel mismatch: the input has " + std::to_string(x.dims.c) +
                          " channels, the packed weights expect C = " + std::to_string(s.c));
    if (y.dims.c != s.k)
      detail::fail(k, "channel mismatch: the output has " + std::to_string(y.dims.c) +
                          " channels, the packed weights produce K = " + std::to_string(s.k));
    if (x.dims.h != s.h || x.dims.w != s.w)
      detail::fail(k, "the input is " + std::to_string(x.dims.h) + "x" + std::to_string(x.dims.w) +
                          ", the weights were packed for " + std::to_string(s.h) + "x" +
                          std::to_string(s.w));
    if (x.dims.n < 0) detail::fail(k, "negative batch");
    if (!(y.dims == dims4{x.dims.n, s.k, s.out_h(), s.out_w()}))
      detail::fail(k, "the output shape is not N x K x OH x OW = " + std::to_string(x.dims.n) +
                          " x " + std::to_string(s.k) + " x " + std::to_string(s.out_h()) + " x " +
                          std::to_string(s.out_w()));
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
    validate(ep, k, n_out, s.k, y.data, sizeof(*y.data) * std::size_t(n_out), sizeof(*y.data));
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
      (void)nhwc_layout<TXs>(m, s);
    else if constexpr (band_path)
      (void)band_layout(m, s);
    else
      (void)panel_layout(m, s);
    // Packed with AMX on or off: room for either path.
    return amx_shape(s) ? std::max(m.used(), patches) : m.used();
  }

  /// f32 NCHW reads its pixel operand from padded input bands (no panel); bf16 and int8 build
  /// panels in the k-grouped order their dot-product instructions want.
  static constexpr bool band_path = !is_nhwc && std::is_same_v<Elem, f32>;

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
        const index_t ch0 = g * kg + kb * NR, ch_valid = std::min<index_t>(NR, kg - kb * NR);
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
                    rows, in.pixels(), s, wblock, cgp, cg / s.diagonal, y + pix0 * s.k + ch0,
                    pix0 * s.k + ch0, ch0, ch_valid, ep);
                p += rows;
                continue;
              }
            }
            detail::nhwc_tile_any<MK, vec, MR, NV>(rows, in.pixels(), s, wblock, chunk, cgp,
                                                   y + pix0 * s.k + ch0, pix0 * s.k + ch0, ch0,
                                                   ch_valid, sums, a_zero, ep);
            p += rows;
          }
        }
      }
    };
    parallel_for(0, items, (items + threads - 1) / threads, body, threads);
    return threads;
  }

  /// The patch path (detail::patch_shape): few-channel NHWC layers of the bf16 and int8 recipes.
  static constexpr bool uses_patches(const conv_shape& s) {
    return is_nhwc && !std::is_same_v<Elem, f32> && detail::patch_shape(s);
  }
  /// Dense NHWC shapes packed for the patch path where AMX is on: tileloadd reads rows one
  /// stride apart (the implicit path's pixel pointers are not); a pixel's R x S x C copy costs
  /// a fraction of its tile products (3x3 x 64 -> 64 bf16: 1.2 KiB against 37 k multiply-adds).
  static constexpr bool amx_shape(const conv_shape& s) {
    return is_nhwc && gemm_type::has_amx && s.groups == 1 && !s.is_pointwise() && !s.is_depthwise();
  }
  /// The patch path: values per im2col row (R*S*C rounded up to the k group) and rows per block
  /// (about 16 KiB: the block stays in L1 while the GEMM's column panels pass over it; 64 KiB
  /// blocks measured the same).
  static index_t patch_values(const conv_shape& s) { return (s.c * s.r * s.s + G - 1) / G * G; }
  /// On AMX, blocks of whole 32-row tile blocks, ~512 KiB: the GEMM's A in L2 while every
  /// weight panel passes over it (each block streams the weights once).
  static index_t patch_pixels(const conv_shape& s) {
    const index_t row = patch_values(s) * index_t(sizeof(TXs));
    if (gemm_type::has_amx && (amx_shape(s) || uses_patches(s)))
      return std::clamp<index_t>(index_t(512 * 1024) / row / 32 * 32, 32, 2048);
    const index_t want = index_t(16 * 1024) / row;
    return std::clamp<index_t>(want / MR * MR, MR, 1024);
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

KFUSE_END_NAMESPACE
