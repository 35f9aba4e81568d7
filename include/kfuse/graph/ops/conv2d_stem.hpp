#pragma once
// conv2d lowered as a few-channel stem reading NCHW and writing NHWC (passes/entry_layout.hpp):
// kfuse::few_channel_conv2d.
#include "kfuse/graph/ops/conv2d_common.hpp"
#include "kfuse/kernels/conv/few_channel_conv2d.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// The replay command of a stem conv reading NCHW and writing NHWC (passes/entry_layout.hpp):
/// kernel_cmd's, with a view of each layout; Out is f32, or bf16 for a bf16 plan's reader.
template <class K, class Out>
void few_channel_cmd(const command& c) {
  const auto& p = *static_cast<const kernel_params<K>*>(c.params);
  K::run(view<nchw>(static_cast<const float*>(c.in[0]), p.in), p.packed,
         view<nhwc>(static_cast<Out*>(c.out), p.out), epilogue<chain>{command_chain(c, p.stages)},
         command_workspace(c), run_options{c.threads});
}

struct conv2d_stem_lowering : conv2d_common {
  template <class A, class B, class Out>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds,
                    const conv_shape& cs) {
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
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
