#pragma once
// conv2d: dense, grouped (1x1 through GEMM) and depthwise (groups == C == K) convolution as a
// graph op. Weights packed at compile time, with a following batch norm folded in
// (kfuse::fold_batch_norm) and int8 weights quantized per output channel; any fused stage chain
// (bias, activation, residual add, int8 dequantization scales, and a fused quantize of the
// output) in the epilogue.
#include "kfuse/graph/ops/cast.hpp"
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/linear.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/conv/conv2d.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"
#include "kfuse/kernels/conv/few_channel_conv2d.hpp"
#include "kfuse/kernels/conv/fold_batch_norm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// The activations' storage type of a conv recipe (int8 plans feed u8).
template <class Recipe>
using conv_input_t =
    std::conditional_t<std::is_same_v<Recipe, i8>, std::uint8_t, storage_t<Recipe>>;

/// A gated conv's parameters: the kernel's, the gate's stride between samples and (int8) the
/// quantization of the gated input.
template <class K>
struct gated_conv_params : kernel_params<K> {
  index_t gate_stride = 0;
  float in_scale = 1.f;
  std::vector<float> dequant;  // int8: per output channel (a stage of its own, not an operand)
};

/// The epilogue of a gated conv writing Out: the chain (f32, bf16); int8 dequantizes first,
/// with the scales in its parameters, so that the gate, a bias and a residual keep the three
/// operand slots; a u8 output quantizes last.
template <class Recipe, class Out>
using gated_epilogue_t = std::conditional_t<
    !std::is_same_v<Recipe, i8>, chain_epilogue_t<Out>,
    std::conditional_t<std::is_same_v<Out, std::uint8_t>, epilogue<dequantize, chain, quantize<u8>>,
                       epilogue<dequantize, chain>>>;

/// The replay command of a gated conv: K::run_gated with the gate in c.in[3] (the chain's
/// operands, at most two, before it). int8 reads f32 and quantizes it as it loads.
template <class K, class TX, class Out>
void gated_conv_cmd(const command& c) {
  const auto& p = *static_cast<const gated_conv_params<K>*>(c.params);
  const auto* gate = static_cast<const float*>(c.in[chain_max_operands]);
  const auto x = view<nhwc>(static_cast<const TX*>(c.in[0]), p.in);
  const auto y = view<nhwc>(static_cast<Out*>(c.out), p.out);
  const chain ch = command_chain(c, p.stages);
  if constexpr (K::integer) {
    const dequantize dq{quant_params{1.f, 0, p.dequant, {}}};
    using Ep = typename K::epilogue_type;
    const Ep ep = [&] {
      if constexpr (std::is_same_v<Out, std::uint8_t>)
        return Ep{dq, ch, quantize<u8>{p.out_q}};
      else
        return Ep{dq, ch};
    }();
    K::run_gated(x, gate, p.gate_stride, p.in_scale, p.in_zero_point, p.packed, y, ep,
                 command_workspace(c), run_options{c.threads});
  } else {
    K::run_gated(x, gate, p.gate_stride, p.packed, y, epilogue<chain>{ch}, command_workspace(c),
                 run_options{c.threads});
  }
}

/// The replay command of a stem conv reading NCHW and writing NHWC (passes/entry_layout.hpp):
/// kernel_cmd's, with a view of each layout; Out is f32, or bf16 for a bf16 plan's reader.
template <class K, class Out>
void few_channel_cmd(const command& c) {
  const auto& p = *static_cast<const kernel_params<K>*>(c.params);
  K::run(view<nchw>(static_cast<const float*>(c.in[0]), p.in), p.packed,
         view<nhwc>(static_cast<Out*>(c.out), p.out), epilogue<chain>{command_chain(c, p.stages)},
         command_workspace(c), run_options{c.threads});
}

struct conv2d_rule : op_rule {
  static constexpr op_kind kind = op_kind::conv2d;
  static constexpr bool by_precision = true;
  static constexpr bool absorbs_chain = true;
  static constexpr bool folds_batch_norm = true;
  static bool optional_slot(std::size_t slot) { return slot == 2; }

