#pragma once
// layer_norm and rms_norm over the last axis as graph ops: optional affine parameters (gamma,
// beta), any fused stage chain in the epilogue.
#include <vector>

#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/norm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct norm_params {
  index_t rows = 0, cols = 0;
  std::vector<float> gamma, beta;  // empty: none
  float eps = 1e-5f;
  chain_list stages;
};

template <class A, class B, bool Rms, class T>
void norm_cmd(const command& c) {
  const auto& p = *static_cast<const norm_params*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                  static_cast<const float*>(c.in[3])}};
  const auto* in = static_cast<const T*>(c.in[0]);
  auto* out = static_cast<T*>(c.out);
  if constexpr (Rms)
    rms_norm<A, B>(in, out, p.rows, p.cols, rms_norm_params{p.gamma, p.eps}, epilogue<chain>{ch},
                   run_options{c.threads});
  else
    layer_norm<A, B>(in, out, p.rows, p.cols, layer_norm_params{p.gamma, p.beta, p.eps},
                     epilogue<chain>{ch}, run_options{c.threads});
}

/// layer_norm (Rms = false) or rms_norm.
template <bool Rms>
struct norm_rule : op_rule {
  static constexpr op_kind kind = Rms ? op_kind::rms_norm : op_kind::layer_norm;
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
    if (!(n.eps >= 0.f)) cx.fail_node(n, "eps must be non-negative");
    cx.set_out(n, x.shape, x.type, x.layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(s.x);
    auto p = std::make_shared<norm_params>();
    p->cols = x.shape.back();
    p->rows = shape_numel(x.shape) / p->cols;
    p->eps = n.eps;
    if (n.inputs.size() > 1 && n.inputs[1].index >= 0)
      p->gamma = cx.constant_f32(n.inputs[1].index);
    if (!Rms && n.inputs.size() > 2 && n.inputs[2].index >= 0)
      p->beta = cx.constant_f32(n.inputs[2].index);
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    p->stages = cx.make_chain(s.chain, c, 1);
    c.fn = x.type == dtype::bf16 ? &norm_cmd<A, B, Rms, bf16_t> : &norm_cmd<A, B, Rms, float>;
    info.bytes = 2.0 * double(x.bytes) + double(detail::operand_count(s.chain)) * double(x.bytes);
    info.flops = 8.0 * double(shape_numel(x.shape));
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.params = cx.own(p);
    info.kernel = std::string(Rms ? "rms_norm" : "layer_norm") +
                  (s.chain.empty() ? "" : " [" + cx.chain_text(s.chain) + "]");
    cmds.push_back(c);
  }
};
using layer_norm_rule = norm_rule<false>;
using rms_norm_rule = norm_rule<true>;

}  // namespace graph_ops

KFUSE_END_NAMESPACE
