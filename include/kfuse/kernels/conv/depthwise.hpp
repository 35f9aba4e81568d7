#pragma once
// depthwise_conv2d<Elem, Layout, Arch, Epilogue, Backend>: one filter per channel (groups == C ==
// K, channel multiplier 1), any kernel size, stride, asymmetric padding and dilation.
//
//   using dw = kfuse::depthwise_conv2d<kfuse::f32, kfuse::nhwc, kfuse::arch::native,
//                                      kfuse::epilogue<kfuse::bias, kfuse::relu>>;
//   const auto w = dw::pack(weights_oihw, shape);            // once: [C, 1, R, S]
//   dw::run(kfuse::view<kfuse::nhwc>(x, shape.in_dims()), w,
//           kfuse::view<kfuse::nhwc>(y, shape.out_dims()), {{bias}, {}});
//
// Recipes: f32; bf16 (bf16 activations, weights rounded to bf16 when packed, f32 compute: every
// product is exact; any float output); i8 (u8 or s8 activations with a zero point, s8 weights;
// the products are summed exactly in f32, which equals int32 accumulation for up to 512 taps, and
// the epilogue dequantizes or requantizes).
//
// NHWC: lanes are channels. A register tile of PW output pixels x CV channel vectors is
// accumulated over the taps; border pixels run the same tile with the tap range cut to the valid
// taps (loop bounds, never a per-tap branch).
// NCHW: lanes are output pixels of one row of one channel (the channel's weight is broadcast).
// The rows a block of output rows reads are converted once into a zero-padded f32 scratch (split
// into stride phases, so every tap is a contiguous load); a tile of RH output rows x WV vectors
// is accumulated from it. The 3x3 stride-1 case is an unrolled fast path that loads each scratch
// vector once for the three output rows it feeds.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/conv/depthwise_geom.hpp"
#include "kfuse/kernels/conv/depthwise_nchw.hpp"
#include "kfuse/kernels/conv/depthwise_nhwc.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/register_tile.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The activation storage types a recipe accepts.
template <class Recipe, class T>
inline constexpr bool dw_accepts = std::is_same_v<Recipe, f32>    ? std::is_same_v<T, float>
                                   : std::is_same_v<Recipe, bf16> ? std::is_same_v<T, bf16_t>
                                   : std::is_same_v<Recipe, i8> ? (std::is_same_v<T, std::int8_t> ||
                                                                   std::is_same_v<T, std::uint8_t>)
                                                                : false;

}  // namespace detail

template <class Recipe, layout_tag Layout, class A = arch::native, class Ep = epilogue<>,
          class B = backend::xsimd>
struct depthwise_conv2d : image_kernel_types<Layout, Ep> {
  static_assert(std::is_same_v<Recipe, f32> || std::is_same_v<Recipe, bf16> ||
                    std::is_same_v<Recipe, i8>,
                "kfuse::depthwise_conv2d: element recipe must be f32, bf16 or i8 (u8 / s8 "
                "activations with s8 weights)");
  using vec = simd::vec_for<A, B>;
  static constexpr bool integer = std::is_same_v<Recipe, i8>;

  /// Weights packed once for this layout: NHWC [R*S][C rounded up to the vector width] (a tap's
  /// channels are one contiguous vector), NCHW [C][R*S]. Integer weights are held as their
  /// exact f32 values. run() takes N, H and W from its tensors; the rest of the geometry
  /// (kernel, stride, padding, dilation, C) comes from here.
  struct packed {
    conv_shape shape{};
    index_t cpad = 0;
    std::vector<float> w;
    bool empty() const noexcept { return w.empty(); }
  };

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  static constexpr std::string_view name = "depthwise_conv2d";
  using problem = conv_shape;
  static kernel_status can_implement(const conv_shape& s) {
    return detail::status_of(name, [&] { check_depthwise(name, s); });
  }
  /// NCHW copies the input rows of a block into zero-padded f32 rows: one slot per thread.
  /// NHWC needs none.
  static std::size_t workspace_size(const conv_shape& s, int threads) {
    detail::require(name, can_implement(s));
    return workspace_slots_bytes(threads, slot_bytes(s));
  }
  /// initialize = pack (below).
  template <class W>
  static packed initialize(const conv_shape& s, const W* oihw) {
    return pack(oihw, s);
  }

