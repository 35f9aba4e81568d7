// Reductions: every Reduce* op over any axes, on run-time data the graph's reduce op (ReduceMean /
// ReduceMax over the spatial axes of an image are global pooling, how exported squeeze-excite
// blocks often spell it), on constants evaluated at load time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

// The reduced axes (sorted, unique) and keepdims of n for an input of rank r.
std::vector<bool> reduced_axes(context& cx, const node_proto& n, int r, bool& keep) {
  cx.only_attrs(n, {"axes", "keepdims", "noop_with_empty_axes"});
  keep = cx.attr_int(n, "keepdims", 1) != 0;
  std::vector<std::int64_t> axes = cx.attr_ints(n, "axes");
  // An input from opset 13 for ReduceSum, from 18 for the others.
  if ((cx.opset >= 18 || (n.op_type() == "ReduceSum" && cx.opset >= 13)) && cx.has_input(n, 1))
    axes = cx.ints_in(n, 1, "axes");
  std::vector<bool> red(std::size_t(r), axes.empty());
  if (axes.empty() && cx.attr_int(n, "noop_with_empty_axes", 0) != 0)
    red.assign(std::size_t(r), false);
  for (std::int64_t a : axes) red[std::size_t(norm_axis(cx, n, a, r))] = true;
  return red;
}

std::vector<index_t> reduced_shape(const std::vector<index_t>& s, const std::vector<bool>& red,
                                   bool keep) {
  std::vector<index_t> out;
  for (std::size_t d = 0; d < s.size(); ++d)
    if (!red[d])
      out.push_back(s[d]);
    else if (keep)
      out.push_back(1);
  return out;
}

}  // namespace

void fold_reduce(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const int r = int(x.shape.size());
  bool keep = true;
  const std::vector<bool> red = reduced_axes(cx, n, r, keep);
  const std::vector<index_t> out_shape = reduced_shape(x.shape, red, keep);
  std::vector<index_t> kept(x.shape);  // the output with every reduced axis as 1
  for (int d = 0; d < r; ++d)
    if (red[std::size_t(d)]) kept[std::size_t(d)] = 1;
  const std::string& t = n.op_type();
  const index_t m = numel(kept);
  std::vector<double> acc(std::size_t(m),
                          t == "ReduceProd"  ? 1.0
                          : t == "ReduceMax" ? -std::numeric_limits<double>::infinity()
                          : t == "ReduceMin" ? std::numeric_limits<double>::infinity()
                                             : 0.0);
  const index_t count = m ? x.numel() / m : 0;
  for (index_t k = 0; k < x.numel(); ++k) {
    // The output element: k's coordinates with the reduced ones dropped.
    index_t rem = k, o = 0, stride = 1;
    for (int d = r; d-- > 0;) {
      const index_t c = rem % x.shape[std::size_t(d)];
      rem /= x.shape[std::size_t(d)];
      if (!red[std::size_t(d)]) o += c * stride;
      stride *= kept[std::size_t(d)];
    }
    const double v = x.at(k);
    double& a = acc[std::size_t(o)];
    if (t == "ReduceMax")
      a = std::max(a, v);
    else if (t == "ReduceMin")
      a = std::min(a, v);
    else if (t == "ReduceProd")
      a *= v;
    else if (t == "ReduceL1")
      a += std::fabs(v);
    else if (t == "ReduceL2" || t == "ReduceSumSquare")
      a += v * v;
    else if (t == "ReduceLogSumExp")
      a += std::exp(v);
    else
      a += v;  // Sum, Mean
  }
  const_value y = make_const(x.elem, out_shape);
  for (index_t o = 0; o < m; ++o) {
    double a = acc[std::size_t(o)];
    if (t == "ReduceMean") a /= double(count);
    if (t == "ReduceL2") a = std::sqrt(a);
    if (t == "ReduceLogSumExp") a = std::log(a);
    store(y, o, a);
  }
  cx.set_const(n, 0, std::move(y));
}

