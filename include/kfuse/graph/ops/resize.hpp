#pragma once
// resize as a graph op: nearest / bilinear / bicubic resampling of an f32 image in its own layout
// (kernels/resize.hpp). The tap tables are built once, at compile time; the output rows are
// split over threads by bytes.
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/resize.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

inline void resize_cmd(const command& c) {
  const auto& s = *static_cast<const resize_shape*>(c.params);
  const float* in = static_cast<const float*>(c.in[0]);
  float* out = static_cast<float*>(c.out);
  if (c.threads <= 1) return resize_rows(in, out, s, c.begin, c.end);
  parallel_for(
      c.begin, c.end, 1, [&](range r, int) { resize_rows(in, out, s, r.begin, r.end); }, c.threads);
}

struct resize_rule : op_rule {
  static constexpr op_kind kind = op_kind::resize;
  using attributes = resize_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& x = cx.T(n.inputs[0]);
    cx.need_image(n, x);
    if (x.type != dtype::f32)
      cx.fail_node(
          n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) + "; resize takes f32");
    const resize_params& p = n.attr<resize_params>();
    if (p.out_h < 1 || p.out_w < 1 || p.out_h > (index_t(1) << 24) || p.out_w > (index_t(1) << 24))
      cx.fail_node(n, "output size " + std::to_string(p.out_h) + "x" + std::to_string(p.out_w) +
                          " is out of range");
    if (!(p.scale_h > 0) || !(p.scale_w > 0) || !std::isfinite(p.scale_h) ||
        !std::isfinite(p.scale_w))
      cx.fail_node(n, "scales must be positive and finite");
    if (int(p.mode) > int(resize_mode::cubic))
      cx.fail_node(n, "unknown resize_mode " + std::to_string(int(p.mode)));
    if (int(p.coords) > int(resize_coords::tf_crop_and_resize))
      cx.fail_node(n, "unknown resize_coords " + std::to_string(int(p.coords)));
    if (p.coords == resize_coords::tf_crop_and_resize &&
        !(std::isfinite(p.roi_h0) && std::isfinite(p.roi_h1) && std::isfinite(p.roi_w0) &&
          std::isfinite(p.roi_w1)))
      cx.fail_node(n, "the region of interest must be finite");
    if (p.mode == resize_mode::cubic && !std::isfinite(p.cubic_a))
      cx.fail_node(n, "the cubic coefficient must be finite");
    cx.set_out(n, {x.shape[0], x.shape[1], p.out_h, p.out_w}, dtype::f32, x.layout);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& st, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(st.x);
    const resize_params& p = n.attr<resize_params>();
    auto s = std::make_shared<resize_shape>();
    s->n = x.shape[0];
    s->c = x.shape[1];
    s->h = x.shape[2];
    s->w = x.shape[3];
    s->out_h = p.out_h;
    s->out_w = p.out_w;
    s->nhwc = x.layout == tensor_layout::nhwc;
    s->linear = p.mode == resize_mode::linear;
    s->cubic = p.mode == resize_mode::cubic;
    s->extrapolation = p.extrapolation;
    s->rows = resize_axis::make(s->h, p.out_h, p.scale_h, p.mode, p.coords, p.rounding, p.cubic_a,
                                p.exclude_outside, p.roi_h0, p.roi_h1);
    s->cols = resize_axis::make(s->w, p.out_w, p.scale_w, p.mode, p.coords, p.rounding, p.cubic_a,
                                p.exclude_outside, p.roi_w0, p.roi_w1);
    detail::plan_command c;
    c.fn = &resize_cmd;
    c.in[0] = st.x;
    c.out = st.out;
    c.begin = 0;
    c.end = resize_row_count(*s);
    info.bytes = double(x.bytes) + double(cx.T(st.out).bytes);
    info.flops = (s->cubic    ? 40.0
                  : s->linear ? 6.0
                              : 0.0) *
                 double(shape_numel(cx.T(st.out).shape));
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.params = cx.own(s);
    info.kernel = s->cubic ? "resize cubic" : s->linear ? "resize linear" : "resize nearest";
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
