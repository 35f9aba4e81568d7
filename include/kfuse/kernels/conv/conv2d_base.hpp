#pragma once
// What every part of conv2d (kernels/conv/conv2d.hpp) shares: the recipe's types, the tile
// constants, the predicates that choose a shape's path and the weight packing that fixes it.
// The paths' bodies build on it (conv2d_nchw.hpp, conv2d_nhwc.hpp) and conv2d on them.
#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "kfuse/detail/checks.hpp"
#include "kfuse/kernels/conv/conv2d_tiles_nchw.hpp"
#include "kfuse/kernels/conv/conv2d_tiles_nhwc.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/conv/conv_weights.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"
#include "kfuse/kernels/conv/winograd.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/kernel_contract.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The micro-kernel set of a recipe on arch A with vectors V (the GEMM's), plus what the NCHW
/// path broadcasts: float / bf16 weights, or int8 weights shifted to u8 (w + mk::weight_shift).
template <class Recipe, class A, class V>
struct conv_kernels {
  using select = select_microkernel<Recipe, A, V>;
  using mk = typename select::type;
  using storage = typename mk::storage;
  static constexpr bool integer = mk::integer;
  using row_weight = std::conditional_t<integer, std::uint8_t, typename select::a_storage>;
};

template <class Elem, class Layout, class A, class Ep, class B>
struct conv2d_base : image_kernel_types<Layout, Ep> {
  static_assert(std::is_same_v<Elem, f32> || std::is_same_v<Elem, bf16> || std::is_same_v<Elem, i8>,
                "kfuse::conv2d: the recipe must be f32, bf16 or i8");
  static_assert(layout_tag<Layout>, "kfuse::conv2d: the layout must be kfuse::nchw or kfuse::nhwc");
  using recipe = Elem;
  using layout_type = Layout;
  using arch_type = A;
  using epilogue_type = Ep;
  using backend_type = B;
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

  /// Block-diagonal groups (conv_shape::diagonal) whose blocks are one vector of output channels
  /// each run as diagonal tiles (detail::nhwc_diagonal_tile): f32 NHWC, 2 or NV blocks per
  /// group (each other count would be two more tile bodies in every f32 conv's build).
  static constexpr bool diagonal_tiles(const conv_shape& s) {
    return is_nhwc && std::is_same_v<Elem, f32> && NV >= 2 && NV <= 4 &&
           (s.diagonal == 2 || s.diagonal == NV) && s.k / s.groups == s.diagonal * L;
  }
  /// Diagonal blocks of L input channels that hold block_groups groups of w = L / block_groups
  /// channels each (conv_shape::block_groups; as many outputs as inputs per group) run as
  /// narrow tiles: each lane multiplies its own group's w channels only, from a second panel
  /// packed after the block-diagonal one (detail::narrow_tile). x86 AVX2 and AVX-512 (a
  /// permute per input vector); a 4-channel group at 16 lanes did 4x the FMAs otherwise.
  static constexpr bool narrow_tiles(const conv_shape& s) {
    if constexpr (requires { requires vec::impl::has_group_broadcast; }) {
      const index_t cs = s.c / s.groups / s.diagonal;
      return diagonal_tiles(s) && s.block_groups > 1 && cs == L && s.c == s.k &&
             cs / s.block_groups >= 2;
    } else {
      return false;
    }
  }
  /// Channels of one group of a narrow tile's blocks (0: not narrow).
  static constexpr index_t narrow_width(const conv_shape& s) {
    return narrow_tiles(s) ? L / s.block_groups : 0;
  }
  /// True when this shape runs as one GEMM [N*H*W, C] x [C, K] (NHWC only).
  static constexpr bool gemm_shape(const conv_shape& s) { return is_nhwc && s.is_pointwise(); }

  /// f32 NCHW reads its pixel operand from padded input bands (no panel); bf16 and int8 build
  /// panels in the k-grouped order their dot-product instructions want.
  static constexpr bool band_path = !is_nhwc && std::is_same_v<Elem, f32>;

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

  /// A block-diagonal shape's weights (conv_shape::diagonal, block_groups) are zero outside
  /// each output channel's block and group: the diagonal and narrow tiles never read them, the
  /// other tiles do, so a nonzero one would give two answers.
  template <class Src>
  static void check_block_zeros(std::string_view k, const Src* oihw, const conv_shape& s) {
    const index_t cg = s.c / s.groups, kg = s.k / s.groups, rs = s.r * s.s;
    const index_t cb = cg / s.diagonal, kb = kg / s.diagonal;
    const index_t cw = cb / s.block_groups, kw = kb / s.block_groups;
    for (index_t o = 0; o < s.k; ++o) {
      const index_t ol = o % kg, block = ol / kb, group = ol % kb / kw;  // o's, within its group
      for (index_t c = 0; c < cg; ++c) {
        if (c / cb == block && c % cb / cw == group) continue;
        for (index_t t = 0; t < rs; ++t)
          if (to_float(oihw[(o * cg + c) * rs + t]) != 0.f)
            detail::fail(k, "weight (output " + std::to_string(o) + ", input " + std::to_string(c) +
                                ") is outside its block (" + std::to_string(s.diagonal) +
                                " diagonal blocks of " + std::to_string(s.block_groups) +
                                " groups each) but not zero");
      }
    }
  }

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
    if (s.phantom_blocks > 0 && !diagonal_tiles(s))
      detail::fail(k, "phantom blocks run on the diagonal tiles only (NHWC f32, 2 or " +
                          std::to_string(NV) + " diagonal blocks of " + std::to_string(L) +
                          " output channels per group)");
    if (count >= 0 && count != s.weight_count())
      detail::fail(k, "wrong weight count: " + std::to_string(count) +
                          " values given, the shape needs K * C/groups * R * S = " +
                          std::to_string(s.weight_count()));
    detail::check_buffer(k, "weights", oihw, s.weight_count());
    if (s.diagonal > 1 || s.block_groups > 1) check_block_zeros(k, oihw, s);
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
      const index_t blk = rs * w.cgp_ * NR, nw = narrow_width(s);
      w.data_ = detail::aligned_array<weight_storage>(
          std::size_t(s.groups * w.kblocks_ * (blk + rs * nw * NR)));
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
      // The narrow tiles' panel ([group][K block][tap][channel i of a group][NR]): lane l of
      // block j holds the weight of its group's channel i, input (j, (l / nw) * nw + i).
      for (index_t g = 0; g < s.groups && nw > 0; ++g)
        for (index_t kb = 0; kb < w.kblocks_; ++kb)
          for (index_t t = 0; t < rs; ++t)
            for (index_t i = 0; i < nw; ++i)
              for (int j = 0; j < NR; ++j) {
                const index_t kl = kb * NR + j, c = kl / L * L + kl % L / nw * nw + i;
                const float v = kl < kg ? to_float(oihw[((g * kg + kl) * cg + c) * rs + t]) : 0.f;
                *o++ = from_float<weight_storage>(v);
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
};

}  // namespace detail

KFUSE_END_NAMESPACE
