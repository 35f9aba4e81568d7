#pragma once
// linear: y = x . W^T (+ bias) through gemm, W given as PyTorch [N, K]. Weights packed at
// compile time (int8: quantized per output channel), any fused stage chain in the epilogue
// (bias, activation, residual add, int8 dequantization scales, and a fused quantize of the
// output).
#include "kfuse/graph/ops/cast.hpp"
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/gemm/quantize_weights.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// Whether gemm<Recipe> has a kernel on arch A (int8 needs vpdpbusd or
/// vpmaddubsw, or the scalar generic). bf16 on an arch without a bf16 dot product is an
/// emulation (the operands rounded, the same f32 FMAs: slower than f32, which such an arch's bf16
/// plans run in unless compile_options::emulated_bf16 asks): kfuse::runtime's tiers leave those
/// kernels out (KFUSE_NO_EMULATED_BF16_KERNELS: 60-110 CPU-s less for each such tier at -O3).
template <class Recipe, class A, class B>
constexpr bool gemm_available() {
  if constexpr (std::is_same_v<Recipe, i8>)
    return detail::int8_kernel_available<A, simd::vec_for<A, B>>();
#ifdef KFUSE_NO_EMULATED_BF16_KERNELS
  else if constexpr (std::is_same_v<Recipe, bf16>)
    return A::native_bf16_dot;
#endif
  else
    return true;
}

/// Why gemm<Recipe> has no kernel on arch A (gemm_available), for the errors naming the node.
template <class Recipe, class A>
std::string gemm_missing(std::string_view recipe, std::string_view op) {
  std::string r = std::string(recipe) + " " + std::string(op) + " has no kernel on arch " +
                  std::string(A::name);
  if constexpr (std::is_same_v<Recipe, i8>)
    return r + " (int8 needs vpdpbusd or vpmaddubsw: an x86 arch from avx2 up)";
  else
    return r + " (kfuse::runtime's tiers without a bf16 dot product, vdpbf16ps, hold no " +
           "emulated bf16 kernels: run the node in f32, or compile header-only, " +
           "kfuse::compile<kfuse::arch::" + std::string(A::name) + ">(g, options))";
}

/// Whether an int8 plan on arch A runs its NHWC depthwise convs in bf16, their int8 producers
/// writing bf16 (conv2d_rule::int8_bf16_nhwc): where bf16 conversions are instructions
/// (vcvtneps2bf16), so that only those archs' plan compilers instantiate the int8 convs' bf16
/// output.
template <class A, class B>
constexpr bool int8_bf16_outputs() {
  return gemm_available<i8, A, B>() && A::native_bf16_dot;
}

/// int8 activations are u8 with a tensor's quant params: scale > 0, zero point in [0, 255].
inline bool valid_u8_quant(const tensor_quant& q) {
  return q.scale > 0.f && std::isfinite(q.scale) && q.zero_point >= 0 && q.zero_point <= 255;
}

/// The int8 recipe's input: u8 activations with quant params from calibration.
inline tensor_quant int8_input_quant(const detail::compile_context& cx, const node_desc& n,
                                     const plan_tensor& x) {
  if (!x.has_quant)
    cx.fail_node(n, "an int8 " + std::string(op_name(n.op)) +
                        " needs the input's quant params: calibrate, then graph::set_quant on '" +
                        x.name + "'");
  if (!valid_u8_quant(x.quant))
    cx.fail_node(n, "input '" + x.name +
                        "' quant params: scale must be positive and the zero point in [0, 255] "
                        "(u8 activations)");
  return x.quant;
}

