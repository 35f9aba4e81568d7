// Data movement as strided views: Transpose, Slice, Split, Tile, DepthToSpace and SpaceToDepth.
// Each op computes a view of its input (extents, element strides, offset; then the result's
// shape); run-time data becomes the graph's strided_view (one copy), constants are evaluated the
// same way at load time.
#include <algorithm>
#include <numeric>

#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

struct view {
  std::vector<index_t> shape, strides;  // the view's extents and x's stride along each
  index_t offset = 0;
  std::vector<index_t> result;  // the output's shape (a reshape of the view's)
};

std::vector<index_t> row_major_strides(const std::vector<index_t>& s) {
  std::vector<index_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

const std::vector<index_t>& shape_of(const value& v) { return v.is_const ? v.c.shape : v.r.shape; }

// Whether v is a permutation of the axes of x, an nhwc image (a Transpose of it).
bool permutes_image(const run_value& x, const view& v) {
  if (x.layout != tensor_layout::nhwc || x.shape.size() != 4 || v.shape.size() != 4 ||
      v.offset != 0 || v.result != v.shape)
    return false;
  const std::vector<index_t> xs = row_major_strides(x.shape);
  std::vector<bool> seen(4, false);
  for (std::size_t d = 0; d < 4; ++d) {
    const auto a = std::size_t(std::find(xs.begin(), xs.end(), v.strides[d]) - xs.begin());
    if (a >= 4 || seen[a] || x.shape[a] != v.shape[d]) return false;
    seen[a] = true;
  }
  return true;
}

// Whether the 4-D view v of plain x, stored nhwc, is x's bytes in order (the permutation
// [N, H, W, C] -> [N, C, H, W] back into an NHWC plan's image): then it is the image as it is.
bool image_order(const context& cx, const run_value& x, const view& v) {
  if (cx.image_layout() != tensor_layout::nhwc || x.layout != tensor_layout::plain ||
      v.shape.size() != 4 || v.offset != 0 || v.result != v.shape ||
      numel(v.shape) != numel(x.shape))
    return false;
  const std::vector<index_t>& s = v.shape;
  return v.strides[1] == 1 && v.strides[3] == s[1] && v.strides[2] == s[1] * s[3] &&
         v.strides[0] == s[1] * s[2] * s[3];
}

// x read through v: a constant evaluated now, run-time data as one strided_view (a copy). An
// empty result is a constant whatever x is: it has no values to compute.
value read_view(context& cx, const node_proto& n, const value& x, const view& v,
                const std::string& out) {
  if (v.shape.size() > 6)
    cx.fail(n, "needs a " + std::to_string(v.shape.size()) + "-D view; kfuse copies up to 6-D");
  value y;
  if (x.is_const || numel(v.shape) == 0) {
    y.is_const = true;
    y.c = make_const(x.is_const ? x.c.elem : elem_of(x.r), v.result);
    const index_t total = numel(v.shape);
    for (index_t i = 0; i < total; ++i) {
      index_t rem = i, src = v.offset;
      for (std::size_t d = v.shape.size(); d-- > 0;) {
        src += (rem % v.shape[d]) * v.strides[d];
        rem /= v.shape[d];
      }
      store(y.c, i, x.c.at(src));
    }
    return y;
  }
  // An nhwc image is read in place by a permutation of its axes (the graph's strided_view maps
  // the strides onto its memory order); other views read the logical order.
  const run_value in = permutes_image(x.r, v) ? x.r : cx.as_plain(x.r, out);
  const tensor_layout as = image_order(cx, in, v) ? tensor_layout::nhwc : tensor_layout::plain;
  const std::string name = v.shape == v.result ? cx.unique(out) : cx.unique(out + "/view");
  y.r = in;
  y.r.id = cx.g.strided_view(name, in.id, v.shape, v.offset, v.strides, as);
  y.r.shape = v.shape;
  y.r.layout = as;
  if (v.shape != v.result) y.r = cx.reshape(y.r, v.result, out);
  return y;
}

// Whether v reads channels [first, first + v.shape[1]) of every image of x (a 4-D image): a
// Slice or Split along the channels, which stays in an NHWC plan as a channel_shuffle node.
bool channel_run(const run_value& x, const view& v, index_t& first) {
  const std::vector<index_t>& s = x.shape;
  if (s.size() != 4 || x.layout == tensor_layout::plain || v.shape.size() != 4 ||
      v.result != v.shape || v.shape[1] < 1 || v.shape[0] != s[0] || v.shape[2] != s[2] ||
      v.shape[3] != s[3] || v.strides != row_major_strides(s))
    return false;
  const index_t hw = s[2] * s[3];
  first = v.offset / hw;
  return v.offset % hw == 0 && first + v.shape[1] <= s[1];
}

// Output k of n is input 0 read through v.
void emit(context& cx, const node_proto& n, int k, const view& v) {
  const value& x = cx.in(n, 0);
  index_t first = 0;
  if (!x.is_const && channel_run(x.r, v, first))
    return cx.set_run(n, k, cx.channel_shuffle(x.r, 1, first, v.shape[1], n.output(k)));
  cx.set_alias(n, k, read_view(cx, n, x, v, n.output(k)));
}

// ShuffleNet's channel shuffle, x.view(N, g, C / g, H, W).transpose(1, 2) of an image: one
// channel_shuffle node (the reshape back to [N, C, H, W] that follows returns it).
bool import_channel_shuffle(context& cx, const node_proto& n) {
  const value& x = cx.in(n, 0);
  const run_value* viewed = x.is_const ? nullptr : cx.image_viewed_by(x.r.id);
  if (!viewed) return false;
  const run_value image = *viewed;
  const std::vector<index_t>&s = x.r.shape, &is = image.shape;
  if (cx.attr_ints(n, "perm") != std::vector<std::int64_t>{0, 2, 1, 3, 4} || s.size() != 5 ||
      s[0] != is[0] || s[1] * s[2] != is[1] || s[3] != is[2] || s[4] != is[3] ||
      s[1] > (index_t(1) << 30))
    return false;
  const run_value shuffled =
      cx.channel_shuffle(image, int(s[1]), 0, is[1], n.output(0) + "/channel_shuffle");
  cx.set_run(n, 0, cx.reshape(shuffled, {s[0], s[2], s[1], s[3], s[4]}, n.output(0)));
  return true;
}

view transpose_view(context& cx, const node_proto& n, const std::vector<index_t>& s) {
  cx.only_attrs(n, {"perm"});
  const int r = int(s.size());
  std::vector<std::int64_t> perm = cx.attr_ints(n, "perm");
  if (perm.empty())
    for (int d = r; d-- > 0;) perm.push_back(d);
  if (int(perm.size()) != r)
    cx.fail(n, "perm has " + std::to_string(perm.size()) + " axes, the input " + std::to_string(r));
  std::vector<bool> seen(std::size_t(r), false);
  const auto xs = row_major_strides(s);
  view v;
  for (int d = 0; d < r; ++d) {
    const int p = norm_axis(cx, n, perm[std::size_t(d)], r);
    if (seen[std::size_t(p)]) cx.fail(n, "perm repeats axis " + std::to_string(p));
    seen[std::size_t(p)] = true;
    v.shape.push_back(s[std::size_t(p)]);
    v.strides.push_back(xs[std::size_t(p)]);
  }
  v.result = v.shape;
  return v;
}

view slice_view(context& cx, const node_proto& n, const std::vector<index_t>& s) {
  const int rank = int(s.size());
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (cx.opset < 10) {
    cx.only_attrs(n, {"starts", "ends", "axes"});
    starts = cx.attr_ints(n, "starts");
    ends = cx.attr_ints(n, "ends");
    axes = cx.attr_ints(n, "axes");
  } else {
    cx.only_attrs(n, {});
    starts = cx.ints_in(n, 1, "starts");
    ends = cx.ints_in(n, 2, "ends");
    if (cx.has_input(n, 3)) axes = cx.ints_in(n, 3, "axes");
    if (cx.has_input(n, 4)) steps = cx.ints_in(n, 4, "steps");
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    cx.fail(n, "starts, ends, axes and steps differ in length");
  const auto xs = row_major_strides(s);
  view v;
  v.shape = s;
  v.strides = xs;
  std::vector<bool> seen(std::size_t(rank), false);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int a = norm_axis(cx, n, axes[k], rank);
    if (seen[std::size_t(a)]) cx.fail(n, "axis " + std::to_string(a) + " is sliced twice");
    seen[std::size_t(a)] = true;
    const std::int64_t ext = s[std::size_t(a)], st = steps[k];
    if (st == 0) cx.fail(n, "step 0");
    // Negative positions count from the end, then clamp to [0, ext] (step > 0) or
    // [-1, ext - 1] (step < 0).
    auto from_end = [&](std::int64_t p) { return p < 0 ? p + ext : p; };
    const std::int64_t hi = st > 0 ? ext : ext - 1;
    const std::int64_t b = std::clamp<std::int64_t>(from_end(starts[k]), 0, hi);
    const std::int64_t e = std::clamp<std::int64_t>(from_end(ends[k]), st > 0 ? 0 : -1, hi);
    const index_t count =
        st > 0 ? (e > b ? (e - b + st - 1) / st : 0) : (b > e ? (b - e + (-st) - 1) / (-st) : 0);
    v.offset += b * xs[std::size_t(a)];
    v.strides[std::size_t(a)] = xs[std::size_t(a)] * st;
    v.shape[std::size_t(a)] = count;
  }
  v.result = v.shape;
  return v;
}

// Tile of axes [from, to) (repeats elsewhere 1): each repeated axis becomes a stride-0 outer
// axis; axes that stay contiguous merge, so one repeated axis needs at most 3 view axes.
view tile_view(const std::vector<index_t>& s, const std::vector<std::int64_t>& reps,
               std::size_t from, std::size_t to) {
  const auto xs = row_major_strides(s);
  view v;
  for (std::size_t d = 0; d < s.size(); ++d) {
    const index_t r = d >= from && d < to ? reps[d] : 1;
    if (r != 1) {
      v.shape.push_back(r);
      v.strides.push_back(0);
    } else if (!v.shape.empty() && v.strides.back() != 0 &&
               v.strides.back() == xs[d] * s[d]) {  // contiguous with the axis before: merge
      v.shape.back() *= s[d];
      v.strides.back() = xs[d];
      v.result.push_back(s[d]);
      continue;
    }
    v.shape.push_back(s[d]);
    v.strides.push_back(xs[d]);
    v.result.push_back(s[d] * r);
  }
  return v;
}

view depth_space_view(context& cx, const node_proto& n, const std::vector<index_t>& s) {
  const bool to_space = n.op_type() == "DepthToSpace";
  cx.only_attrs(n, to_space ? std::initializer_list<const char*>{"blocksize", "mode"}
                            : std::initializer_list<const char*>{"blocksize"});
  if (s.size() != 4) cx.fail(n, "input " + shape_str(s) + " must be 4-D (N, C, H, W)");
  const index_t b = cx.attr_int(n, "blocksize", 0);
  if (b < 1 || b > (1 << 16)) cx.fail(n, "blocksize " + std::to_string(b));
  const index_t N = s[0], C = s[1], H = s[2], W = s[3];
  view v;
  if (to_space) {
    if (C % (b * b)) cx.fail(n, std::to_string(C) + " channels do not divide by blocksize^2");
    const index_t c = C / (b * b), hw = H * W;
    const std::string mode = cx.attr_string(n, "mode", "DCR");
    if (mode != "DCR" && mode != "CRD") cx.fail(n, "mode='" + mode + "'");
    // out[n, c, h, i, w, j] = x[n, channel(c, i, j), h, w]
    const index_t sc = mode == "DCR" ? hw : b * b * hw, si = mode == "DCR" ? b * c * hw : b * hw,
                  sj = mode == "DCR" ? c * hw : hw;
    v.shape = {N, c, H, b, W, b};
    v.strides = {C * hw, sc, W, si, 1, sj};
    v.result = {N, c, H * b, W * b};
  } else {
    if (H % b || W % b) cx.fail(n, "H and W must divide by the blocksize");
    const index_t h = H / b, w = W / b;
    // out[n, (i * b + j) * C + c, y, x] = x[n, c, y * b + i, x * b + j]
    v.shape = {N, b, b, C, h, w};
    v.strides = {C * H * W, W, 1, H * W, b * W, b};
    v.result = {N, C * b * b, h, w};
  }
  return v;
}

}  // namespace

void import_transpose(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"perm"});
  if (import_channel_shuffle(cx, n)) return;
  const view v = transpose_view(cx, n, shape_of(cx.in(n, 0)));
  bool identity = true;
  for (std::size_t d = 0; d + 1 < v.strides.size(); ++d)
    identity = identity && v.strides[d] >= v.strides[d + 1];
  if (identity && v.shape == shape_of(cx.in(n, 0))) return cx.set_alias(n, 0, cx.in(n, 0));
  emit(cx, n, 0, v);
}

void import_slice(context& cx, const node_proto& n) {
  const std::vector<index_t>& s = shape_of(cx.in(n, 0));
  const view v = slice_view(cx, n, s);
  if (v.shape == s && v.offset == 0 && v.strides == row_major_strides(s))
    return cx.set_alias(n, 0, cx.in(n, 0));
  emit(cx, n, 0, v);
}

void import_tile(context& cx, const node_proto& n) {
  cx.only_attrs(n, {});
  std::vector<index_t> s = shape_of(cx.in(n, 0));
  const std::vector<std::int64_t> reps = cx.ints_in(n, 1, "repeats");
  if (reps.size() != s.size()) cx.fail(n, "repeats must have one value per axis");
  for (std::int64_t r : reps)
    if (r < 0) cx.fail(n, "repeat " + std::to_string(r) + " is negative");
  // In stages of as many axes as a 6-D view holds (a 4-D tile of every axis needs 8 view axes):
  // each stage is one copy, the last writes the output.
  value x = cx.in(n, 0);
  std::size_t from = 0;
  while (true) {
    std::size_t to = from + 1;
    while (to < s.size() && tile_view(s, reps, from, to + 1).shape.size() <= 6) ++to;
    if (to >= s.size()) to = s.size();
    const view v = tile_view(s, reps, from, to);
    const bool last = to == s.size();
    x = read_view(cx, n, x, v, last ? n.output(0) : n.output(0) + "/tile" + std::to_string(from));
    if (last || s.empty()) break;
    s = v.result;
    from = to;
  }
  cx.set_alias(n, 0, x);
}

void import_depth_space(context& cx, const node_proto& n) {
  emit(cx, n, 0, depth_space_view(cx, n, shape_of(cx.in(n, 0))));
}

void import_split(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"axis", "split", "num_outputs"});
  const std::vector<index_t> s = shape_of(cx.in(n, 0));
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", 0), int(s.size()));
  std::vector<std::int64_t> sizes = cx.attr_ints(n, "split");
  if (cx.opset >= 13 && cx.has_input(n, 1)) sizes = cx.ints_in(n, 1, "split");
  const int outs = n.output_size();
  if (sizes.empty() && cx.attr(n, "num_outputs")) {  // opset 18: equal chunks, the last smaller
    const std::int64_t k = cx.attr_int(n, "num_outputs", 0), d = s[std::size_t(axis)];
    if (k != outs)
      cx.fail(n, "num_outputs " + std::to_string(k) + " for " + std::to_string(outs) + " outputs");
    const std::int64_t chunk = (d + k - 1) / k;
    if (chunk * (k - 1) >= d)
      cx.fail(n, "axis of " + std::to_string(d) + " cannot be split into " + std::to_string(k));
    sizes.assign(std::size_t(k - 1), chunk);
    sizes.push_back(d - chunk * (k - 1));
  }
  if (sizes.empty()) {
    if (s[std::size_t(axis)] % outs)
      cx.fail(n, "the axis does not split evenly into " + std::to_string(outs));
    sizes.assign(std::size_t(outs), s[std::size_t(axis)] / outs);
  }
  if (int(sizes.size()) != outs)
    cx.fail(n, "split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outs) +
                   " outputs");
  index_t at = 0;
  const auto xs = row_major_strides(s);
  for (int k = 0; k < outs; ++k) {
    view v;
    v.shape = s;
    v.strides = xs;
    v.shape[std::size_t(axis)] = sizes[std::size_t(k)];
    v.offset = at * xs[std::size_t(axis)];
    v.result = v.shape;
    at += sizes[std::size_t(k)];
    if (sizes[std::size_t(k)] < 0 || at > s[std::size_t(axis)])
      cx.fail(n, "split sizes exceed the axis");
    if (!n.output(k).empty()) emit(cx, n, k, v);
  }
  if (at != s[std::size_t(axis)]) cx.fail(n, "split sizes do not add up to the axis");
}

}  // namespace kfuse::onnx::detail
