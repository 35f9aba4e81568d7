#pragma once
// strided_view as a graph op: out[i0, i1, ...] = x[offset + i0 * s0 + i1 * s1 + ...], strides in
// elements (0 repeats, negative reads backwards) over x's logical row-major order. The importer
// builds Transpose, Slice (with steps), Split, Tile, DepthToSpace and SpaceToDepth of run-time
// data from it. Every element it may read is checked against x's extent at compile time.
//
// x may be nhwc when each axis of the view walks one axis of x (transposes, slices): the strides
// then map onto its memory order. The output is plain, or nchw / nhwc when 4-D. A view whose
// reads are the input's memory order (ConvNeXt's permute of an nhwc image to [N, H, W, C], and
// back into an nhwc image) is the input's bytes: no copy.
#include <array>

#include "kfuse/graph/ops/broadcast.hpp"
#include "kfuse/graph/ops/reshape.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct strided_view_rule : op_rule {
  static constexpr op_kind kind = op_kind::strided_view;
  using attributes = strided_view_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const strided_view_params& attr = n.attr<strided_view_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    const std::vector<index_t>& shape = attr.shape;
    if (shape.empty() || shape.size() > std::size_t(broadcast_shape::max_rank) ||
        attr.strides.size() != shape.size())
      cx.fail_node(n, "the view needs 1 to 6 extents and one stride per extent");
    index_t lo = attr.offset, hi = attr.offset;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 1) cx.fail_node(n, "non-positive extent in " + cx.shape_str(shape));
      index_t span = 0;
      if (__builtin_mul_overflow(attr.strides[d], shape[d] - 1, &span))
        cx.fail_node(n, "stride " + std::to_string(attr.strides[d]) + " overflows");
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= shape_numel(x.shape))
      cx.fail_node(n, "the view reads elements " + std::to_string(lo) + " to " +
                          std::to_string(hi) + " of input '" + x.name + "', which has " +
                          std::to_string(shape_numel(x.shape)));
    broadcast_shape memory;
    if (!memory_view(x, attr, memory))
      cx.fail_node(n, "input '" + x.name +
                          "' is nhwc and the view walks across its axes; convert it to nchw "
                          "first");
    if (attr.as != tensor_layout::plain && shape.size() != 4)
      cx.fail_node(n, "a view's output is plain, or nchw / nhwc when 4-D");
    cx.set_out(n, shape, x.type, attr.as);
    cx.pass_quant(n, x);
  }

  /// The view over x's memory in the kernel's terms (dims in the output's memory order, x's
  /// memory strides along them). For nhwc x each axis of the view must walk one axis of x and
  /// stay inside it, so the logical element offsets map one to one onto memory offsets; false
  /// otherwise (a flat walk across x's axes).
  static bool memory_view(const plan_tensor& x, const strided_view_params& v,
                          broadcast_shape& out) {
    const int r = int(v.shape.size());
    out.rank = r;
    std::array<index_t, broadcast_shape::max_rank> strides{};
    index_t offset = v.offset;
    for (int d = 0; d < r; ++d) strides[std::size_t(d)] = v.strides[std::size_t(d)];
    if (x.layout == tensor_layout::nhwc && x.shape.size() == 4) {
      const index_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
      const std::array<index_t, 4> extent{n, c, h, w}, logical{c * h * w, h * w, w, 1},
          memory{h * w * c, 1, w * c, c};
      std::array<index_t, 4> lo{}, hi{};
      index_t rest = offset;
      offset = 0;
      for (int a = 0; a < 4; ++a) {
        lo[std::size_t(a)] = hi[std::size_t(a)] = rest / logical[std::size_t(a)];
        rest %= logical[std::size_t(a)];
        offset += lo[std::size_t(a)] * memory[std::size_t(a)];
      }
      for (int d = 0; d < r; ++d) {
        const index_t s = strides[std::size_t(d)], e = v.shape[std::size_t(d)];
        strides[std::size_t(d)] = 0;
        if (s == 0 || e == 1) continue;
        int axis = -1;  // the outermost axis of x whose stride divides s and fits the walk
        for (int a = 0; a < 4 && axis < 0; ++a) {
          const index_t l = logical[std::size_t(a)];
          if (s % l == 0 && (s / l < 0 ? -s / l : s / l) * (e - 1) < extent[std::size_t(a)])
            axis = a;
        }
        if (axis < 0) return false;
        const index_t k = s / logical[std::size_t(axis)];
        (k < 0 ? lo : hi)[std::size_t(axis)] += k * (e - 1);
        strides[std::size_t(d)] = k * memory[std::size_t(axis)];
      }
      for (int a = 0; a < 4; ++a)
        if (lo[std::size_t(a)] < 0 || hi[std::size_t(a)] >= extent[std::size_t(a)]) return false;
    }
    out.in_offset = offset;
    for (int m = 0; m < r; ++m) {
      const int d = logical_axis(v.as, r, m);
      out.dims[m] = v.shape[std::size_t(d)];
      out.in_strides[m] = strides[std::size_t(d)];
    }
    return true;
  }

  /// Whether the view reads x's memory in order from its start: the output is x's bytes.
  static bool reads_in_order(const broadcast_shape& s) {
    if (s.in_offset != 0) return false;
    index_t next = 1;
    for (int m = s.rank; m-- > 0;) {
      if (s.dims[m] == 1) continue;
      if (s.in_strides[m] != next) return false;
      next *= s.dims[m];
    }
    return true;
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& st, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    auto p = std::make_shared<broadcast_shape>();
    memory_view(cx.T(st.x), n.attr<strided_view_params>(), *p);  // infer checked it
    if (reads_in_order(*p) && cx.T(st.x).bytes == cx.T(st.out).bytes) {
      info.kernel = "view";
      view_command(cx, st, cmds);
      return;
    }
    strided_copy_command(cx, st, std::move(p), "strided_view", info, cmds);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
