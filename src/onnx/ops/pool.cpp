// MaxPool, AveragePool (1-D and 2-D; pads, ceil_mode, count_include_pad, auto_pad),
// GlobalAveragePool and GlobalMaxPool -> the graph's pool2d (padding wider than half the window
// through an explicit pad where that is exact).
#include <limits>

#include "kfuse/kernels/pool_shape.hpp"
#include "ops.hpp"

namespace kfuse::onnx::detail {

void import_pool(context& cx, const node_proto& n) {
  const std::string& t = n.op_type();
  const bool global = t == "GlobalAveragePool" || t == "GlobalMaxPool";
  const bool is_max = t == "MaxPool" || t == "GlobalMaxPool";
  if (global)
    cx.only_attrs(n, {});
  else if (is_max)
    cx.only_attrs(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order",
                      "strides"});
  else
    cx.only_attrs(
        n, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
  if (cx.output_used(n, 1)) cx.fail(n, "the Indices output is not supported");
  run_value x = cx.float_in(n, 0);
  const int rank = int(x.shape.size());
  if (rank != 3 && rank != 4)
    cx.fail(n, "input is " + std::to_string(rank) + "-D " + shape_str(x.shape) +
                   ": kfuse pools 1-D and 2-D maps");
  const int sp = rank - 2;
  const std::vector<index_t> in_shape = x.shape;
  if (sp == 1) x = cx.reshape(x, {x.shape[0], x.shape[1], 1, x.shape[2]}, n.output(0) + "/as_2d");
  x = cx.as_image(x, n.output(0));

  pool2d_params p;
  p.kind = global ? (is_max ? pool_mode::global_max : pool_mode::global_average)
                  : (is_max ? pool_mode::max : pool_mode::average);
  index_t oh = 1, ow = 1;
  if (!global) {
    auto ks = cx.attr_ints(n, "kernel_shape");
    if (ks.size() != std::size_t(sp))
      cx.fail(n, "kernel_shape must have " + std::to_string(sp) + " values");
    auto strides = cx.attr_ints(n, "strides");
    if (strides.empty()) strides.assign(std::size_t(sp), 1);
    auto pads = cx.attr_ints(n, "pads");
    if (pads.empty()) pads.assign(std::size_t(2 * sp), 0);
    if (strides.size() != std::size_t(sp) || pads.size() != std::size_t(2 * sp))
      cx.fail(n, "strides / pads do not match the " + std::to_string(sp) + "-D window");
    for (std::int64_t d : cx.attr_ints(n, "dilations"))
      if (d != 1) cx.fail(n, "dilations other than 1 are not supported yet");
    if (cx.attr_int(n, "storage_order", 0) != 0) cx.fail(n, "storage_order=1 is not supported");
    for (auto v : ks)
      if (v < 1 || v > (1 << 20)) cx.fail(n, "kernel_shape value " + std::to_string(v));
    for (auto v : strides)
      if (v < 1 || v > (1 << 20)) cx.fail(n, "stride " + std::to_string(v));
    for (auto v : pads)
      if (v < 0 || v > (1 << 20)) cx.fail(n, "pad " + std::to_string(v));
    // 1-D: the window runs along W.
    std::vector<std::int64_t> k2 = sp == 2 ? ks : std::vector<std::int64_t>{1, ks[0]};
    std::vector<std::int64_t> s2 = sp == 2 ? strides : std::vector<std::int64_t>{1, strides[0]};
    std::vector<std::int64_t> p4 =
        sp == 2 ? pads : std::vector<std::int64_t>{0, pads[0], 0, pads[1]};
    const std::string auto_pad = cx.attr_string(n, "auto_pad", "NOTSET");
    const bool ceil = cx.attr_int(n, "ceil_mode", 0) != 0;
    if (auto_pad != "NOTSET") {
      if (auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
        cx.fail(n, "auto_pad='" + auto_pad + "'");
      for (int d = 0; d < 2; ++d) {
        const index_t in = x.shape[std::size_t(2 + d)];
        index_t b = 0, e = 0;
        if (auto_pad != "VALID") {
          const index_t out = (in + s2[std::size_t(d)] - 1) / s2[std::size_t(d)];
          const index_t total =
              std::max<index_t>(0, (out - 1) * s2[std::size_t(d)] + k2[std::size_t(d)] - in);
          b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
          e = total - b;
        }
        p4[std::size_t(d)] = b;
        p4[std::size_t(d + 2)] = e;
      }
    }
    p.kernel_h = int(k2[0]);
    p.kernel_w = int(k2[1]);
    p.stride_h = int(s2[0]);
    p.stride_w = int(s2[1]);
    p.pad_top = int(p4[0]);
    p.pad_left = int(p4[1]);
    p.pad_bottom = int(p4[2]);
    p.pad_right = int(p4[3]);
    p.ceil_mode = ceil;
    p.count_include_pad = cx.attr_int(n, "count_include_pad", 0) != 0;
    oh = pool_shape::out_extent(x.shape[2], p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, ceil);
    ow = pool_shape::out_extent(x.shape[3], p.kernel_w, p.stride_w, p.pad_left, p.pad_right, ceil);
    if (oh < 1 || ow < 1) cx.fail(n, "the window is larger than the padded input");
  }
  // Padding wider than half the window (legal ONNX; kfuse's pool kernels take at most half):
  // an explicit pad first, -inf for max, 0 for an average that counts the padding. Without ceil
  // mode only (there the last window may not start in the padding, which an explicit pad allows).
  const bool wide = p.pad_top > p.kernel_h / 2 || p.pad_bottom > p.kernel_h / 2 ||
                    p.pad_left > p.kernel_w / 2 || p.pad_right > p.kernel_w / 2;
  if (!global && wide && !p.ceil_mode && (is_max || p.count_include_pad)) {
    const std::vector<index_t> pads{0, 0, p.pad_top, p.pad_left, 0, 0, p.pad_bottom, p.pad_right};
    const float fill = is_max ? -std::numeric_limits<float>::infinity() : 0.f;
    const std::vector<index_t> padded{x.shape[0], x.shape[1], x.shape[2] + p.pad_top + p.pad_bottom,
                                      x.shape[3] + p.pad_left + p.pad_right};
    x.id = cx.g.pad(cx.unique(n.output(0) + "/pad"), x.id, pads, pad_mode::constant, fill);
    x.shape = padded;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;
  }
  run_value y = x;
  y.id = cx.g.pool2d(sp == 2 ? cx.out_name(n) : cx.unique(n.output(0) + "/pool2d"), x.id, p);
  y.shape = {x.shape[0], x.shape[1], oh, ow};
  if (sp == 1) y = cx.reshape(y, {in_shape[0], in_shape[1], global ? 1 : ow}, n.output(0));
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail
