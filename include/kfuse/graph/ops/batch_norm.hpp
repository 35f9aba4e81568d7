#pragma once
// batch_norm (inference) as a graph op: a per-channel affine map, run as an eltwise chain
// (mul scale, add shift) or folded into a preceding conv2d's weights by the fusion pass.
#include "kfuse/graph/ops/eltwise.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/batch_norm_params.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct batch_norm_rule : op_rule {
  static constexpr op_kind kind = op_kind::batch_norm;
  using attributes = norm_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const norm_params& attr = n.attr<norm_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_float(n, x);
    if (x.type != dtype::f32)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                          "; batch_norm takes f32 (add a cast node first)");
    const index_t C = cx.channels_of(x);
    const char* names[] = {"", "mean", "var", "gamma", "beta"};
    for (std::size_t s = 1; s < 5; ++s)
      cx.need_count(n, names[s], cx.need_constant(n, s, names[s]), C, "channels");
    if (!(attr.eps >= 0.f)) cx.fail_node(n, "eps must be non-negative");
    const std::vector<float> var = cx.constant_f32(n.inputs[2].index);
    for (std::size_t c = 0; c < var.size(); ++c) {
      if (!(var[c] >= 0.f))
        cx.fail_node(n, "variance of channel " + std::to_string(c) + " is negative or NaN (" +
                            std::to_string(var[c]) + ")");
      if (!(var[c] + attr.eps > 0.f))
        cx.fail_node(n, "var + eps of channel " + std::to_string(c) +
                            " is 0: the scale 1 / sqrt(var + eps) is infinite");
    }
    cx.set_out(n, x.shape, dtype::f32, x.layout);
  }

  /// Runs as an eltwise step: y = x * scale + shift, per channel (batch_norm_affine).
  static void build_step(detail::compile_context& cx, const node_desc& n, detail::step& s) {
    const auto mean = cx.constant_f32(n.inputs[1].index), var = cx.constant_f32(n.inputs[2].index),
               gamma = cx.constant_f32(n.inputs[3].index),
               beta = cx.constant_f32(n.inputs[4].index);
    std::vector<float> sc(mean.size()), sh(mean.size());
    batch_norm_affine({mean, var, gamma, beta, n.attr<norm_params>().eps}, sc, sh);
    const index_t C = index_t(mean.size());
    s.op = op_kind::eltwise;
    s.chain.push_back({stage_kind::mul, 0, 0, cx.new_constant(n.name + ".scale", {C}, sc), true});
    s.chain.push_back({stage_kind::add, 0, 0, cx.new_constant(n.name + ".shift", {C}, sh), true});
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    eltwise_rule::lower<A, B>(cx, s, n, info, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
