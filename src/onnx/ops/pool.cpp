// MaxPool (with its Indices output: max_pool_indices), AveragePool (1-D and 2-D; pads, ceil_mode,
// count_include_pad, auto_pad, dilations),
// GlobalAveragePool and GlobalMaxPool -> the graph's pool2d (padding wider than half the window
// through an explicit pad; dilated max pooling through strided views).
#include <limits>

#include "kfuse/kernels/pool_shape.hpp"
#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {
// A dilated MaxPool (the pool2d kernels have no dilation): x padded with -inf (also far enough
// for ceil mode's last window), one strided view per tap of the window ([N, C, OH, OW], read
// with the dilation's offset and the stride's steps) and one eltwise chain of max stages. Exact
// (max is exact) but it writes kh * kw views: a fallback for a rare attribute, not a fast path.
void dilated_max_pool(context& cx, const node_proto& n, run_value x, const pool2d_params& p, int dh,
                      int dw, index_t oh, index_t ow, const std::vector<index_t>& in_shape) {
  if (x.shape.size() == 4) x = cx.to_layout(x, tensor_layout::nchw, n.output(0) + "/nchw");
  const index_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const index_t need_h = (oh - 1) * p.stride_h + index_t(dh) * (p.r - 1) + 1;
  const index_t need_w = (ow - 1) * p.stride_w + index_t(dw) * (p.s - 1) + 1;
  const index_t bottom = std::max<index_t>(p.pad_bottom, need_h - H - p.pad_top);
  const index_t right = std::max<index_t>(p.pad_right, need_w - W - p.pad_left);
  const index_t Hp = H + p.pad_top + bottom, Wp = W + p.pad_left + right;
  tensor_id xp = x.id;
  if (p.pad_top || p.pad_left || bottom || right)
    xp = cx.g.pad(cx.unique(n.output(0) + "/pad"), x.id,
                  {0, 0, p.pad_top, p.pad_left, 0, 0, bottom, right}, pad_mode::constant,
                  -std::numeric_limits<float>::infinity());
  const std::vector<index_t> shape{N, C, oh, ow};
  const std::vector<index_t> strides{C * Hp * Wp, Hp * Wp, p.stride_h * Wp, index_t(p.stride_w)};
  std::vector<tensor_id> taps;
  for (int a = 0; a < p.r; ++a)
    for (int b = 0; b < p.s; ++b)
      taps.push_back(cx.g.strided_view(
          cx.unique(n.output(0) + "/tap" + std::to_string(a) + "_" + std::to_string(b)), xp, shape,
          index_t(a) * dh * Wp + index_t(b) * dw, strides, tensor_layout::nchw));
  // Max over the taps, three operands per eltwise node (graph/ops/chain.hpp's
  // chain_max_operands).
  tensor_id acc = taps[0];
  for (std::size_t k = 1; k < taps.size();) {
    std::vector<eltwise_stage> st;
    for (; k < taps.size() && st.size() < 3; ++k) st.push_back({stage_kind::max, 0, 0, taps[k]});
    acc = cx.g.eltwise(cx.unique(n.output(0) + "/max"), acc, std::move(st));
  }
  run_value y = x;
  y.layout = tensor_layout::nchw;
  y.shape = shape;
  y.id = acc;
  if (in_shape.size() == 3) y = cx.reshape(y, {in_shape[0], in_shape[1], ow}, n.output(0));
  cx.set_run(n, 0, y);
}
}  // namespace

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
  const bool indices = is_max && !global && cx.output_used(n, 1);
  // Max pooling also takes uint8 / int8 data (ONNX allows it; the pool2d kernels have u8 / i8
  // instantiations): the maximum needs no scale.
  const value& xv = cx.in(n, 0);
  const bool int8_data =
      is_max && !xv.is_const && (xv.r.type == dtype::u8 || xv.r.type == dtype::i8);
  run_value x = int8_data ? cx.run_in(n, 0) : cx.float_in(n, 0);
  const int rank = int(x.shape.size());
  if (rank != 3 && rank != 4)
    cx.fail(n, "input is " + std::to_string(rank) + "-D " + shape_str(x.shape) +
                   ": kfuse pools 1-D and 2-D maps");
  const int sp = rank - 2;
  const std::vector<index_t> in_shape = x.shape;
  if (sp == 1) x = cx.reshape(x, {x.shape[0], x.shape[1], 1, x.shape[2]}, n.output(0) + "/as_2d");
  x = cx.as_image(x, n.output(0));

  pool2d_params p;
  p.kind = is_max ? pool_kind::max : pool_kind::avg;
  p.global = global;
  index_t oh = 1, ow = 1;
  int dil_h = 1, dil_w = 1;
  bool column_major = false;  // storage_order 1: the Indices output counts W before H
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
    auto dil = cx.attr_ints(n, "dilations");
    if (dil.empty()) dil.assign(std::size_t(sp), 1);
    if (dil.size() != std::size_t(sp))
      cx.fail(n, "dilations must have " + std::to_string(sp) + " values");
    for (auto v : dil)
      if (v < 1 || v > (1 << 20)) cx.fail(n, "dilation " + std::to_string(v));
    const std::vector<std::int64_t> d2 = sp == 2 ? dil : std::vector<std::int64_t>{1, dil[0]};
    dil_h = int(d2[0]);
    dil_w = int(d2[1]);
    const std::int64_t order = cx.attr_int(n, "storage_order", 0);
    if (order != 0 && order != 1) cx.fail(n, "storage_order " + std::to_string(order));
    column_major = order == 1;
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
          const index_t k_eff = (d == 0 ? dil_h : dil_w) * (k2[std::size_t(d)] - 1) + 1;
          const index_t total = std::max<index_t>(0, (out - 1) * s2[std::size_t(d)] + k_eff - in);
          b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
          e = total - b;
        }
        p4[std::size_t(d)] = b;
        p4[std::size_t(d + 2)] = e;
      }
    }
    p.r = int(k2[0]);
    p.s = int(k2[1]);
    p.stride_h = int(s2[0]);
    p.stride_w = int(s2[1]);
    p.pad_top = int(p4[0]);
    p.pad_left = int(p4[1]);
    p.pad_bottom = int(p4[2]);
    p.pad_right = int(p4[3]);
    p.ceil_mode = ceil;
    p.count_include_pad = cx.attr_int(n, "count_include_pad", 0) != 0;
    // The window's extent with its dilation (the output size follows it).
    const index_t keh = index_t(dil_h) * (p.r - 1) + 1;
    const index_t kew = index_t(dil_w) * (p.s - 1) + 1;
    oh = pool_shape::out_extent(x.shape[2], keh, p.stride_h, p.pad_top, p.pad_bottom, ceil);
    ow = pool_shape::out_extent(x.shape[3], kew, p.stride_w, p.pad_left, p.pad_right, ceil);
    if (oh < 1 || ow < 1) cx.fail(n, "the window is larger than the padded input");
  }
  const bool wide = p.pad_top > p.r / 2 || p.pad_bottom > p.r / 2 || p.pad_left > p.s / 2 ||
                    p.pad_right > p.s / 2;
  if (int8_data && (dil_h > 1 || dil_w > 1 || wide || indices))
    cx.fail(n, "input 'x' is " + std::string(dtype_name(x.type)) +
                   ": a dilated max pooling, one with padding wider than half the window or one "
                   "whose Indices output is used takes float32");
  if (indices) {
    // The Indices output: the flat NCHW index of each window's maximum (max_pool_indices).
    if (dil_h > 1 || dil_w > 1 || wide)
      cx.fail(n,
              "the Indices output of a dilated pooling or of padding wider than half the "
              "window is not supported");
    const run_value xc = x.layout == tensor_layout::nhwc
                             ? cx.to_layout(x, tensor_layout::nchw, n.output(1) + "/nchw")
                             : x;
    run_value ind = xc;
    ind.id = cx.g.max_pool_indices(sp == 2 ? cx.out_name(n, 1) : cx.unique(n.output(1) + "/2d"),
                                   xc.id, p, column_major);
    ind.shape = {x.shape[0], x.shape[1], oh, ow};
    ind.type = dtype::i64;
    ind.layout = tensor_layout::plain;
    if (sp == 1) ind = cx.reshape(ind, {in_shape[0], in_shape[1], ow}, n.output(1));
    cx.set_run(n, 1, ind);
  }
  if (dil_h > 1 || dil_w > 1) return dilated_max_pool(cx, n, x, p, dil_h, dil_w, oh, ow, in_shape);
  // Padding wider than half the window (legal ONNX; kfuse's pool kernels take at most half): an
  // explicit pad first (-inf for max, 0 for average; in ceil mode also far enough for the last
  // window), the pooling without padding, and for an average whose windows do not all count
  // kh * kw positions a multiply by kh * kw / (positions that count) per output position.
  run_value factor;  // the average's correction, when needed
  if (!global && wide) {
    const index_t H = x.shape[2], W = x.shape[3];
    const index_t bottom =
        std::max<index_t>(p.pad_bottom, (oh - 1) * p.stride_h + p.r - H - p.pad_top);
    const index_t right =
        std::max<index_t>(p.pad_right, (ow - 1) * p.stride_w + p.s - W - p.pad_left);
    if (!is_max) {
      // The positions that count: the input, plus its padding with count_include_pad.
      const bool inc = p.count_include_pad;
      const index_t y0 = inc ? -p.pad_top : 0, y1 = inc ? H + p.pad_bottom : H;
      const index_t x0 = inc ? -p.pad_left : 0, x1 = inc ? W + p.pad_right : W;
      const_value f = make_const(elem_float, {1, 1, oh, ow});
      bool needed = false;
      for (index_t oy = 0; oy < oh; ++oy)
        for (index_t ox = 0; ox < ow; ++ox) {
          const index_t ys = oy * p.stride_h - p.pad_top, xs = ox * p.stride_w - p.pad_left;
          const index_t cy = std::min(ys + p.r, y1) - std::max(ys, y0);
          const index_t cxn = std::min(xs + p.s, x1) - std::max(xs, x0);
          const index_t cnt = std::max<index_t>(0, cy) * std::max<index_t>(0, cxn);
          const float v = cnt > 0 ? float(p.r * p.s) / float(cnt) : 0.f;
          f.f[std::size_t(oy * ow + ox)] = v;
          needed = needed || v != 1.f;
        }
      if (needed)
        factor = cx.broadcast(cx.graph_constant(f, cx.unique(n.output(0) + "/count")),
                              {x.shape[0], x.shape[1], oh, ow}, x.layout, n.output(0) + "/count_b");
      p.count_include_pad = true;
    }
    const std::vector<index_t> pads{0, 0, p.pad_top, p.pad_left, 0, 0, bottom, right};
    const float fill = is_max ? -std::numeric_limits<float>::infinity() : 0.f;
    const std::vector<index_t> padded{x.shape[0], x.shape[1], H + p.pad_top + bottom,
                                      W + p.pad_left + right};
    x.id = cx.g.pad(cx.unique(n.output(0) + "/pad"), x.id, pads, pad_mode::constant, fill);
    x.shape = padded;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;
    p.ceil_mode = false;  // the pad holds every window now
  }
  run_value y = x;
  const bool last = sp == 2 && factor.id.index < 0;
  y.id = cx.g.pool2d(last ? cx.out_name(n) : cx.unique(n.output(0) + "/pool2d"), x.id, p);
  y.shape = {x.shape[0], x.shape[1], oh, ow};
  if (factor.id.index >= 0)
    y.id = cx.g.eltwise(sp == 2 ? cx.out_name(n) : cx.unique(n.output(0) + "/counted"), y.id,
                        {{stage_kind::mul, 0, 0, factor.id}});
  if (sp == 1) y = cx.reshape(y, {in_shape[0], in_shape[1], global ? 1 : ow}, n.output(0));
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail
