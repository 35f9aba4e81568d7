#pragma once
// channel_shuffle as a graph op: an image's channels shuffled over groups (ShuffleNet's reshape,
// transpose, reshape), or a run of them (the chunk that follows; groups 1: a channel slice), in
// NCHW or NHWC. The ONNX importer builds it from those patterns, so that they stay in an NHWC
// plan instead of a round trip through NCHW strided views.
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/channel_shuffle.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

template <std::size_t Bytes>
void channel_shuffle_cmd(const command& c) {
  using U = detail::bits_of<Bytes>;
  const auto& s = *static_cast<const channel_shuffle_shape*>(c.params);
  detail::channel_shuffle_impl(static_cast<const U*>(c.in[0]), static_cast<U*>(c.out), s,
                               run_options{c.threads});
}

struct channel_shuffle_rule : op_rule {
  static constexpr op_kind kind = op_kind::channel_shuffle;
  using attributes = channel_shuffle_params;

  /// The kernel's problem for input x (4-D) and node n's attributes.
  static channel_shuffle_shape problem_of(const plan_tensor& x, const node_desc& n) {
    return channel_shuffle_shape::of(x.shape[0], x.shape[1], x.shape[2] * x.shape[3],
                                     x.layout == tensor_layout::nhwc,
                                     n.attr<channel_shuffle_params>());
  }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const channel_shuffle_params& attr = n.attr<channel_shuffle_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    if (x.shape.size() != 4)
      cx.fail_node(n, "input '" + x.name + "' has shape " + cx.shape_str(x.shape) +
                          ": a channel shuffle reads a 4-D image");
    const int bytes = int(dtype_size(x.type));
    if (bytes != 1 && bytes != 2 && bytes != 4)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                          " (1-, 2- or 4-byte elements)");
    if (attr.count < -1)
      cx.fail_node(n, "count " + std::to_string(attr.count) + " (at least 1, or -1: all)");
    const channel_shuffle_shape s = problem_of(x, n);
    cx.check_for_node(n, "channel_shuffle",
                      [&] { detail::check_channel_shuffle("channel_shuffle", s); });
    cx.set_out(n, {s.n, s.kept(), x.shape[2], x.shape[3]}, x.type, x.layout);
    cx.pass_quant(n, x);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& st, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(st.x);
    auto p = std::make_shared<channel_shuffle_shape>(problem_of(x, n));
    const plan_tensor& o = cx.T(st.out);
    detail::plan_command c;
    c.in[0] = st.x;
    c.out = st.out;
    switch (dtype_size(x.type)) {
      case 1:
        c.fn = &channel_shuffle_cmd<1>;
        break;
      case 2:
        c.fn = &channel_shuffle_cmd<2>;
        break;
      default:
        c.fn = &channel_shuffle_cmd<4>;
    }
    info.bytes = 2.0 * double(o.bytes);
    info.kernel =
        "channel_shuffle " + std::string(layout_name(x.layout)) +
        (p->groups > 1 ? " groups " + std::to_string(p->groups) : "") +
        (p->count < p->c ? " channels " + std::to_string(p->first) + "+" + std::to_string(p->count)
                         : "");
    c.threads = cx.threads_for(info.bytes, 0);
    c.params = cx.own(p);
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