  static conv_shape shape_of(const plan_tensor& x, const plan_tensor& w, const conv2d_params& p) {
    conv_shape cs;
    cs.n = x.shape[0];
    cs.c = x.shape[1];
    cs.h = x.shape[2];
    cs.w = x.shape[3];
    cs.k = w.shape[0];
    cs.r = w.shape[2];
    cs.s = w.shape[3];
    cs.stride_h = p.stride_h;
    cs.stride_w = p.stride_w;
    cs.pad_top = p.pad_top;
    cs.pad_left = p.pad_left;
    cs.pad_bottom = p.pad_bottom;
    cs.pad_right = p.pad_right;
    cs.dilation_h = p.dilation_h;
    cs.dilation_w = p.dilation_w;
    cs.groups = p.groups;
    return cs;
  }
  static conv_shape shape_of(const detail::compile_context& cx, const detail::step& s) {
    return shape_of(cx.T(s.x), cx.T(s.others[0]), cx.node_of(s).conv);
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    cx.need_input_of_precision(n, x);
    cx.need_image(n, x);
    const plan_tensor& w = cx.need_float_weight(n, 4, "OIHW [K, C / groups, R, S]");
    const conv2d_params& cp = n.conv;
    const conv_shape cs = shape_of(x, w, cp);
    if (cp.groups >= 1 && x.shape[1] % cp.groups == 0 && w.shape[1] * cp.groups != x.shape[1])
      cx.fail_node(n, "input has " + std::to_string(x.shape[1]) + " channels, weights expect " +
                          std::to_string(w.shape[1] * cp.groups) + " (" +
                          std::to_string(w.shape[1]) + " per group x " + std::to_string(cp.groups) +
                          " groups)");
    cx.check_for_node(n, "conv2d", [&] { detail::check_conv_shape("conv2d", cs); });
    cx.need_bias(n, cs.k, "output channels");
    cx.set_out(n, {cs.n, cs.k, cs.out_h(), cs.out_w()}, dtype::f32, x.layout);
  }

  static void build_step(detail::compile_context& cx, const node_desc& n, detail::step& s) {
    linear_rule::build_step(cx, n, s);
  }

  /// u8 output from a dense / grouped conv of the int8 recipe; bf16 output from a bf16 NHWC conv,
  /// a low-precision plan's stem and an int8 dense NHWC conv (for an int8_bf16_nhwc depthwise).
  /// Each further instantiation would add seconds to every TU that compiles plans (depthwise:
  /// ~8 s per layout, f32 dense conv ~3 s per layout; docs/executor.md): those keep the
  /// separate quantize pass.
  static bool writes_quantized(const detail::compile_context& cx, const detail::step& p, dtype to) {
    return to == dtype::bf16 ? (bf16_nhwc_kernel(cx, p) || bf16_plan_stem(cx, p) ||
                                (int8_bf16_nhwc(cx, p) && !shape_of(cx, p).is_depthwise())) &&
                                   p.gate < 0
                             : to == dtype::u8 && reads_quantized(cx, p);
  }
  /// A bf16 plan's stem that runs as few_channel_conv2d (f32 arithmetic, NCHW in, NHWC out):
  /// it writes bf16 for a bf16 reader, which then needs no conversion pass of its own
  /// (MobileNetV3's first depthwise converted the stem's 0.8 MB f32 output at batch 1).
  static bool bf16_plan_stem(const detail::compile_context& cx, const detail::step& c) {
    const precision pr = cx.precision_of(cx.node_of(c));
    return (pr == precision::bf16 || (pr == precision::int8 && cx.int8_bf16_outputs)) &&
           cx.T(c.x).layout == tensor_layout::nchw && cx.T(c.x).type == dtype::f32 &&
           cx.T(c.out).layout == tensor_layout::nhwc && detail::few_channel_shape(shape_of(cx, c));
  }
  /// A bf16 plan's dense or depthwise NHWC conv: its kernel reads bf16 (an f32 input is
  /// converted first) and can write bf16 (a gated one writes f32). Not a conv that runs as f32
  /// Winograd there (it reads f32: a bf16 input would push it onto the slower bf16 direct
  /// path).
  static bool bf16_nhwc_kernel(const detail::compile_context& cx, const detail::step& c) {
    if (cx.precision_of(cx.node_of(c)) != precision::bf16 || !nhwc_in_out(cx, c)) return false;
    const conv_shape cs = shape_of(cx, c);
    return cs.is_depthwise() || !(cx.opt.winograd && detail::winograd_pays(cs));
  }
  static bool reads_bf16(const detail::compile_context& cx, const detail::step& c) {
    return bf16_nhwc_kernel(cx, c) || (int8_bf16_nhwc(cx, c) && shape_of(cx, c).is_depthwise());
  }
  static bool nhwc_in_out(const detail::compile_context& cx, const detail::step& c) {
    return cx.T(c.x).layout == tensor_layout::nhwc && cx.T(c.out).layout == tensor_layout::nhwc;
  }
  /// An int8 plan's NHWC conv on an arch whose int8 convs can write bf16 (int8_bf16_outputs): a
  /// depthwise one reads bf16 and runs as the bf16 depthwise when its producer (an int8 dense
  /// conv, the stem) writes bf16, else in f32; a dense one can write bf16 for it. The f32 tensor
  /// between them was the largest of the plan (MobileNetV3's and EfficientNet's expanded maps):
  /// bf16 halves its writes and reads, and int8 arithmetic would not pay in a memory-bound
  /// depthwise.
  static bool int8_bf16_nhwc(const detail::compile_context& cx, const detail::step& c) {
    return cx.int8_bf16_outputs && cx.precision_of(cx.node_of(c)) == precision::int8 &&
           nhwc_in_out(cx, c);
  }
  static bool reads_quantized(const detail::compile_context& cx, const detail::step& c) {
    return cx.int8_gemm && cx.precision_of(cx.node_of(c)) == precision::int8 &&
           !shape_of(cx, c).is_depthwise();
  }