struct linear_rule : op_rule {
  static constexpr op_kind kind = op_kind::linear;
  using attributes = linear_params;
  static constexpr bool absorbs_chain = true;
  static constexpr bool by_precision = true;
  static bool optional_slot(std::size_t slot) { return slot == 2; }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    cx.need_input_of_precision(n, x);
    if (x.shape.empty()) cx.fail_node(n, "input '" + x.name + "' is a scalar");
    if (x.layout != tensor_layout::plain)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(layout_name(x.layout)) +
                          "; flatten it first");
    const plan_tensor& w =
        cx.need_float_weight(n, 2, "[out_features, in_features]", " (int8 plans quantize them)");
    const index_t K = x.shape.back(), N = w.shape[0];
    if (w.shape[1] != K)
      cx.fail_node(n, "input has " + std::to_string(K) + " features, weights expect " +
                          std::to_string(w.shape[1]));
    cx.need_bias(n, N, "output features");
    auto shape = x.shape;
    shape.back() = N;
    cx.set_out(n, shape, dtype::f32, tensor_layout::plain);
  }

  /// The weight is an other input; the bias becomes the first stage of the epilogue.
  static void build_step(detail::compile_context&, const node_desc& n, detail::step& s) {
    s.others.push_back(n.inputs[1].index);
    if (n.inputs.size() > 2 && n.inputs[2].index >= 0)
      s.chain.push_back({stage_kind::bias, 0, 0, n.inputs[2].index, true});
  }

  /// u8 output from the f32 recipe, or from the int8 recipe where it has a kernel.
  static bool writes_quantized(const detail::compile_context& cx, const detail::step& p, dtype to) {
    const precision pr = cx.precision_of(cx.node_of(p));
    return to == dtype::u8 && (pr == precision::int8 ? cx.int8_gemm : pr == precision::f32);
  }
  static bool reads_quantized(const detail::compile_context& cx, const detail::step& c) {
    return cx.int8_gemm && cx.precision_of(cx.node_of(c)) == precision::int8;
  }
  static bool reads_bf16(const detail::compile_context& cx, const detail::step& c) {
    return cx.precision_of(cx.node_of(c)) == precision::bf16;
  }

  template <class A, class B, class Set = detail::all_ops>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const precision pr = cx.precision_of(n);
    switch (pr) {
      case precision::bf16:
        if constexpr (Set::runs_in(precision::bf16))
          return lower_precision<bf16, A, B, Set>(cx, s, n, info, cmds);
        break;
      case precision::int8:
        if constexpr (Set::runs_in(precision::int8))
          return lower_precision<i8, A, B, Set>(cx, s, n, info, cmds);
        break;
      default:
        if constexpr (Set::runs_in(precision::f32))
          return lower_precision<f32, A, B, Set>(cx, s, n, info, cmds);
        break;
    }
    fail_precision<Set>(cx, n, pr);
  }

  /// The lowering of one recipe (defined below the class: not inline, so that kfuse::runtime
  /// builds each recipe's kernels in an object of its own). A u8 output (the quantization of
  /// an int8 consumer's input fused) only where Set has int8.
  template <class Recipe, class A, class B, class Set = detail::all_ops>
  static void lower_precision(detail::compile_context& cx, const detail::step& s,
                              const node_desc& n, step_info& info,
                              std::vector<detail::plan_command>& cmds);

  /// Out: float, or uint8_t when the plan fused the quantization of the output.
  template <class Recipe, class A, class B, class Out = float>
  static void lower_recipe(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                           step_info& info, std::vector<detail::plan_command>& cmds,
                           std::string_view recipe) {
    if constexpr (!gemm_available<Recipe, A, B>()) {
      cx.fail_node(n, gemm_missing<Recipe, A>(recipe, "linear"));
    } else {
      using Kn = gemm<Recipe, A, chain_epilogue_t<Out>, B>;
      const plan_tensor& x = cx.T(s.x);
      const index_t K = x.shape.back(), N = cx.T(s.out).shape.back();
      const index_t M = shape_numel(x.shape) / K;
      const gemm_problem problem{M, K, N};
      auto p = std::make_shared<kernel_params<Kn>>();
      p->in = {M, K};
      p->out = {M, N};
      p->out_q = cx.out_quant_params(s);
      const std::vector<float> w = cx.constant_f32(s.others[0]);
      std::vector<detail::op_stage> chain = s.chain;
      std::int32_t a = s.x;
      if constexpr (std::is_same_v<Recipe, i8>) {
        // u8 activations with the input's quant params, i8 weights per output channel, and the
        // dequantization scale a_scale * w_scale[n] as the chain's first stage, before the bias.
        const tensor_quant q = int8_input_quant(cx, n, x);
        const int8_weights wq = cx.for_node(n, [&] {
          return quantize_weights_per_row(w, N, std::min(127, Kn::int8_weight_limit));
        });
        std::vector<float> deq(wq.scales);
        for (float& d : deq) d *= q.scale;
        p->packed = Kn::initialize(problem, wq.values.data(), b_layout::nk);
        p->in_zero_point = q.zero_point;
        if (x.type != dtype::u8) a = convert_input<A, B>(cx, s, n, dtype::u8, q, cmds);
        chain.insert(chain.begin(),
                     {stage_kind::mul, 0, 0, cx.new_constant(n.name + ".dequant", {N}, deq), true});
      } else {
        p->packed = Kn::initialize(problem, w.data(), b_layout::nk);
        if (std::is_same_v<Recipe, bf16> && x.type != dtype::bf16)
          a = convert_input<A, B>(cx, s, n, dtype::bf16, {}, cmds);
      }
      cx.need_operand_room(n, chain);
      const double x_bytes = double(cx.T(s.x).bytes);
      detail::plan_command c;
      c.in[0] = a;
      c.out = s.out;
      p->stages = cx.make_chain(chain, c, 1);
      info.flops = 2.0 * double(M) * double(N) * double(K);
      info.bytes = x_bytes + double(cx.T(s.out).bytes) +
                   double(K) * double(N) * double(sizeof(typename Kn::microkernel::storage));
      c.begin = 0;
      c.end = M;
      info.kernel =
          "gemm " + std::string(recipe) + " " + Kn::micro_kernel() + cx.chain_suffix(s, chain);
      add_kernel_command<Kn, typename Kn::a_type, Out>(cx, p, problem, c, info, cmds);
    }
  }
};

template <class Recipe, class A, class B, class Set>
void linear_rule::lower_precision(detail::compile_context& cx, const detail::step& s,
                                  const node_desc& n, step_info& info,
                                  std::vector<detail::plan_command>& cmds) {
  constexpr const char* recipe = std::is_same_v<Recipe, bf16> ? "bf16"
                                 : std::is_same_v<Recipe, i8> ? "int8"
                                                              : "f32";
  constexpr precision pr = std::is_same_v<Recipe, bf16> ? precision::bf16
                           : std::is_same_v<Recipe, i8> ? precision::int8
                                                        : precision::f32;
  if constexpr (!Set::runs_in(pr)) {  // kfuse::runtime built without this precision
    fail_precision<Set>(cx, n, pr);
  } else if constexpr (std::is_same_v<Recipe, bf16>) {
    lower_recipe<bf16, A, B>(cx, s, n, info, cmds, recipe);
  } else if (cx.T(s.out).type == dtype::u8) {  // quantize fused (f32 and int8 recipes)
    if constexpr (Set::runs_in(precision::int8))
      lower_recipe<Recipe, A, B, std::uint8_t>(cx, s, n, info, cmds, recipe);
    else
      fail_precision<Set>(cx, n, precision::int8);
  } else {
    lower_recipe<Recipe, A, B>(cx, s, n, info, cmds, recipe);
  }
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
