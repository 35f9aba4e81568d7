// Pad (constant / reflect / edge; opset 2's attributes and opset 11's inputs; negative pads
// crop): on run-time data the graph's pad op, on constants evaluated at load time.
#include "kfuse/kernels/pad.hpp"

#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

/// The graph's pad attributes of ONNX Pad node n (its pads, before per axis then after).
pad_params pad_params_of(context& cx, const node_proto& n, int rank) {
  pad_params a;
  std::vector<std::int64_t> pads;
  if (cx.opset < 11) {
    cx.only_attrs(n, {"pads", "paddings", "mode", "value"});
    pads = cx.attr_ints(n, cx.attr(n, "pads") != nullptr ? "pads" : "paddings");
    a.value = cx.attr_float(n, "value", 0.f);
  } else {
    cx.only_attrs(n, {"mode"});
    pads = cx.ints_in(n, 1, "pads");
    if (cx.has_input(n, 3)) {  // opset 18: pads (begins, then ends) of the listed axes only
      const std::vector<std::int64_t> axes = cx.ints_in(n, 3, "axes");
      if (pads.size() != 2 * axes.size())
        cx.fail(n, std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) +
                       " axes (2 per axis)");
      std::vector<std::int64_t> all(std::size_t(2 * rank), 0);
      std::vector<bool> seen(std::size_t(rank), false);
      for (std::size_t k = 0; k < axes.size(); ++k) {
        const int d = norm_axis(cx, n, axes[k], rank);
        if (seen[std::size_t(d)]) cx.fail(n, "axis " + std::to_string(d) + " is listed twice");
        seen[std::size_t(d)] = true;
        all[std::size_t(d)] = pads[k];
        all[std::size_t(rank + d)] = pads[axes.size() + k];
      }
      pads = std::move(all);
    }
    if (cx.has_input(n, 2)) {
      const const_value& v = cx.const_in(n, 2, "constant_value");
      if (v.numel() != 1) cx.fail(n, "constant_value must be one value");
      a.value = float(v.at(0));
    }
  }
  if (pads.size() != std::size_t(2 * rank))
    cx.fail(n, std::to_string(pads.size()) + " pads for a " + std::to_string(rank) +
                   "-D input (2 per axis)");
  for (std::int64_t p : pads) {
    if (p > (std::int64_t(1) << 40) || p < -(std::int64_t(1) << 40))
      cx.fail(n, "pad " + std::to_string(p) + " is out of range");
    a.pads.push_back(index_t(p));
  }
  const std::string mode = cx.attr_string(n, "mode", "constant");
  if (mode == "reflect")
    a.mode = pad_mode::reflect;
  else if (mode == "edge")
    a.mode = pad_mode::edge;
  else if (mode != "constant")
    cx.fail(n, "mode='" + mode + "' is not supported (constant, reflect, edge)");
  return a;
}

}  // namespace

void import_pad(context& cx, const node_proto& n) {
  run_value x = cx.float_in(n, 0);
  const int r = int(x.shape.size());
  const pad_params a = pad_params_of(cx, n, r);
  if (std::all_of(a.pads.begin(), a.pads.end(), [](index_t p) { return p == 0; }))
    return cx.set_alias(n, 0, cx.in(n, 0));
  std::vector<index_t> shape = x.shape;
  for (int d = 0; d < r; ++d) {
    shape[std::size_t(d)] += a.pads[std::size_t(d)] + a.pads[std::size_t(r + d)];
    if (shape[std::size_t(d)] < 1)
      cx.fail(n, "the result would be empty on axis " + std::to_string(d));
  }
  run_value y = x;
  y.id = cx.g.pad(cx.out_name(n), x.id, a);
  y.shape = std::move(shape);
  cx.set_run(n, 0, y);
}

void fold_pad(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const int r = int(x.shape.size());
  const pad_params a = pad_params_of(cx, n, r);
  std::vector<index_t> shape = x.shape;
  for (int d = 0; d < r; ++d) {
    shape[std::size_t(d)] += a.pads[std::size_t(d)] + a.pads[std::size_t(r + d)];
    if (shape[std::size_t(d)] < 1)
      cx.fail(n, "the result would be empty on axis " + std::to_string(d));
    if (a.mode == pad_mode::reflect && (a.pads[std::size_t(d)] >= x.shape[std::size_t(d)] ||
                                        a.pads[std::size_t(r + d)] >= x.shape[std::size_t(d)]))
      cx.fail(n, "reflect pads must be smaller than the extent on axis " + std::to_string(d));
  }
  const_value y = make_const(x.elem, shape);
  for (index_t k = 0; k < y.numel(); ++k) {
    index_t rem = k, src = 0, stride = 1;
    bool fill = false;
    for (int d = r - 1; d >= 0; --d) {
      const index_t o = rem % shape[std::size_t(d)];
      rem /= shape[std::size_t(d)];
      const index_t i =
          kfuse::detail::pad_source(o, a.pads[std::size_t(d)], x.shape[std::size_t(d)], a.mode);
      fill = fill || i < 0;
      src += i * stride;
      stride *= x.shape[std::size_t(d)];
    }
    store(y, k, fill ? double(a.value) : x.at(src));
  }
  cx.set_const(n, 0, std::move(y));
}

}  // namespace kfuse::onnx::detail
