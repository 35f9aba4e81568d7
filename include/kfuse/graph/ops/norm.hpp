#pragma once
// layer_norm and rms_norm over the last axis as graph ops: optional affine parameters (gamma,
// beta), any fused stage chain in the epilogue.
#include <vector>

#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/norm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// layer_norm (Rms = false) or rms_norm.
template <bool Rms>
struct norm_rule : op_rule {
  static constexpr op_kind kind = Rms ? op_kind::rms_norm : op_kind::layer_norm;
  using attributes = norm_params;
  static constexpr bool absorbs_chain = true;
  /// gamma (and beta for layer_norm) may be left out.
  static bool optional_slot(std::size_t slot) { return Rms ? slot == 1 : slot >= 1; }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    if (x.type == dtype::f16) cx.fail_node(n, "f16 norms have no kernel: cast to f32");
    if (x.shape.empty()) cx.fail_node(n, "input '" + x.name + "' is a scalar");
    if (x.layout != tensor_layout::plain)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(layout_name(x.layout)) +
                          "; norms run over the last axis of a plain tensor");
    const index_t cols = x.shape.back();
    const char* names[] = {"", "gamma", "beta"};
    for (std::size_t s = 1; s < n.inputs.size(); ++s) {
      if (n.inputs[s].index < 0) continue;
      cx.need_count(n, names[s], cx.need_constant(n, s, names[s]), cols, "columns");
    }
    if (!(n.attr<norm_params>().eps >= 0.f)) cx.fail_node(n, "eps must be non-negative");
    cx.set_out(n, x.shape, x.type, x.layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    using K = norm_kernel<Rms, A, epilogue<chain>, B>;
    const plan_tensor& x = cx.T(s.x);
    typename K::problem pr;
    pr.cols = x.shape.back();
    pr.rows = shape_numel(x.shape) / pr.cols;
    std::vector<float> gamma, beta;
    if (n.inputs.size() > 1 && n.inputs[1].index >= 0) gamma = cx.constant_f32(n.inputs[1].index);
    if (!Rms && n.inputs.size() > 2 && n.inputs[2].index >= 0)
      beta = cx.constant_f32(n.inputs[2].index);
    auto p = std::make_shared<kernel_params<K>>();
    p->packed =
        cx.for_node(n, [&] { return K::initialize(pr, gamma, beta, n.attr<norm_params>().eps); });
    p->in = p->out = {pr.rows, pr.cols};
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    p->stages = cx.make_chain(s.chain, c, 1);
    info.bytes = 2.0 * double(x.bytes) + double(detail::operand_count(s.chain)) * double(x.bytes);
    info.flops = 8.0 * double(shape_numel(x.shape));
    info.kernel = std::string(Rms ? "rms_norm" : "layer_norm") +
                  (s.chain.empty() ? "" : " [" + cx.chain_text(s.chain) + "]");
    with_elem<f32, bf16>(x.type, [&]<class Elem> {
      using T = storage_t<Elem>;
      add_kernel_command<K, T, T>(cx, p, pr, c, info, cmds);
    });
  }
};
using layer_norm_rule = norm_rule<false>;
using rms_norm_rule = norm_rule<true>;

}  // namespace graph_ops

KFUSE_END_NAMESPACE