  /// The lowerings a conv step can take: each instantiates its own kernels, so kfuse::runtime
  /// builds each in an object of its own (src/runtime/ops/conv2d_*.cpp).
  enum class part {
    depthwise,
    gated,
    few_channel,
    dense_f32,
    dense_bf16,          // nhwc
    dense_bf16_to_bf16,  // nhwc, bf16 output (read as bf16 by the consumer)
    dense_bf16_nchw,
    dense_i8,          // nhwc
    dense_i8_to_u8,    // nhwc, the quantization of the output fused
    dense_i8_to_bf16,  // nhwc, bf16 output (read as bf16 by a depthwise)
    dense_i8_nchw
  };

  template <class A, class B, class Set = detail::all_ops>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const precision pr = cx.precision_of(n);
    if (!Set::runs_in(pr)) fail_precision<Set>(cx, n, pr);
    const bool cl = cx.T(s.x).layout == tensor_layout::nhwc;
    const conv_shape cs = shape_of(cx, s);
    if (pr == precision::bf16 && cl && !cs.is_depthwise() && s.gate < 0 && cx.opt.winograd &&
        cx.T(s.x).type == dtype::f32 && detail::winograd_pays(cs) &&
        !gemm<bf16, A, epilogue<>, B>::amx_active()) {
      // Winograd's 3-4x fewer multiply-adds beat bf16's 2x dot product rate (docs/conv.md),
      // not AMX tiles' ~14x.
      cx.note_once(
          "bf16: 3x3 stride-1 convs where Winograd pays run as f32 Winograd F(4x4, 3x3), "
          "faster than bf16's direct conv and more accurate (compile_options::winograd = "
          "false keeps them bf16)");
      return lower_part<part::dense_f32, A, B, Set>(cx, s, n, info, cmds);
    }
    const bool bf16_out = cx.T(s.out).type == dtype::bf16;
    const part p = cs.is_depthwise()                                  ? part::depthwise
                   : s.gate >= 0                                      ? part::gated
                   : !cl && cx.T(s.out).layout == tensor_layout::nhwc ? part::few_channel
                   : pr == precision::bf16 ? (bf16_out ? part::dense_bf16_to_bf16
                                              : cl     ? part::dense_bf16
                                                       : part::dense_bf16_nchw)
                   : pr == precision::int8
                       ? (!cl                                     ? part::dense_i8_nchw
                          : bf16_out && int8_bf16_outputs<A, B>() ? part::dense_i8_to_bf16
                          : cx.T(s.out).type == dtype::u8         ? part::dense_i8_to_u8
                                                                  : part::dense_i8)
                       : part::dense_f32;
    switch (p) {
#define KFUSE_CONV_PART(name)                                         \
  case part::name:                                                    \
    if constexpr (part_runs_in<Set>(part::name))                      \
      return lower_part<part::name, A, B, Set>(cx, s, n, info, cmds); \
    break;
      KFUSE_CONV_PART(depthwise)
      KFUSE_CONV_PART(gated)
      KFUSE_CONV_PART(few_channel)
      KFUSE_CONV_PART(dense_f32)
      KFUSE_CONV_PART(dense_bf16)
      KFUSE_CONV_PART(dense_bf16_to_bf16)
      KFUSE_CONV_PART(dense_bf16_nchw)
      KFUSE_CONV_PART(dense_i8)
      KFUSE_CONV_PART(dense_i8_to_u8)
      KFUSE_CONV_PART(dense_i8_to_bf16)
      KFUSE_CONV_PART(dense_i8_nchw)
#undef KFUSE_CONV_PART
    }
    fail_precision<Set>(cx, n, part_precision(p));
  }

  /// The precision whose kernels a part instantiates (dense_f32 also runs bf16 plans' Winograd
  /// convs; the depthwise, gated and stem parts take every precision, each branch guarded).
  static constexpr precision part_precision(part p) {
    switch (p) {
      case part::dense_bf16:
      case part::dense_bf16_to_bf16:
      case part::dense_bf16_nchw:
        return precision::bf16;
      case part::dense_i8:
      case part::dense_i8_to_u8:
      case part::dense_i8_to_bf16:
      case part::dense_i8_nchw:
        return precision::int8;
      default:
        return precision::f32;
    }
  }
  template <class Set>
  static constexpr bool part_runs_in(part p) {
    return p == part::depthwise || p == part::gated || p == part::few_channel ||
           (p == part::dense_f32 ? Set::runs_in(precision::f32) || Set::runs_in(precision::bf16)
                                 : Set::runs_in(part_precision(p)));
  }

  /// One part's lowering (defined below the class: not inline, so that kfuse::runtime can build
  /// each part in its own object and declare the others extern).
  template <part P, class A, class B, class Set = detail::all_ops>
  static void lower_part(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                         step_info& info, std::vector<detail::plan_command>& cmds);

  /// f32 OIHW weights of a conv step and its chain, with a folded batch norm applied: the
  /// chain's leading bias stage (when it came before the batch norm) becomes the folded bias.
  static std::vector<float> weights(detail::compile_context& cx, const detail::step& s,
                                    const conv_shape& cs, std::vector<detail::op_stage>& chain) {
    std::vector<float> w = cx.constant_f32(s.others[0]);
    chain = s.chain;
    if (s.folded_bn < 0) return w;
    const node_desc& bn = cx.g.nodes()[std::size_t(s.folded_bn)];
    const auto mean = cx.constant_f32(bn.inputs[1].index),
               var = cx.constant_f32(bn.inputs[2].index),
               gamma = cx.constant_f32(bn.inputs[3].index),
               beta = cx.constant_f32(bn.inputs[4].index);
    // Only a bias that came before the batch norm is folded through it; a bias fused after it
    // stays in the chain, after the folded one.
    std::vector<float> b = s.bn_after_bias ? cx.constant_f32(chain[0].operand)
                                           : std::vector<float>(std::size_t(cs.k), 0.f);
    cx.for_node(bn, [&] { fold_batch_norm(cs, w, b, {mean, var, gamma, beta, bn.eps}); });
    const detail::op_stage folded{
        stage_kind::bias, 0, 0,
        cx.new_constant(cx.node_of(s).name + ".folded_bias", {cs.k}, std::move(b)), true};
    if (s.bn_after_bias)
      chain[0] = folded;
    else
      chain.insert(chain.begin(), folded);
    return w;
  }

  /// int8 weights of conv kernel K: quantized per output channel into `packed`; returns the
  /// dequantization scales (weight scale x the input's scale) per output channel.
  template <class K>
  static std::vector<float> pack_int8(detail::compile_context& cx, const node_desc& n,
                                      const std::vector<float>& w, const conv_shape& cs,
                                      const tensor_quant& q, typename K::weights& packed) {
    const int8_weights wq = cx.for_node(
        n, [&] { return quantize_weights_per_row(w, cs.k, std::min(127, K::int8_weight_limit)); });
    std::vector<float> deq(wq.scales);
    for (float& d : deq) d *= q.scale;
    packed = K::initialize(cs, wq.values.data());
    return deq;
  }

  /// A pointwise NHWC conv with a channel gate (passes/channel_gate.hpp): the gate in the
  /// command's last input slot, the chain's operands before it. bf16 reads bf16 (an f32 input
  /// converted first) and writes f32; int8 reads the f32 input, quantizing the gated values with
  /// the quant params of the multiply's output (s.gated_in) as it loads them, and writes f32 or
  /// u8.
  template <class Recipe, class A, class B, class Out = float>
  static void lower_gated(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                          step_info& info, std::vector<detail::plan_command>& cmds,
                          const conv_shape& cs, const char* recipe) {
    if constexpr (!gemm_available<Recipe, A, B>()) {
      cx.fail_node(n,
                   std::string(recipe) + " conv2d has no kernel on arch " + std::string(A::name));
    } else {
      using K = conv2d<Recipe, nhwc, A, gated_epilogue_t<Recipe, Out>, B>;
      constexpr bool int8 = std::is_same_v<Recipe, i8>;
      auto p = std::make_shared<gated_conv_params<K>>();
      std::vector<detail::op_stage> chain;
      const std::vector<float> w = weights(cx, s, cs, chain);
      detail::plan_command c;
      c.in[0] = s.x;
      if constexpr (int8) {
        const tensor_quant q = int8_input_quant(cx, n, cx.T(s.gated_in));
        p->dequant = pack_int8<K>(cx, n, w, cs, q, p->packed);
        p->in_scale = q.scale;
        p->in_zero_point = q.zero_point;
        p->out_q = cx.out_quant_params(s);
      } else {
        p->packed = K::pack(w.data(), cs);
        if (std::is_same_v<Recipe, bf16> && cx.T(s.x).type != dtype::bf16)
          c.in[0] = convert_input<A, B>(cx, s, n, dtype::bf16, {}, cmds);
      }
      if (detail::operand_count(chain) > chain_max_operands - 1)
        cx.fail_node(n, "too many fused operands next to a channel gate");
      p->in = cs.in_dims();
      p->out = cs.out_dims();
      c.out = s.out;
      p->stages = cx.make_chain(chain, c, 1);
      c.in[chain_max_operands] = s.gate;
      p->gate_stride = shape_numel(cx.T(s.gate).shape) == cs.c ? 0 : cs.c;
      info.flops = cs.flops();
      info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) +
                   double(sizeof(typename K::weight_storage)) * double(w.size());
      info.kernel = "conv2d " + std::string(recipe) + " nhwc gated" + cx.chain_suffix(s, chain);
      c.fn = &gated_conv_cmd<K, std::conditional_t<int8, float, conv_input_t<Recipe>>, Out>;
      c.threads = cx.threads_for(info.bytes, info.flops);
      c.workspace_bytes = K::gated_workspace_size(p->packed, c.threads);
      c.params = cx.own(p);
      cmds.push_back(c);
    }
  }

  template <class A, class B, class Out>
  static void lower_few_channel(detail::compile_context& cx, const detail::step& s,
                                const node_desc& n, step_info& info,
                                std::vector<detail::plan_command>& cmds, const conv_shape& cs) {
    using K = few_channel_conv2d<A, epilogue<chain>, B>;
    auto p = std::make_shared<kernel_params<K>>();
    std::vector<detail::op_stage> chain;
    const std::vector<float> w = weights(cx, s, cs, chain);
    p->packed = cx.for_node(n, [&] { return K::pack(w.data(), cs); });
    p->in = cs.in_dims();
    p->out = cs.out_dims();
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    cx.need_operand_room(n, chain);
    p->stages = cx.make_chain(chain, c, 1);
    info.flops = cs.flops();
    info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) + 4.0 * double(w.size());
    info.kernel = std::string("few_channel_conv2d f32 nchw->nhwc") +
                  (std::is_same_v<Out, bf16_t> ? " bf16 out" : "") + cx.chain_suffix(s, chain);
    c.fn = &few_channel_cmd<K, Out>;
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.workspace_bytes = K::workspace_size(cs, c.threads);
    c.params = cx.own(p);
    cmds.push_back(c);
  }

  template <class Recipe, class L, class A, class B>
  static void lower_depthwise(detail::compile_context& cx, const detail::step& s,
                              const node_desc& n, step_info& info,
                              std::vector<detail::plan_command>& cmds, const conv_shape& cs) {
    using K = depthwise_conv2d<Recipe, L, A, epilogue<chain>, B>;
    using T = storage_t<Recipe>;
    auto p = std::make_shared<kernel_params<K>>();
    std::vector<detail::op_stage> chain;
    const std::vector<float> w = weights(cx, s, cs, chain);
    p->packed = K::initialize(cs, w.data());
    p->in = cs.in_dims();
    p->out = cs.out_dims();
    detail::plan_command c;
    c.in[0] = s.x;
    if (std::is_same_v<Recipe, bf16> && cx.T(s.x).type != dtype::bf16)
      c.in[0] = convert_input<A, B>(cx, s, n, dtype::bf16, {}, cmds);
    c.out = s.out;
    cx.need_operand_room(n, chain);
    p->stages = cx.make_chain(chain, c, 1);
    info.flops = cs.flops();
    info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) + 4.0 * double(w.size());
    info.kernel = std::string("depthwise_conv2d ") +
                  (std::is_same_v<Recipe, bf16> ? "bf16 " : "f32 ") + std::string(L::name) +
                  (chain.empty() ? "" : " [" + cx.chain_text(chain) + "]");
    if constexpr (std::is_same_v<Recipe, bf16> && std::is_same_v<L, nhwc>)
      if (cx.T(s.out).type == dtype::bf16)  // bf16 absorbed: the consumer reads bf16
        return add_kernel_command<K, T, bf16_t>(cx, p, cs, c, info, cmds);
    add_kernel_command<K, T, float>(cx, p, cs, c, info, cmds);
  }

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
  static void lower_dense(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                          step_info& info, std::vector<detail::plan_command>& cmds,
                          const conv_shape& useful, std::string_view recipe) {
    if constexpr (!gemm_available<Recipe, A, B>()) {
      cx.fail_node(n, std::string(recipe) + " conv2d has no kernel on arch " +
                          std::string(A::name) +
                          " (int8 needs vpdpbusd or vpmaddubsw: an x86 arch from avx2 up)");
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
      const index_t diagonal = K::with_diagonal(merged).diagonal;
      merge *= diagonal;
      if (merge > 1) {
        w = block_diagonal(w, cs, merge);
        cs.groups /= merge;
        cs.diagonal = diagonal;
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
      info.bytes = double(cx.T(s.x).bytes) + double(cx.T(s.out).bytes) +
                   double(w.size()) * double(sizeof(typename K::weight_storage));
      const bool wino = p->packed.path_ == detail::conv_path::winograd;
      info.kernel =
          "conv2d " + std::string(recipe) + " " + std::string(L::name) + (wino ? " winograd" : "") +
          (merge > 1
               ? " groups " + std::to_string(useful.groups) + " as " + std::to_string(cs.groups) +
                     (diagonal > 1 ? "x" + std::to_string(diagonal) : "")
               : "") +
          cx.chain_suffix(s, chain);
      add_kernel_command<K, conv_input_t<Recipe>, Out>(cx, p, cs, c, info, cmds);
    }
  }
};

