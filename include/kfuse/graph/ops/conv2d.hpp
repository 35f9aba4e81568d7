#pragma once
// conv2d: dense, grouped (1x1 through GEMM) and depthwise (groups == C == K) convolution as a
// graph op: its checks, its fusion traits and the choice of a lowering (one file per algorithm,
// conv2d_common.hpp lists them). Weights packed at compile time, with a following batch norm folded
// in (kfuse::fold_batch_norm) and int8 weights quantized per output channel; any fused stage chain
// (bias, activation, residual add, int8 dequantization scales, and a fused quantize of the
// output) in the epilogue.
#include "kfuse/graph/ops/conv2d_common.hpp"
#include "kfuse/graph/ops/conv2d_dense.hpp"
#include "kfuse/graph/ops/conv2d_depthwise.hpp"
#include "kfuse/graph/ops/conv2d_gated.hpp"
#include "kfuse/graph/ops/conv2d_stem.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct conv2d_rule : op_rule, conv2d_common {
  static constexpr op_kind kind = op_kind::conv2d;
  using attributes = conv2d_params;
  static constexpr bool by_precision = true;
  static constexpr bool absorbs_chain = true;
  static constexpr bool folds_batch_norm = true;
  static bool optional_slot(std::size_t slot) { return slot == 2; }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    cx.need_input_of_precision(n, x);
    cx.need_image(n, x);
    const plan_tensor& w = cx.need_float_weight(n, 4, "OIHW [K, C / groups, R, S]");
    const conv2d_params& cp = n.attr<conv2d_params>();
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
    dense_f32,  // nhwc (and Winograd)
    dense_f32_nchw,
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
                   : cl ? part::dense_f32
                        : part::dense_f32_nchw;
    switch (p) {
#define KFUSE_CONV_PART(name)                                         \
  case part::name:                                                    \
    if constexpr (!detail::set_builds<Set>(part_family(part::name)))  \
      fail_runtime_family(cx, n, part_family(part::name));            \
    else if constexpr (part_runs_in<Set>(part::name))                 \
      return lower_part<part::name, A, B, Set>(cx, s, n, info, cmds); \
    break;
      KFUSE_CONV_PART(depthwise)
      KFUSE_CONV_PART(gated)
      KFUSE_CONV_PART(few_channel)
      KFUSE_CONV_PART(dense_f32)
      KFUSE_CONV_PART(dense_f32_nchw)
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
  /// The kfuse::runtime op family whose objects hold a part (KFUSE_RUNTIME_OPS).
  static constexpr detail::runtime_family part_family(part p) {
    switch (p) {
      case part::depthwise:
        return detail::runtime_family::conv2d_depthwise;
      case part::gated:
        return detail::runtime_family::conv2d_gated;
      case part::few_channel:
        return detail::runtime_family::conv2d_few_channel;
      case part::dense_f32_nchw:
      case part::dense_bf16_nchw:
      case part::dense_i8_nchw:
        return detail::runtime_family::conv2d_nchw;
      case part::dense_i8_to_bf16:  // written only for a depthwise reader
        return detail::runtime_family::conv2d_depthwise;
      default:
        return detail::runtime_family::conv2d;
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
};

template <conv2d_rule::part P, class A, class B, class Set>
void conv2d_rule::lower_part(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                             step_info& info, std::vector<detail::plan_command>& cmds) {
  const conv_shape cs = shape_of(cx, s);
  const precision pr = cx.precision_of(n);
  const bool cl = cx.T(s.x).layout == tensor_layout::nhwc;
  if constexpr (!part_runs_in<Set>(P)) {  // kfuse::runtime built without P's precision
    fail_precision<Set>(cx, n, part_precision(P));
  } else if constexpr (P == part::depthwise) {
    // An int8 depthwise runs in bf16 when its producer writes bf16 (int8_bf16_nhwc), else in
    // f32: its cost is memory, not arithmetic.
    if constexpr (bf16_tensors<Set>()) {
      if (pr == precision::bf16 || (pr == precision::int8 && cx.T(s.x).type == dtype::bf16))
        return cl ? conv2d_depthwise_lowering::lower<bf16, nhwc, A, B>(cx, s, n, info, cmds, cs)
                  : conv2d_depthwise_lowering::lower<bf16, nchw, A, B>(cx, s, n, info, cmds, cs);
    }
    return cl ? conv2d_depthwise_lowering::lower<f32, nhwc, A, B>(cx, s, n, info, cmds, cs)
              : conv2d_depthwise_lowering::lower<f32, nchw, A, B>(cx, s, n, info, cmds, cs);
  } else if constexpr (P == part::gated) {
    if (pr == precision::int8) {
      if constexpr (Set::runs_in(precision::int8))
        return cx.T(s.out).type == dtype::u8
                   ? conv2d_gated_lowering::lower<i8, A, B, std::uint8_t>(cx, s, n, info, cmds, cs,
                                                                          "int8")
                   : conv2d_gated_lowering::lower<i8, A, B>(cx, s, n, info, cmds, cs, "int8");
    } else if (pr == precision::bf16) {
      if constexpr (Set::runs_in(precision::bf16))
        return conv2d_gated_lowering::lower<bf16, A, B>(cx, s, n, info, cmds, cs, "bf16");
    } else {
      if constexpr (Set::runs_in(precision::f32))
        return conv2d_gated_lowering::lower<f32, A, B>(cx, s, n, info, cmds, cs, "f32");
    }
    fail_precision<Set>(cx, n, pr);
  } else if constexpr (P == part::few_channel) {
    if constexpr (bf16_tensors<Set>())
      if (cx.T(s.out).type == dtype::bf16)
        return conv2d_stem_lowering::lower<A, B, bf16_t>(cx, s, n, info, cmds, cs);
    return conv2d_stem_lowering::lower<A, B, float>(cx, s, n, info, cmds, cs);
  } else if constexpr (P == part::dense_bf16) {
    return conv2d_dense_lowering::lower<bf16, nhwc, A, B>(cx, s, n, info, cmds, cs, "bf16");
  } else if constexpr (P == part::dense_bf16_to_bf16) {  // bf16 absorbed: the consumer reads bf16
    return conv2d_dense_lowering::lower<bf16, nhwc, A, B, bf16_t>(cx, s, n, info, cmds, cs, "bf16");
  } else if constexpr (P == part::dense_bf16_nchw) {
    return conv2d_dense_lowering::lower<bf16, nchw, A, B>(cx, s, n, info, cmds, cs, "bf16");
  } else if constexpr (P == part::dense_i8) {
    return conv2d_dense_lowering::lower<i8, nhwc, A, B>(cx, s, n, info, cmds, cs, "int8");
  } else if constexpr (P == part::dense_i8_to_u8) {  // quantize fused (int8 recipe only)
    return conv2d_dense_lowering::lower<i8, nhwc, A, B, std::uint8_t>(cx, s, n, info, cmds, cs,
                                                                      "int8");
  } else if constexpr (P == part::dense_i8_to_bf16) {
    if constexpr (int8_bf16_outputs<A, B>())  // read as bf16 by a depthwise
      return conv2d_dense_lowering::lower<i8, nhwc, A, B, bf16_t>(cx, s, n, info, cmds, cs, "int8");
    cx.fail_node(n, "int8 conv2d with a bf16 output has no kernel on arch " + std::string(A::name));
  } else if constexpr (P == part::dense_i8_nchw) {
    if (cx.T(s.out).type == dtype::u8)  // quantize fused (int8 recipe only)
      return conv2d_dense_lowering::lower<i8, nchw, A, B, std::uint8_t>(cx, s, n, info, cmds, cs,
                                                                        "int8");
    return conv2d_dense_lowering::lower<i8, nchw, A, B>(cx, s, n, info, cmds, cs, "int8");
  } else if constexpr (P == part::dense_f32_nchw) {
    return conv2d_dense_lowering::lower<f32, nchw, A, B>(cx, s, n, info, cmds, cs, "f32");
  } else {
    return conv2d_dense_lowering::lower<f32, nhwc, A, B>(cx, s, n, info, cmds, cs, "f32");
  }
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