  /// Packs OIHW weights [C, 1, R, S]: float (f32 and bf16 recipes; bf16_t also for bf16) or
  /// int8_t (i8 recipe; per-channel weight scales go into the epilogue's requantize multipliers).
  template <class W>
  static packed pack(const W* oihw, const conv_shape& s) {
    constexpr std::string_view k = "depthwise_conv2d pack";
    if constexpr (integer)
      static_assert(std::is_same_v<W, std::int8_t>,
                    "kfuse::depthwise_conv2d<i8>: weights must be int8_t (s8)");
    else
      static_assert(
          std::is_same_v<W, float> || (std::is_same_v<Recipe, bf16> && std::is_same_v<W, bf16_t>),
          "kfuse::depthwise_conv2d: weights must be float (or bf16_t for bf16)");
    check_depthwise(k, s);
    detail::check_buffer(k, "weights", oihw, s.weight_count());
    packed p;
    p.shape = s;
    const index_t C = s.c, taps = s.r * s.s;
    if constexpr (std::is_same_v<Layout, nhwc>) {
      p.cpad = (C + vec::lanes - 1) / vec::lanes * vec::lanes;
      p.w.assign(std::size_t(taps * p.cpad), 0.f);
      for (index_t c = 0; c < C; ++c)
        for (index_t t = 0; t < taps; ++t)
          p.w[std::size_t(t * p.cpad + c)] = weight_value(oihw[c * taps + t]);
    } else {
      p.cpad = C;
      p.w.resize(std::size_t(C * taps));
      for (index_t i = 0; i < C * taps; ++i) p.w[std::size_t(i)] = weight_value(oihw[i]);
    }
    return p;
  }

  /// out = epilogue(depthwise_conv(in, w)). In: float (f32), bf16_t (bf16), uint8_t or int8_t
  /// with zero point `in_zero_point` (i8). Out: a float type, or what the epilogue produces.
  /// The convenience form for direct callers: a workspace per call.
  template <class In, class Out>
  static run_info run(tensor_view<In, Layout> in, const packed& p, tensor_view<Out, Layout> out,
                      const Ep& ep = {}, const run_options& opt = {},
                      std::int32_t in_zero_point = 0) {
    conv_shape s = p.shape;
    s.n = in.dims.n, s.h = in.dims.h, s.w = in.dims.w;
    const workspace_buffer ws = p.empty() ? workspace_buffer{}
                                          : detail::own_workspace<depthwise_conv2d>(
                                                s, pool_threads(opt.threads, "depthwise_conv2d"));
    return run(in, p, out, ep, ws.view(), opt, in_zero_point);
  }

