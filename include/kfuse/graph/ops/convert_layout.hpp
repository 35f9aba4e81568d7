#pragma once
// convert_layout: nchw <-> nhwc of a 4-D tensor as a graph op (any element size).
// layout_command() is the same conversion for other ops' lowering (a reshape of nhwc data).
#include <cstring>

#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/layout_convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct layout_params {
  dims4 dims;
};

template <class T, class LIn, class LOut>
void convert_layout_cmd(const command& c) {
  const auto& p = *static_cast<const layout_params*>(c.params);
  if constexpr (std::is_same_v<LIn, LOut>)
    std::memcpy(c.out, c.in[0], sizeof(T) * std::size_t(numel(p.dims)));
  else if constexpr (std::is_same_v<LIn, nchw>)
    nchw_to_nhwc(tensor_view<const T, nchw>{static_cast<const T*>(c.in[0]), p.dims},
                 tensor_view<T, nhwc>{static_cast<T*>(c.out), p.dims}, c.threads);
  else
    nhwc_to_nchw(tensor_view<const T, nhwc>{static_cast<const T*>(c.in[0]), p.dims},
                 tensor_view<T, nchw>{static_cast<T*>(c.out), p.dims}, c.threads);
}

/// The command for element type T from layout `from` to `to`.
template <class T>
command_fn layout_fn(tensor_layout from, tensor_layout to) {
  if (from == tensor_layout::nhwc && to == tensor_layout::nchw)
    return &convert_layout_cmd<T, nhwc, nchw>;
  if (from == to && to == tensor_layout::nhwc) return &convert_layout_cmd<T, nhwc, nhwc>;
  if (to == tensor_layout::nhwc) return &convert_layout_cmd<T, nchw, nhwc>;
  return &convert_layout_cmd<T, nchw, nchw>;
}

/// Converts tensor x (4-D `shape`) from layout `from` into tensor `out` in layout `to`.
inline void layout_command(detail::compile_context& cx, std::int32_t x, std::int32_t out,
                           const std::vector<index_t>& shape, tensor_layout from, tensor_layout to,
                           std::vector<detail::plan_command>& cmds) {
  auto p = std::make_shared<layout_params>();
  p->dims = dims4{shape[0], shape[1], shape[2], shape[3]};
  detail::plan_command c;
  c.in[0] = x;
  c.out = out;
  switch (dtype_size(cx.T(x).type)) {  // the bytes move, whatever they mean
    case 4:
      c.fn = layout_fn<float>(from, to);
      break;
    case 2:
      c.fn = layout_fn<std::uint16_t>(from, to);
      break;
    default:
      c.fn = layout_fn<std::uint8_t>(from, to);
      break;
  }
  // Copy-class work: threads by the bytes moved (the plan's thread count caps it).
  c.threads = cx.threads_for(2.0 * double(cx.T(x).bytes), 0.0);
  c.params = cx.own(p);
  cmds.push_back(c);
}

struct convert_layout_rule : op_rule {
  static constexpr op_kind kind = op_kind::convert_layout;
  using attributes = convert_layout_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const convert_layout_params& attr = n.attr<convert_layout_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    if (x.shape.size() != 4)
      cx.fail_node(n, "input '" + x.name + "' has " + std::to_string(x.shape.size()) +
                          " dimensions; layout conversion takes 4-D (N, C, H, W)");
    if (attr.to == tensor_layout::plain) cx.fail_node(n, "target layout must be nchw or nhwc");
    cx.set_out(n, x.shape, x.type, attr.to);
    cx.pass_quant(n, x);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc&,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(s.x);
    const tensor_layout from =
        x.layout == tensor_layout::nhwc ? tensor_layout::nhwc : tensor_layout::nchw;
    const tensor_layout to = cx.T(s.out).layout;
    layout_command(cx, s.x, s.out, x.shape, from, to, cmds);
    info.kernel =
        "convert_layout " + std::string(layout_name(from)) + "->" + std::string(layout_name(to));
    info.bytes = 2.0 * double(x.bytes);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
