#pragma once
// broadcast as a graph op: x expanded to a target shape by NumPy's rules (ONNX Expand; the
// importer also uses it to bring an operand of a binary op to the other's shape), written in
// the output's layout (plain, or nchw / nhwc for 4-D) from x in any layout. Copy-class work:
// split over threads by bytes.
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/broadcast.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

template <class T>
void broadcast_cmd(const command& c) {
  const auto& s = *static_cast<const broadcast_shape*>(c.params);
  const T* in = static_cast<const T*>(c.in[0]);
  T* out = static_cast<T*>(c.out);
  if (c.threads <= 1) return broadcast_rows(in, out, s, c.begin, c.end);
  const index_t grain =
      std::max<index_t>(1, (index_t(1) << 14) / std::max<index_t>(1, s.row_len()));
  parallel_for(
      c.begin, c.end, grain, [&](range r, int) { broadcast_rows(in, out, s, r.begin, r.end); },
      c.threads);
}

/// The copy command for elements of type t (by size: the copy does not look at values).
inline command_fn broadcast_fn(dtype t) {
  switch (dtype_size(t)) {
    case 8:
      return &broadcast_cmd<std::uint64_t>;
    case 4:
      return &broadcast_cmd<std::uint32_t>;
    case 2:
      return &broadcast_cmd<std::uint16_t>;
    default:
      return &broadcast_cmd<std::uint8_t>;
  }
}

/// The logical axis (n, c, h, w order for 4-D) that memory axis m of a rank-r tensor in layout l
/// holds: nhwc's memory order is (n, h, w, c).
constexpr int logical_axis(tensor_layout l, int r, int m) noexcept {
  return l == tensor_layout::nhwc && r == 4 ? (m == 3 ? 1 : m == 0 ? 0 : m + 1) : m;
}

/// The plan command copying step st's input through view p (broadcast and strided_view).
inline void strided_copy_command(detail::compile_context& cx, const detail::step& st,
                                 std::shared_ptr<broadcast_shape> p, const char* kernel,
                                 step_info& info, std::vector<detail::plan_command>& cmds) {
  detail::check_broadcast_shape(*p);
  detail::plan_command c;
  c.in[0] = st.x;
  c.out = st.out;
  c.fn = broadcast_fn(cx.T(st.x).type);
  c.begin = 0;
  c.end = p->rows();
  info.bytes = double(cx.T(st.x).bytes) + double(cx.T(st.out).bytes);
  c.threads = cx.threads_for(info.bytes, 0);
  c.params = cx.own(std::move(p));
  info.kernel = kernel;
  cmds.push_back(c);
}

struct broadcast_rule : op_rule {
  static constexpr op_kind kind = op_kind::broadcast;
  using attributes = broadcast_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const broadcast_params& attr = n.attr<broadcast_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    const std::vector<index_t>& to = attr.shape;
    if (to.empty() || to.size() > std::size_t(broadcast_shape::max_rank))
      cx.fail_node(n, "target rank " + std::to_string(to.size()) + " is not in [1, 6]");
    if (x.shape.size() > to.size())
      cx.fail_node(n, "input '" + x.name + "' " + cx.shape_str(x.shape) +
                          " has more dimensions than the target " + cx.shape_str(to));
    const std::size_t off = to.size() - x.shape.size();
    for (std::size_t d = 0; d < to.size(); ++d) {
      if (to[d] < 1) cx.fail_node(n, "non-positive extent in the target " + cx.shape_str(to));
      if (d >= off && x.shape[d - off] != 1 && x.shape[d - off] != to[d])
        cx.fail_node(n, "input '" + x.name + "' " + cx.shape_str(x.shape) +
                            " does not broadcast to " + cx.shape_str(to));
    }
    if (attr.as != tensor_layout::plain && to.size() != 4)
      cx.fail_node(n, "a " + std::string(layout_name(attr.as)) + " output must be 4-D");
    cx.set_out(n, to, x.type, attr.as);
    cx.pass_quant(n, x);
  }

  /// The kernel's shape: out's memory order, x's logical strides mapped onto it.
  static broadcast_shape shape_of(const plan_tensor& x, const plan_tensor& out) {
    const int r = int(out.shape.size());
    const int off = r - int(x.shape.size());
    // x's strides over its logical axes (its own layout), 0 where it broadcasts.
    index_t logical[broadcast_shape::max_rank] = {};
    const std::vector<index_t> mem = detail::compile_context::memory_shape(x);
    index_t stride = 1;
    const int xr = int(x.shape.size());
    for (int m = xr - 1; m >= 0; --m) {
      const int ax = logical_axis(x.layout, xr, m);
      logical[ax] = x.shape[std::size_t(ax)] == 1 ? 0 : stride;
      stride *= mem[std::size_t(m)];
    }
    broadcast_shape s;
    s.rank = r;
    for (int m = 0; m < r; ++m) {
      const int ax = logical_axis(out.layout, r, m);
      s.dims[m] = out.shape[std::size_t(ax)];
      s.in_strides[m] = ax >= off ? logical[ax - off] : 0;
    }
    return s;
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& st, const node_desc&,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(st.x);
    const plan_tensor& out = cx.T(st.out);
    auto p = std::make_shared<broadcast_shape>(shape_of(x, out));
    strided_copy_command(cx, st, std::move(p), "broadcast", info, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
