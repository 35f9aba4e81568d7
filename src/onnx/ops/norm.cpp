// BatchNormalization (inference), LayerNormalization (any axis: the normalized axes become one;
// its Mean / InvStdDev outputs from reductions), InstanceNormalization, Softmax and LogSoftmax
// (opset-13 and pre-13 axis semantics).
#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

run_value float_const(context& cx, const node_proto& n, int k, const char* what, index_t count) {
  const const_value& c = cx.const_in(n, k, what);
  if (!c.is_float()) cx.fail(n, std::string(what) + " is " + elem_name(c.elem));
  if (c.numel() != count && c.numel() != 1)
    cx.fail(n, std::string(what) + " " + shape_str(c.shape) + " must hold " +
                   std::to_string(count) + " values");
  const_value v = make_const(elem_float, {count});
  for (index_t i = 0; i < count; ++i) v.f[std::size_t(i)] = float(c.at(c.numel() == 1 ? 0 : i));
  return cx.graph_constant(v, cx.unique(n.input(k)));
}

}  // namespace

void import_batch_norm(context& cx, const node_proto& n) {
  cx.only_attrs(n,
                {"epsilon", "momentum", "spatial", "training_mode", "is_test", "consumed_inputs"});
  if (cx.attr_int(n, "training_mode", 0) != 0) cx.fail(n, "training_mode=1 is not supported");
  if (cx.attr_int(n, "spatial", 1) != 1) cx.fail(n, "spatial=0 is not supported");
  for (int k = 1; k < n.output_size(); ++k)
    if (cx.output_used(n, k)) cx.fail(n, "training outputs (running mean / var) are not supported");
  run_value x = cx.float_in(n, 0);
  const int rank = int(x.shape.size());
  if (rank < 2 || rank > 4) cx.fail(n, "input " + shape_str(x.shape) + " must be 2-D to 4-D");
  const index_t C = x.shape[1];
  const std::vector<index_t> in_shape = x.shape;
  if (rank == 3) x = cx.reshape(x, {x.shape[0], C, x.shape[2], 1}, n.output(0) + "/as_4d");
  if (rank >= 3) x = cx.as_image(x, n.output(0));
  const run_value gamma = float_const(cx, n, 1, "scale", C);
  const run_value beta = float_const(cx, n, 2, "bias B", C);
  const run_value mean = float_const(cx, n, 3, "mean", C);
  const run_value var = float_const(cx, n, 4, "var", C);
  const float eps = cx.attr_float(n, "epsilon", 1e-5f);
  run_value y = x;
  y.id = cx.g.batch_norm(rank == 3 ? cx.unique(n.output(0) + "/bn") : cx.out_name(n), x.id, mean.id,
                         var.id, gamma.id, beta.id, eps);
  if (rank == 3) y = cx.reshape(y, in_shape, n.output(0));
  cx.set_run(n, 0, y);
}

namespace {
// LayerNormalization's optional outputs over the rows of x2 ([rows, cols]): Mean and
// InvStdDev = 1 / sqrt(mean((x - Mean)^2) + eps), shaped as x with the normalized axes 1.
void layer_norm_statistics(context& cx, const node_proto& n, const run_value& x2,
                           std::vector<index_t> stat_shape, float eps) {
  const index_t rows = x2.shape[0], cols = x2.shape[1];
  run_value m = x2;
  m.id = cx.g.reduce(cx.unique(n.output(0) + "/mean"), x2.id, reduce_kind::mean, {1}, true);
  m.shape = {rows, 1};
  if (cx.output_used(n, 1)) cx.set_run(n, 1, cx.reshape(m, stat_shape, n.output(1)));
  if (!cx.output_used(n, 2)) return;
  run_value neg = m;
  neg.id = cx.g.scale(cx.unique(n.output(0) + "/neg_mean"), m.id, -1.f);
  neg = cx.broadcast(neg, {rows, cols}, tensor_layout::plain, n.output(0) + "/neg_mean_rows");
  run_value d = x2;
  d.id = cx.g.add(cx.unique(n.output(0) + "/centered"), x2.id, neg.id);
  run_value ss = m;
  ss.id = cx.g.reduce(cx.unique(n.output(0) + "/sum_sq"), d.id, reduce_kind::sum_square, {1}, true);
  const run_value e = cx.graph_constant(scalar_vector(1, eps), cx.unique(n.output(0) + "/eps"));
  eltwise_stage bias_eps{stage_kind::bias, 0, 0, e.id};
  run_value inv = ss;
  inv.id = cx.g.eltwise(cx.unique(n.output(0) + "/inv_std"), ss.id,
                        {{stage_kind::scale, 1.f / float(cols)},
                         bias_eps,
                         {stage_kind::sqrt},
                         {stage_kind::reciprocal}});
  cx.set_run(n, 2, cx.reshape(inv, std::move(stat_shape), n.output(2)));
}
}  // namespace

void import_layer_norm(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"axis", "epsilon", "stash_type"});
  run_value x = cx.as_plain(cx.float_in(n, 0), n.output(0));
  const int rank = int(x.shape.size());
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", -1), rank);
  index_t rows = 1, cols = 1;
  for (int d = 0; d < rank; ++d) (d < axis ? rows : cols) *= x.shape[std::size_t(d)];
  const bool flat = axis != rank - 1;
  const std::vector<index_t> in_shape = x.shape;
  if (flat) x = cx.reshape(x, {rows, cols}, n.output(0) + "/rows");
  const run_value gamma = float_const(cx, n, 1, "scale", cols);
  tensor_id beta{};
  if (cx.has_input(n, 2)) beta = float_const(cx, n, 2, "bias B", cols).id;
  run_value y = x;
  y.id = cx.g.layer_norm(flat ? cx.unique(n.output(0) + "/ln") : cx.out_name(n), x.id, gamma.id,
                         beta, cx.attr_float(n, "epsilon", 1e-5f));
  if (flat) y = cx.reshape(y, in_shape, n.output(0));
  cx.set_run(n, 0, y);
  if (n.output_size() > 1 && (cx.output_used(n, 1) || cx.output_used(n, 2))) {
    std::vector<index_t> stat_shape = in_shape;
    for (int d = axis; d < rank; ++d) stat_shape[std::size_t(d)] = 1;
    layer_norm_statistics(cx, n, flat ? x : cx.reshape(x, {rows, cols}, n.output(0) + "/rows"),
                          std::move(stat_shape), cx.attr_float(n, "epsilon", 1e-5f));
  }
}

// InstanceNormalization: each (sample, channel) normalized over its spatial positions, then the
// per-channel scale and bias: a layer norm over the rows of [N * C, spatial] and one eltwise
// node on the [N, C, spatial, 1] nchw view (no copies).
namespace {
// Normalization over groups of channels and the spatial axes (InstanceNormalization: one channel
// per group; GroupNormalization), then a per-channel affine: layer_norm over the rows of
// [N * groups, C / groups * spatial] and one eltwise, on views of x (no copies). gamma / beta
// hold one value per channel.
void group_norm(context& cx, const node_proto& n, run_value x, index_t groups,
                const run_value& gamma, const run_value& beta, float eps) {
  const index_t N = x.shape[0], C = x.shape[1], S = numel(x.shape) / (N * C);
  const std::vector<index_t> in_shape = x.shape;
  run_value r = cx.reshape(x, {N * groups, C / groups * S}, n.output(0) + "/rows");
  run_value ln = r;
  ln.id = cx.g.layer_norm(cx.unique(n.output(0) + "/norm"), r.id, {}, {}, eps);
  run_value img = cx.reshape(ln, {N, C, S, 1}, n.output(0) + "/channels");
  run_value y = img;
  y.id = cx.g.eltwise(cx.unique(n.output(0) + "/affine"), img.id,
                      {{stage_kind::mul, 0, 0, gamma.id, true}, {stage_kind::bias, 0, 0, beta.id}});
  cx.set_run(n, 0, cx.reshape(y, in_shape, n.output(0)));
}

run_value spatial_input(context& cx, const node_proto& n) {
  run_value x = cx.as_plain(cx.float_in(n, 0), n.output(0));
  if (x.shape.size() < 3)
    cx.fail(n, "input " + shape_str(x.shape) + " must have spatial axes (3-D or more)");
  return x;
}
}  // namespace

void import_instance_norm(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"epsilon"});
  const run_value x = spatial_input(cx, n);
  const index_t C = x.shape[1];
  group_norm(cx, n, x, C, float_const(cx, n, 1, "scale", C), float_const(cx, n, 2, "bias B", C),
             cx.attr_float(n, "epsilon", 1e-5f));
}

// GroupNormalization (opset 18: scale and bias per group; opset 21 and PyTorch's layout: per
// channel; either is read by its size).
void import_group_norm(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"epsilon", "num_groups", "stash_type"});
  const run_value x = spatial_input(cx, n);
  const index_t C = x.shape[1];
  const std::int64_t G = cx.attr_int(n, "num_groups", 0);
  if (G < 1 || C % G != 0)
    cx.fail(n, "num_groups " + std::to_string(G) + " must divide the " + std::to_string(C) +
                   " channels");
  run_value affine[2];
  for (int k = 1; k <= 2; ++k) {
    const char* what = k == 1 ? "scale" : "bias";
    const const_value& c = cx.const_in(n, k, what);
    if (!c.is_float()) cx.fail(n, std::string(what) + " is " + elem_name(c.elem));
    if (c.numel() != G && c.numel() != C)
      cx.fail(n, std::string(what) + " " + shape_str(c.shape) + " must hold " + std::to_string(G) +
                     " (per group) or " + std::to_string(C) + " (per channel) values");
    const_value v = make_const(elem_float, {C});
    for (index_t ch = 0; ch < C; ++ch)
      v.f[std::size_t(ch)] = float(c.at(c.numel() == C ? ch : ch / (C / G)));
    affine[k - 1] = cx.graph_constant(v, cx.unique(n.input(k)));
  }
  group_norm(cx, n, x, G, affine[0], affine[1], cx.attr_float(n, "epsilon", 1e-5f));
}

void import_softmax(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"axis"});
  run_value x = cx.as_plain(cx.float_in(n, 0), n.output(0));
  const int rank = int(x.shape.size());
  const int axis = norm_axis(cx, n, cx.attr_int(n, "axis", cx.opset >= 13 ? -1 : 1), rank);
  const bool log = n.op_type() == "LogSoftmax";
  auto softmax = [&](std::string name, tensor_id in, int ax) {
    return log ? cx.g.log_softmax(std::move(name), in, ax) : cx.g.softmax(std::move(name), in, ax);
  };
  if (cx.opset >= 13 || axis == rank - 1) {
    run_value y = x;
    y.id = softmax(cx.out_name(n), x.id, axis);
    return cx.set_run(n, 0, y);
  }
  // Before opset 13: softmax over the flattened axes [axis, rank).
  index_t rows = 1, cols = 1;
  for (int d = 0; d < rank; ++d) (d < axis ? rows : cols) *= x.shape[std::size_t(d)];
  run_value r = cx.reshape(x, {rows, cols}, n.output(0) + "/rows");
  run_value y = r;
  y.id = softmax(cx.unique(n.output(0) + "/softmax"), r.id, -1);
  cx.set_run(n, 0, cx.reshape(y, x.shape, n.output(0)));
}

}  // namespace kfuse::onnx::detail