template <conv2d_rule::part P, class A, class B, class Set>
void conv2d_rule::lower_part(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                             step_info& info, std::vector<detail::plan_command>& cmds) {
  const conv_shape cs = shape_of(cx, s);
  const precision pr = cx.precision_of(n);
  const bool cl = cx.T(s.x).layout == tensor_layout::nhwc;
  if constexpr (P == part::depthwise) {
    // An int8 depthwise runs in bf16 when its producer writes bf16 (int8_bf16_nhwc), else in
    // f32: its cost is memory, not arithmetic.
    if constexpr (bf16_tensors<Set>()) {
      if (pr == precision::bf16 || (pr == precision::int8 && cx.T(s.x).type == dtype::bf16))
        return cl ? lower_depthwise<bf16, nhwc, A, B>(cx, s, n, info, cmds, cs)
                  : lower_depthwise<bf16, nchw, A, B>(cx, s, n, info, cmds, cs);
    }
    return cl ? lower_depthwise<f32, nhwc, A, B>(cx, s, n, info, cmds, cs)
              : lower_depthwise<f32, nchw, A, B>(cx, s, n, info, cmds, cs);
  } else if constexpr (P == part::gated) {
    if (pr == precision::int8) {
      if constexpr (Set::runs_in(precision::int8))
        return cx.T(s.out).type == dtype::u8
                   ? lower_gated<i8, A, B, std::uint8_t>(cx, s, n, info, cmds, cs, "int8")
                   : lower_gated<i8, A, B>(cx, s, n, info, cmds, cs, "int8");
    } else if (pr == precision::bf16) {
      if constexpr (Set::runs_in(precision::bf16))
        return lower_gated<bf16, A, B>(cx, s, n, info, cmds, cs, "bf16");
    } else {
      if constexpr (Set::runs_in(precision::f32))
        return lower_gated<f32, A, B>(cx, s, n, info, cmds, cs, "f32");
    }
    fail_precision<Set>(cx, n, pr);
  } else if constexpr (P == part::few_channel) {
    if constexpr (bf16_tensors<Set>())
      if (cx.T(s.out).type == dtype::bf16)
        return lower_few_channel<A, B, bf16_t>(cx, s, n, info, cmds, cs);
    return lower_few_channel<A, B, float>(cx, s, n, info, cmds, cs);
  } else if constexpr (P == part::dense_bf16) {
    return lower_dense<bf16, nhwc, A, B>(cx, s, n, info, cmds, cs, "bf16");
  } else if constexpr (P == part::dense_bf16_to_bf16) {  // bf16 absorbed: the consumer reads bf16
    return lower_dense<bf16, nhwc, A, B, bf16_t>(cx, s, n, info, cmds, cs, "bf16");
  } else if constexpr (P == part::dense_bf16_nchw) {
    return lower_dense<bf16, nchw, A, B>(cx, s, n, info, cmds, cs, "bf16");
  } else if constexpr (P == part::dense_i8) {
    return lower_dense<i8, nhwc, A, B>(cx, s, n, info, cmds, cs, "int8");
  } else if constexpr (P == part::dense_i8_to_u8) {  // quantize fused (int8 recipe only)
    return lower_dense<i8, nhwc, A, B, std::uint8_t>(cx, s, n, info, cmds, cs, "int8");
  } else if constexpr (P == part::dense_i8_to_bf16) {
    if constexpr (int8_bf16_outputs<A, B>())  // read as bf16 by a depthwise
      return lower_dense<i8, nhwc, A, B, bf16_t>(cx, s, n, info, cmds, cs, "int8");
    cx.fail_node(n, "int8 conv2d with a bf16 output has no kernel on arch " + std::string(A::name));
  } else if constexpr (P == part::dense_i8_nchw) {
    if (cx.T(s.out).type == dtype::u8)  // quantize fused (int8 recipe only)
      return lower_dense<i8, nchw, A, B, std::uint8_t>(cx, s, n, info, cmds, cs, "int8");
    return lower_dense<i8, nchw, A, B>(cx, s, n, info, cmds, cs, "int8");
  } else {
    return cl ? lower_dense<f32, nhwc, A, B>(cx, s, n, info, cmds, cs, "f32")
              : lower_dense<f32, nchw, A, B>(cx, s, n, info, cmds, cs, "f32");
  }
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