void import_reduce(context& cx, const node_proto& n) {
  run_value x = cx.float_in(n, 0);
  const int r = int(x.shape.size());
  bool keep = true;
  const std::vector<bool> red = reduced_axes(cx, n, r, keep);
  const std::string& t = n.op_type();
  if (std::find(red.begin(), red.end(), true) == red.end())  // noop_with_empty_axes
    return cx.set_alias(n, 0, cx.in(n, 0));
  if ((t == "ReduceMean" || t == "ReduceMax") && r == 4 && !red[0] && !red[1] && red[2] &&
      red[3]) {  // over H and W of an image: global pooling (fusable, either layout)
    pool2d_params p;
    p.kind = t == "ReduceMax" ? pool_kind::max : pool_kind::avg;
    p.global = true;
    x = cx.as_image(x, n.output(0));
    run_value y = x;
    y.id = cx.g.pool2d(keep ? cx.out_name(n) : cx.unique(n.output(0) + "/pool"), x.id, p);
    y.shape = {x.shape[0], x.shape[1], 1, 1};
    if (!keep) y = cx.reshape(y, {x.shape[0], x.shape[1]}, n.output(0));
    return cx.set_run(n, 0, y);
  }
  static const std::pair<const char*, reduce_kind> kinds[] = {
      {"ReduceSum", reduce_kind::sum},
      {"ReduceMean", reduce_kind::mean},
      {"ReduceMax", reduce_kind::max},
      {"ReduceMin", reduce_kind::min},
      {"ReduceProd", reduce_kind::prod},
      {"ReduceL1", reduce_kind::l1},
      {"ReduceL2", reduce_kind::l2},
      {"ReduceSumSquare", reduce_kind::sum_square},
      {"ReduceLogSumExp", reduce_kind::log_sum_exp}};
  reduce_kind kind = reduce_kind::sum;
  for (const auto& [name, k] : kinds)
    if (t == name) kind = k;
  x = cx.as_plain(x, n.output(0));
  std::vector<int> axes;
  for (int d = 0; d < r; ++d)
    if (red[std::size_t(d)]) axes.push_back(d);
  run_value y = x;
  y.id = cx.g.reduce(cx.out_name(n), x.id, kind, axes, keep);
  y.shape = reduced_shape(x.shape, red, keep);
  if (y.shape.empty()) y.shape = {1};  // kfuse has no rank-0 tensors: one value
  cx.set_run(n, 0, y);
}

// ArgMax / ArgMin (axis, keepdims, select_last_index): int64 indices.
namespace {
struct arg_attrs {
  int axis = 0;
  bool keep = true, last = false;
};
arg_attrs arg_attrs_of(context& cx, const node_proto& n, int rank) {
  cx.only_attrs(n, {"axis", "keepdims", "select_last_index"});
  arg_attrs a;
  a.axis = norm_axis(cx, n, cx.attr_int(n, "axis", 0), rank);
  a.keep = cx.attr_int(n, "keepdims", 1) != 0;
  a.last = cx.attr_int(n, "select_last_index", 0) != 0;
  return a;
}
}  // namespace

void import_arg(context& cx, const node_proto& n) {
  run_value x = cx.as_plain(cx.float_in(n, 0), n.output(0));
  const int r = int(x.shape.size());
  const arg_attrs a = arg_attrs_of(cx, n, r);
  std::vector<bool> red(std::size_t(r), false);
  red[std::size_t(a.axis)] = true;
  run_value y = x;
  y.id =
      cx.g.arg_reduce(cx.out_name(n), x.id, n.op_type() == "ArgMax" ? arg_kind::max : arg_kind::min,
                      a.axis, a.keep, a.last);
  y.shape = reduced_shape(x.shape, red, a.keep);
  if (y.shape.empty()) y.shape = {1};
  y.type = dtype::i64;
  y.layout = tensor_layout::plain;
  cx.set_run(n, 0, y);
}

void fold_arg(context& cx, const node_proto& n) {
  const const_value& x = cx.in(n, 0).c;
  const int r = int(x.shape.size());
  const arg_attrs a = arg_attrs_of(cx, n, r);
  index_t outer = 1, inner = 1;
  for (int d = 0; d < r; ++d) {
    if (d < a.axis) outer *= x.shape[std::size_t(d)];
    if (d > a.axis) inner *= x.shape[std::size_t(d)];
  }
  const index_t len = x.shape[std::size_t(a.axis)];
  std::vector<bool> red(std::size_t(r), false);
  red[std::size_t(a.axis)] = true;
  const_value y = make_const(elem_int64, reduced_shape(x.shape, red, a.keep));
  const bool mx = n.op_type() == "ArgMax";
  for (index_t o = 0; o < outer; ++o)
    for (index_t c = 0; c < inner; ++c) {
      index_t at = 0;
      double best = x.at(o * len * inner + c);
      for (index_t j = 1; j < len; ++j) {
        const double v = x.at((o * len + j) * inner + c);
        if (best != best) break;
        const bool better =
            v != v || (mx ? (a.last ? v >= best : v > best) : (a.last ? v <= best : v < best));
        if (better) {
          best = v;
          at = j;
        }
      }
      y.i[std::size_t(o * inner + c)] = at;
    }
  cx.set_const(n, 0, std::move(y));
}

}  // namespace kfuse::onnx::detail