  /// Scratch from `ws` (workspace_size() of the shape with the input's N, H, W).
  template <class In, class Out>
  static run_info run(tensor_view<In, Layout> in, const packed& p, tensor_view<Out, Layout> out,
                      const Ep& ep, workspace ws, const run_options& opt = {},
                      std::int32_t in_zero_point = 0) {
    using T = std::remove_const_t<In>;
    constexpr std::string_view k = "depthwise_conv2d";
    static_assert(detail::dw_accepts<Recipe, T>,
                  "kfuse::depthwise_conv2d: the input's element type does not match the recipe "
                  "(f32: float, bf16: bf16_t, i8: uint8_t or int8_t)");
    using produced = typename epilogue_traits<Ep>::output_elem;
    static_assert(
        std::is_same_v<elem_of<Out>, std::conditional_t<std::is_void_v<produced>, f32, produced>> ||
            (std::is_void_v<produced> && elem_traits<elem_of<Out>>::is_float),
        "kfuse::depthwise_conv2d: the output type does not match what the epilogue "
        "produces (an int8 output needs the epilogue to end in requantize<E> or "
        "quantize<E> of that type)");
    if (p.empty()) detail::fail(k, "packed weights are empty");
    if constexpr (integer) {
      if (in_zero_point < std::numeric_limits<T>::min() ||
          in_zero_point > std::numeric_limits<T>::max())
        detail::fail(k, "input zero point " + std::to_string(in_zero_point) +
                            " is outside the input's element range");
    } else if (in_zero_point != 0) {
      detail::fail(k, "an input zero point is only meaningful for the i8 recipe");
    }
    if (in.dims.c != p.shape.c)
      detail::fail(k, "input has " + std::to_string(in.dims.c) + " channels, the packed weights " +
                          std::to_string(p.shape.c));
    conv_shape s = p.shape;
    s.n = in.dims.n;
    s.h = in.dims.h;
    s.w = in.dims.w;
    check_depthwise(k, s);
    const dims4 od = s.out_dims();
    if (!(out.dims == od))
      detail::fail(k, "output dims " + dims_text(out.dims) + " do not match the convolution's " +
                          dims_text(od));
    const index_t n_in = numel(s.in_dims()), n_out = numel(od);
    detail::check_buffer(k, "input", in.data, n_in);
    detail::check_buffer(k, "output", out.data, n_out);
    detail::check_disjoint(k, "input", in.data, n_in, out.data, n_out);
    validate(ep, k, n_out, s.k, out.data, sizeof(Out) * std::size_t(n_out), sizeof(Out));
    if (n_out == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};

    const detail::window_geom g = detail::window_geom_of(s);
    const float zp = float(in_zero_point);
    const T* x = in.data;
    const T* x_end = x + n_in;
    Out* y = out.data;
    const float* wp = p.w.data();
    const std::size_t slot = slot_bytes(s);
    const int threads =
        detail::workspace_threads(k, ws, slot, pool_threads(opt.threads, "depthwise_conv2d"));
    run_info info{k, A::name, simd::impl_name<A, B>(), "", 1};
    if constexpr (std::is_same_v<Layout, nhwc>) {
      const index_t rows = g.n * g.oh;
      // Channel groups (one thread, 5+ tap rows): where the input rows of one output row do
      // not fit in 24 KiB, the thread runs its rows a channel group at a time, so the 4 of 5
      // rows the next output row shares are still in L1. Measured (Zen 5, dwconv_bench): the
      // 5x5 layers of MobileNetV3 / EfficientNet-B0 5-25% faster on one thread; 3x3 ones (1 of
      // 3 rows shared at stride 2, the rest within the noise) and two threads (each thread's
      // rows become one chunk: a late helper leaves the caller twice the work) were not.
      const index_t row_bytes = g.r * g.w * g.c * index_t(sizeof(T));
      const index_t group_blocks = std::max<index_t>(
          1, (24 * 1024) / std::max<index_t>(1, g.r * g.w * 2 * vec::lanes * index_t(sizeof(T))));
      const index_t group = threads == 1 && g.r >= 5 && row_bytes > 24 * 1024 && g.oh > 1
                                ? group_blocks * 2 * vec::lanes
                                : g.c;
      const index_t grain = group < g.c ? rows : std::max<index_t>(1, rows / (4 * threads));
      info.threads = int(std::min<index_t>(threads, (rows + grain - 1) / grain));
      const index_t cpad = p.cpad;
      const int fast = fast_k(g);
      info.micro_kernel = nhwc_name(fast);
      parallel_for(
          0, rows, grain,
          [&](range rg, int) {
            // The range's rows with one row kernel (the switch once per range, not per row).
            const auto rows_with = [&]<int K, int St>() {
              for (index_t ca = 0; ca < g.c; ca += group) {
                const index_t cb = std::min(g.c, ca + group);
                for (index_t row = rg.begin; row < rg.end; ++row)
                  detail::dw_nhwc_row<vec, K, St>(x, wp, cpad, g, row / g.oh, row % g.oh, zp, y, ep,
                                                  ca, cb);
              }
            };
            switch (fast) {
              case 31:
                rows_with.template operator()<3, 1>();
                break;
              case 32:
                if constexpr (vec::lanes >= 16) rows_with.template operator()<3, 2>();
                break;
              case 51:
                if constexpr (vec::lanes >= 16) rows_with.template operator()<5, 1>();
                break;
              case 52:
                if constexpr (vec::lanes >= 16) rows_with.template operator()<5, 2>();
                break;
              default:
                rows_with.template operator()<0, 1>();
            }
          },
          threads);
    } else {
      const bool fast = is_3x3s1(g);
      info.micro_kernel = nchw_name(fast);
      // Blocks of output rows: whole planes when there are enough of them to share out.
      const index_t planes = g.n * g.c;
      constexpr index_t rh = detail::dw_nchw_config<vec::lanes>::rh;
      const index_t want = (4 * threads + planes - 1) / planes;
      const index_t max_blocks = std::max<index_t>(1, g.oh / rh);
      const index_t blocks = std::min(want, max_blocks);
      const index_t rows_per = (g.oh + blocks - 1) / blocks;
      const index_t units = planes * blocks;
      info.threads = int(std::min<index_t>(threads, units));
      parallel_for(
          0, units, 1,
          [&](range rg, int worker) {
            float* sc = ws.slot<float>(worker, slot);
            for (index_t u = rg.begin; u < rg.end; ++u) {
              const index_t plane = u / blocks, b = u % blocks;
              const index_t oh_a = b * rows_per, oh_b = std::min(g.oh, oh_a + rows_per);
              if (oh_a >= oh_b) continue;
              const index_t n = plane / g.c, c = plane % g.c;
              if (fast)
                detail::dw_nchw_block<vec, true>(x, x_end, wp, g, n, c, oh_a, oh_b, zp, sc, y, ep);
              else
                detail::dw_nchw_block<vec, false>(x, x_end, wp, g, n, c, oh_a, oh_b, zp, sc, y, ep);
            }
          },
          threads);
    }
    return info;
  }

  /// "nhwc 3x3s1 7x2v", "nhwc 5x5s2 7x2v"... (row tiles: fast = 10 * K + stride) or "nhwc
  /// direct 6x2v": pixels x channel vectors.
  static const char* nhwc_name(int fast) {
    using cfg = detail::dw_nhwc_config<vec::lanes>;
    auto name = [](int f) {  // appends only: g++ 12 -O3 warns falsely on "..." + std::string
      std::string r = "nhwc ";
      if (f == 0) {
        r.append("direct ").append(std::to_string(cfg::pw));
      } else {
        const std::string k = std::to_string(f / 10);
        r.append(k).append("x").append(k).append("s").append(std::to_string(f % 10));
        r.append(" ").append(std::to_string(cfg::pw_rows));
      }
      return r.append("x").append(std::to_string(cfg::cv)).append("v");
    };
    static const std::string names[] = {name(0), name(31), name(32), name(51), name(52)};
    return names[fast == 0 ? 0 : (fast / 10 - 3) + fast % 10].c_str();
  }
  /// 10 * K + stride for the row tiles (square K, dilation 1, at least one vector of
  /// channels): 31, 32, 51, 52; 0 otherwise. With 32 vector registers (AVX-512) 3x3 and 5x5 at
  /// stride 1 and 2 (measured); with 16 only 3x3 stride 1, as before them (5x5's 10 weight
  /// vectors and the accumulators would spill). Each is an instantiation per epilogue: compile
  /// time.
  static int fast_k(const detail::window_geom& g) {
    if (g.r != g.s || g.sh != g.sw || g.dh != 1 || g.dw != 1 || g.c < vec::lanes) return 0;
    if constexpr (vec::lanes >= 16)
      return (g.r == 3 || g.r == 5) && (g.sh == 1 || g.sh == 2) ? int(10 * g.r + g.sh) : 0;
    return g.r == 3 && g.sh == 1 ? 31 : 0;
  }
  /// NCHW's fast path (any channel count).
  static bool is_3x3s1(const detail::window_geom& g) {
    return g.r == 3 && g.s == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
  }
  /// "nchw 3x3s1 4x2v" (fast path) or "nchw direct 4x2v": rows x pixel vectors.
  static const char* nchw_name(bool fast) {
    using cfg = detail::dw_nchw_config<vec::lanes>;
    const std::string tile = std::to_string(cfg::rh) + "x" + std::to_string(cfg::wv) + "v";
    static const std::string fast_name = "nchw 3x3s1 " + tile, direct = "nchw direct " + tile;
    return fast ? fast_name.c_str() : direct.c_str();
  }

 private:
  /// One thread's scratch: NCHW only.
  static std::size_t slot_bytes(const conv_shape& s) {
    if (!std::is_same_v<Layout, nchw> || s.n <= 0 || s.c <= 0 || s.out_h() <= 0 || s.out_w() <= 0)
      return 0;
    return workspace_round(sizeof(float) *
                           detail::dw_slot_floats<vec::lanes>(detail::window_geom_of(s)));
  }
  /// A weight as the kernel holds it: bf16 weights are rounded to bf16 (nearest even), as every
  /// bf16 kernel does on every arch, so the products with the bf16 activations are exact in f32.
  template <class W>
  static float weight_value(W v) {
    if constexpr (std::is_integral_v<W>)
      return float(v);
    else if constexpr (std::is_same_v<Recipe, bf16>)
      return to_float(to_bf16(to_float(v)));
    else
      return to_float(v);
  }
  static std::string dims_text(const dims4& d) {
    return "(N " + std::to_string(d.n) + ", C " + std::to_string(d.c) + ", H " +
           std::to_string(d.h) + ", W " + std::to_string(d.w) + ")";
  }
  static void check_depthwise(std::string_view k, const conv_shape& s) {
    detail::check_conv_shape(k, s);
    if (!(s.groups == s.c && s.k == s.c))
      detail::fail(k, "not a depthwise shape: groups (" + std::to_string(s.groups) +
                          ") and output channels K (" + std::to_string(s.k) +
                          ") must both equal the input channels C (" + std::to_string(s.c) +
                          ") (channel multiplier 1)");
  }
};

KFUSE_END_NAMESPACE
