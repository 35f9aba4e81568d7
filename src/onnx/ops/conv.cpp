// Conv (1-D and 2-D, every attribute incl. auto_pad and groups) -> the graph's conv2d. A 1-D
// convolution runs as a 2-D one of height 1.
#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

// Begin / end padding of one spatial axis from auto_pad.
void auto_pads(const context& cx, const node_proto& n, const std::string& mode, index_t in,
               index_t k, int stride, int dil, int& begin, int& end) {
  if (mode == "VALID") {
    begin = end = 0;
    return;
  }
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER") cx.fail(n, "auto_pad='" + mode + "'");
  const index_t out = (in + stride - 1) / stride;
  const index_t total = std::max<index_t>(0, (out - 1) * stride + (k - 1) * dil + 1 - in);
  const index_t small = total / 2;
  begin = int(mode == "SAME_UPPER" ? small : total - small);
  end = int(total - begin);
}

int positive_int(const context& cx, const node_proto& n, const char* what, std::int64_t v) {
  if (v < 1 || v > (1 << 20))
    cx.fail(n, std::string(what) + " " + std::to_string(v) + " must be >= 1");
  return int(v);
}

}  // namespace

void import_conv(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  run_value x = cx.float_in(n, 0);
  const const_value& w = cx.const_in(n, 1, "weight W");
  if (!w.is_float()) cx.fail(n, "weight W is " + elem_name(w.elem));
  const int rank = int(x.shape.size());
  if (rank != 3 && rank != 4)
    cx.fail(n, "input is " + std::to_string(rank) + "-D " + shape_str(x.shape) +
                   ": kfuse has 1-D and 2-D convolutions");
  if (int(w.shape.size()) != rank)
    cx.fail(n, "weight W " + shape_str(w.shape) + " does not match the " + std::to_string(rank) +
                   "-D input");
  const int sp = rank - 2;  // spatial axes
  const std::string auto_pad = cx.attr_string(n, "auto_pad", "NOTSET");
  auto ints = [&](const char* name, std::size_t count, std::int64_t dflt) {
    std::vector<std::int64_t> v = cx.attr_ints(n, name);
    if (v.empty()) v.assign(count, dflt);
    if (v.size() != count)
      cx.fail(n, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                     std::to_string(count));
    return v;
  };
  const auto strides = ints("strides", std::size_t(sp), 1);
  const auto dil = ints("dilations", std::size_t(sp), 1);
  const auto ks = cx.attr_ints(n, "kernel_shape");
  for (int d = 0; d < sp; ++d)
    if (!ks.empty() &&
        (ks.size() != std::size_t(sp) || ks[std::size_t(d)] != w.shape[std::size_t(2 + d)]))
      cx.fail(n, "kernel_shape does not match the weight " + shape_str(w.shape));
  std::vector<std::int64_t> pads = ints("pads", std::size_t(2 * sp), 0);
  if (auto_pad != "NOTSET") {
    if (cx.attr(n, "pads")) cx.fail(n, "both pads and auto_pad='" + auto_pad + "'");
    for (int d = 0; d < sp; ++d) {
      int b = 0, e = 0;
      auto_pads(cx, n, auto_pad, x.shape[std::size_t(2 + d)], w.shape[std::size_t(2 + d)],
                positive_int(cx, n, "stride", strides[std::size_t(d)]),
                positive_int(cx, n, "dilation", dil[std::size_t(d)]), b, e);
      pads[std::size_t(d)] = b;
      pads[std::size_t(d + sp)] = e;
    }
  }
  for (std::int64_t p : pads)
    if (p < 0 || p > (1 << 20)) cx.fail(n, "pad " + std::to_string(p) + " is out of range");

  conv2d_params p;
  const std::int64_t group = cx.attr_int(n, "group", 1);
  p.groups = positive_int(cx, n, "group", group);
  if (sp == 2) {
    p.stride_h = positive_int(cx, n, "stride", strides[0]);
    p.stride_w = positive_int(cx, n, "stride", strides[1]);
    p.dilation_h = positive_int(cx, n, "dilation", dil[0]);
    p.dilation_w = positive_int(cx, n, "dilation", dil[1]);
    p.pad_top = int(pads[0]);
    p.pad_left = int(pads[1]);
    p.pad_bottom = int(pads[2]);
    p.pad_right = int(pads[3]);
  } else {
    p.stride_w = positive_int(cx, n, "stride", strides[0]);
    p.dilation_w = positive_int(cx, n, "dilation", dil[0]);
    p.pad_left = int(pads[0]);
    p.pad_right = int(pads[1]);
  }

  const index_t k = w.shape[0];
  std::vector<index_t> wshape = w.shape;
  if (sp == 1) {
    x = cx.reshape(x, {x.shape[0], x.shape[1], 1, x.shape[2]}, n.output(0) + "/as_2d");
    wshape = {w.shape[0], w.shape[1], 1, w.shape[2]};
  }
  x = cx.as_image(x, n.output(0));
  const run_value wt = cx.graph_constant(w, cx.unique(n.input(1)), tensor_layout::plain, &wshape);
  tensor_id bias{};
  if (cx.has_input(n, 2)) {
    const const_value& b = cx.const_in(n, 2, "bias B");
    if (!b.is_float() || b.numel() != k)
      cx.fail(n, "bias B " + shape_str(b.shape) + " must hold " + std::to_string(k) +
                     " float values (one per output channel)");
    bias = cx.graph_constant(b, cx.unique(n.input(2))).id;
  }
  const bool two_d = sp == 2;
  const std::string name = two_d ? cx.out_name(n) : cx.unique(n.output(0) + "/conv2d");
  run_value y = x;
  y.id = cx.g.conv2d(name, x.id, wt.id, bias, p);
  // Output extents (the graph checks the geometry again, with its own errors).
  const index_t H = x.shape[2], W = x.shape[3];
  const index_t R = wshape[2], S = wshape[3];
  const index_t oh = (H + p.pad_top + p.pad_bottom - (R - 1) * p.dilation_h - 1) / p.stride_h + 1;
  const index_t ow = (W + p.pad_left + p.pad_right - (S - 1) * p.dilation_w - 1) / p.stride_w + 1;
  if (oh < 1 || ow < 1) cx.fail(n, "the window is larger than the padded input");
  y.shape = {x.shape[0], k, oh, ow};
  if (!two_d) y = cx.reshape(y, {x.shape[0], k, ow}, n.output(0));
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail

namespace kfuse::onnx::detail {

// ConvTranspose (1-D and 2-D): pads, auto_pad, output_padding and output_shape decide the output
// size and the top / left padding the kernel needs; it runs on NHWC data (converted here if
// needed). A 1-D one runs as a 2-D one of height 1, as Conv does.
void import_conv_transpose(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                    "output_shape", "pads", "strides"});
  run_value x = cx.float_in(n, 0);
  const const_value& w = cx.const_in(n, 1, "weight W");
  const std::size_t rank = x.shape.size();
  if ((rank != 3 && rank != 4) || w.shape.size() != rank || !w.is_float())
    cx.fail(n, "input " + shape_str(x.shape) + " / weight " + shape_str(w.shape) +
                   ": kfuse has 1-D and 2-D transposed convolutions with float weights [C, K / "
                   "group, (R,) S]");
  const std::size_t sp = rank - 2;  // spatial axes
  auto ints = [&](const char* name, std::int64_t dflt, std::size_t count) {
    std::vector<std::int64_t> v = cx.attr_ints(n, name);
    if (v.empty()) v.assign(count, dflt);
    if (v.size() != count)
      cx.fail(n, std::string(name) + " must have " + std::to_string(count) + " values");
    for (auto e : v)
      if (e < 0 || e > (1 << 20)) cx.fail(n, std::string(name) + " value " + std::to_string(e));
    return v;
  };
  // Every attribute as its 2-D form: a 1-D node's height axis has extent, window and stride 1.
  auto two_d = [&](std::vector<std::int64_t> v, std::int64_t h) {
    if (sp == 2) return v;
    return v.size() == 2 ? std::vector<std::int64_t>{h, v[0], h, v[1]}
                         : std::vector<std::int64_t>{h, v[0]};
  };
  const auto strides = two_d(ints("strides", 1, sp), 1), dil = two_d(ints("dilations", 1, sp), 1);
  const auto out_pad = two_d(ints("output_padding", 0, sp), 0);
  auto pads = two_d(ints("pads", 0, 2 * sp), 0);
  const std::string auto_pad = cx.attr_string(n, "auto_pad", "NOTSET");
  auto out_shape = cx.attr_ints(n, "output_shape");
  if (!out_shape.empty()) {
    if (out_shape.size() != sp && out_shape.size() != rank)
      cx.fail(n, "output_shape must have " + std::to_string(sp) + " values");
    out_shape.erase(out_shape.begin(), out_shape.end() - std::ptrdiff_t(sp));
    out_shape = two_d(out_shape, 1);
  }
  const std::int64_t group = cx.attr_int(n, "group", 1);
  if (group < 1 || x.shape[1] % group || w.shape[0] != x.shape[1])
    cx.fail(n, "weight " + shape_str(w.shape) + " does not match " + std::to_string(x.shape[1]) +
                   " input channels in " + std::to_string(group) + " groups");
  for (auto v : strides)
    if (v < 1) cx.fail(n, "strides must be >= 1");
  for (auto v : dil)
    if (v < 1) cx.fail(n, "dilations must be >= 1");
  std::vector<index_t> wshape = w.shape;
  if (sp == 1) {
    x = cx.reshape(x, {x.shape[0], x.shape[1], 1, x.shape[2]}, n.output(0) + "/as_2d");
    wshape = {w.shape[0], w.shape[1], 1, w.shape[2]};
  }
  index_t out[2];
  for (std::size_t d = 0; d < 2; ++d) {
    const index_t in = x.shape[2 + d], k = wshape[2 + d];
    const index_t full = strides[d] * (in - 1) + out_pad[d] + (k - 1) * dil[d] + 1;
    if (!out_shape.empty() || (auto_pad != "NOTSET" && auto_pad != "VALID")) {
      const index_t want = out_shape.empty() ? in * strides[d] : out_shape[d];
      // A negative total (output_shape past the full extent) pads the end of the output.
      const index_t total = full - want;
      const bool upper = auto_pad == "SAME_UPPER";
      pads[d] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
      pads[d + 2] = total - pads[d];
    } else if (auto_pad == "VALID") {
      pads[d] = pads[d + 2] = 0;
    } else if (auto_pad != "NOTSET") {
      cx.fail(n, "auto_pad='" + auto_pad + "'");
    }
    out[d] = full - pads[d] - pads[d + 2];
    if (out[d] < 1) cx.fail(n, "the output would be empty");
  }
  conv2d_params p;
  p.stride_h = int(strides[0]);
  p.stride_w = int(strides[1]);
  p.dilation_h = int(dil[0]);
  p.dilation_w = int(dil[1]);
  p.pad_top = int(pads[0]);
  p.pad_left = int(pads[1]);
  p.groups = int(group);
  const index_t k = w.shape[1] * group;
  tensor_id bias{};
  if (cx.has_input(n, 2)) {
    const const_value& b = cx.const_in(n, 2, "bias B");
    if (!b.is_float() || b.numel() != k)
      cx.fail(n, "bias B must hold " + std::to_string(k) + " floats");
    bias = cx.graph_constant(b, cx.unique(n.input(2))).id;
  }
  const run_value wt = cx.graph_constant(w, cx.unique(n.input(1)), tensor_layout::plain, &wshape);
  x = cx.to_layout(cx.as_image(x, n.output(0)), tensor_layout::nhwc, n.output(0) + "/nhwc");
  const bool back = sp == 1 || cx.image_layout() != tensor_layout::nhwc;
  run_value y = x;
  y.id = cx.g.conv_transpose2d(back ? cx.unique(n.output(0) + "/nhwc_out") : cx.out_name(n), x.id,
                               wt.id, bias, p, out[0], out[1]);
  y.shape = {x.shape[0], k, out[0], out[1]};
  y.layout = tensor_layout::nhwc;
  if (sp == 1) {
    y = cx.to_layout(y, tensor_layout::nchw, n.output(0) + "/nchw");
    y = cx.reshape(y, {x.shape[0], k, out[1]}, n.output(0));
  } else if (back) {
    y = cx.to_layout(y, tensor_layout::nchw, n.output(0));
  }
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail
