#pragma once
// conv2d lowered as a dense or grouped convolution: kfuse::conv2d (1x1 as GEMM, implicit GEMM,
// NCHW channel rows, Winograd), small groups merged into block-diagonal ones.
#include "kfuse/graph/ops/conv2d_common.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct conv2d_dense_lowering : conv2d_common {
  /// How many groups of a grouped NHWC conv run as one (block-diagonal weights): the NHWC tiles
  /// vectorize over a group's output channels, so a group of fewer than a vector's `lanes`
  /// (ResNeXt's 4, RegNet's 8) leaves lanes idle and pays a tile's setup per group for a few
  /// FMAs; merged groups fill the vector for the zero products they add. A 128-channel 3x3
  /// conv of 32 groups at 56x56 ran 4.7x faster as 8 groups, one of 256 channels and 32 groups
  /// at 28x28 1.7x faster as 16 (AVX-512, f32). The largest divisor of the groups whose merged
  /// output channels still fit one vector.
  static index_t merged_groups(const conv_shape& cs, int lanes) {
    const index_t kg = cs.k / cs.groups;
    if (cs.groups < 2 || cs.is_depthwise() || 2 * kg > lanes) return 1;
    index_t best = 1;
    for (index_t m = 2; m <= cs.groups && m * kg <= lanes; ++m)
      if (cs.groups % m == 0) best = m;
    return best;
  }
  /// OIHW weights [K, C / groups, R, S] of conv cs as those of cs with `merge` groups run as one:
  /// [K, merge * C / groups, R, S], each output channel's own group's inputs in place, zero
  /// elsewhere.
  static std::vector<float> block_diagonal(const std::vector<float>& w, const conv_shape& cs,
                                           index_t merge) {
    const index_t cg = cs.c / cs.groups, kg = cs.k / cs.groups, rs = cs.r * cs.s;
    std::vector<float> m(std::size_t(cs.k * merge * cg * rs), 0.f);
    for (index_t k = 0; k < cs.k; ++k) {
      const index_t sub = (k / kg) % merge;  // the group's place in its merged group
      std::copy_n(w.begin() + std::ptrdiff_t(k * cg * rs), cg * rs,
                  m.begin() + std::ptrdiff_t((k * merge + sub) * cg * rs));
    }
    return m;
  }

  template <class Recipe, class L, class A, class B, class Out = float>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds,
                    const conv_shape& useful, std::string_view recipe) {
    if constexpr (!gemm_available<Recipe, A, B>()) {
      cx.fail_node(n, gemm_missing<Recipe, A>(recipe, "conv2d"));
    } else {
      using K = conv2d<Recipe, L, A, chain_epilogue_t<Out>, B>;
      auto p = std::make_shared<kernel_params<K>>();
      p->out_q = cx.out_quant_params(s);
      std::vector<detail::op_stage> chain;
      std::vector<float> w = weights(cx, s, useful, chain);
      conv_shape cs = useful;
      index_t merge = std::is_same_v<L, nhwc> ? merged_groups(cs, K::L) : 1;
      // f32: groups of one vector of outputs (merged or not) run up to NV at a time as the
      // diagonal blocks of one group (conv_shape::diagonal), whose tiles skip the zero blocks.
      conv_shape merged = cs;
      merged.groups /= merge;
      const conv_shape diag = K::with_diagonal(merged);
      const index_t diagonal = diag.diagonal, phantom = diag.phantom_blocks * merge;
      if (phantom > 0) {  // zero groups after the last one (their weights: zero output rows)
        const index_t cg = cs.c / cs.groups, kg = cs.k / cs.groups;
        w.resize(w.size() + std::size_t(phantom * kg * cg * cs.r * cs.s), 0.f);
        cs.c += phantom * cg;
        cs.k += phantom * kg;
        cs.groups += phantom;
      }
      const index_t block_groups = merge;  // groups merged into each diagonal block
      merge *= diagonal;
      if (merge > 1) {
        w = block_diagonal(w, cs, merge);
        cs.groups /= merge;
        cs.diagonal = diagonal;
        cs.phantom_blocks = diag.phantom_blocks;
        cs.block_groups = block_groups;
      }
      const plan_tensor& x = cx.T(s.x);
      detail::plan_command c;
      c.in[0] = s.x;
      if constexpr (std::is_same_v<Recipe, i8>) {
        // int8 as for linear: u8 activations (the input's quant params), i8 weights per output
        // channel, the dequantization scale first in the chain.
        const tensor_quant q = int8_input_quant(cx, n, x);
        std::vector<float> deq = pack_int8<K>(cx, n, w, cs, q, p->packed);
        p->in_zero_point = q.zero_point;
        if (x.type != dtype::u8) c.in[0] = convert_input<A, B>(cx, s, n, dtype::u8, q, cmds);
        chain.insert(chain.begin(), {stage_kind::mul, 0, 0,
                                     cx.new_constant(n.name + ".dequant", {cs.k}, deq), true});
      } else {
        p->packed = K::pack(w.data(), cs, -1,
                            cx.opt.winograd ? conv_algorithm::automatic : conv_algorithm::direct);
        if (std::is_same_v<Recipe, bf16> && x.type != dtype::bf16)
          c.in[0] = convert_input<A, B>(cx, s, n, dtype::bf16, {}, cmds);
      }
      cx.need_operand_room(n, chain);
      p->in = cs.in_dims();
      p->out = cs.out_dims();
      c.out = s.out;
      p->stages = cx.make_chain(chain, c, 1);
      info.flops = useful.flops();
      // The real weights: the diagonal and narrow tiles skip the zeros of a merged pack.
      info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) +
                   double(useful.weight_count()) * double(sizeof(typename K::weight_storage));
      const bool wino = p->packed.path_ == detail::conv_path::winograd;
      info.kernel =
          "conv2d " + std::string(recipe) + " " + std::string(L::name) + (wino ? " winograd" : "") +
          (merge > 1
               ? " groups " + std::to_string(useful.groups) + " as " + std::to_string(cs.groups) +
                     (diagonal > 1 ? "x" + std::to_string(diagonal) : "") +
                     (K::narrow_tiles(cs) ? "x" + std::to_string(block_groups) : "")
               : "") +
          cx.chain_suffix(s, chain);
      add_kernel_command<K, conv_input_t<Recipe>, Out>(cx, p, cs, c, info, cmds);
    }
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
