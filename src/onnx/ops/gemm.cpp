// Gemm and MatMul with a constant weight operand -> the graph's linear (weights stored as
// PyTorch's [N, K]; alpha, beta and C folded into the weights, the bias or an added constant).
// MatMul of two run-time tensors (or with a batched constant) -> the graph's matmul.
#include "kfuse/graph/matmul_shape.hpp"
#include "ops.hpp"

namespace kfuse::onnx::detail {

namespace {

// [K, N] (trans = false) or [N, K] (trans = true) float constant -> [N, K] times alpha.
const_value weights_nk(const const_value& b, bool trans, double alpha) {
  const index_t r = b.shape[0], c = b.shape[1];
  const index_t n = trans ? r : c, k = trans ? c : r;
  const_value w = make_const(elem_float, {n, k});
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < k; ++j)
      w.f[std::size_t(i * k + j)] = float(alpha * b.at(trans ? i * c + j : j * c + i));
  return w;
}

run_value linear(context& cx, const node_proto& n, const run_value& x, const const_value& w,
                 tensor_id bias, const std::string& name) {
  run_value y = x;
  const run_value wt = cx.graph_constant(w, cx.unique(n.output(0) + "/weight"));
  y.id = cx.g.linear(name, x.id, wt.id, bias);
  y.shape.back() = w.shape[0];
  return y;
}

}  // namespace

void import_gemm(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"alpha", "beta", "transA", "transB", "broadcast"});
  run_value a = cx.as_plain(cx.float_in(n, 0), n.output(0));
  if (a.shape.size() != 2) cx.fail(n, "A must be 2-D, not " + shape_str(a.shape));
  if (cx.attr_int(n, "transA", 0) != 0) {  // the GEMM reads A row-major: one strided copy of A^T
    run_value t = a;
    t.id = cx.g.strided_view(cx.unique(n.output(0) + "/a_t"), a.id, {a.shape[1], a.shape[0]}, 0,
                             {1, a.shape[1]});
    t.shape = {a.shape[1], a.shape[0]};
    a = t;
  }
  const const_value& b = cx.const_in(n, 1, "B");
  if (!b.is_float() || b.shape.size() != 2) cx.fail(n, "B must be a 2-D float constant");
  const bool tb = cx.attr_int(n, "transB", 0) != 0;
  const float alpha = cx.attr_float(n, "alpha", 1.f), beta = cx.attr_float(n, "beta", 1.f);
  const const_value w = weights_nk(b, tb, alpha);
  const index_t M = a.shape[0], N = w.shape[0], K = w.shape[1];
  if (a.shape[1] != K)
    cx.fail(n, "A " + shape_str(a.shape) + " and B " + shape_str(b.shape) +
                   (tb ? " (transB)" : "") + " do not multiply");
  tensor_id bias{};
  const_value full;  // a C that varies along M: added after the product
  bool add_full = false;
  if (cx.has_input(n, 2) && beta != 0.f) {
    if (!cx.is_const(n, 2)) cx.fail(n, "C must be a constant");
    const const_value& c = cx.in(n, 2).c;
    std::vector<index_t> out;
    if (!broadcast_shape({M, N}, c.shape, out) || out != std::vector<index_t>{M, N})
      cx.fail(n,
              "C " + shape_str(c.shape) + " does not broadcast to [M, N] = " + shape_str({M, N}));
    std::vector<index_t> cs(2 - std::min<std::size_t>(2, c.shape.size()), 1);
    cs.insert(cs.end(), c.shape.begin(), c.shape.end());
    if (cs[0] == 1) {
      const_value bv = make_const(elem_float, {N});
      for (index_t j = 0; j < N; ++j) bv.f[std::size_t(j)] = float(beta * c.at(cs[1] == 1 ? 0 : j));
      bias = cx.graph_constant(bv, cx.unique(n.output(0) + "/bias")).id;
    } else {
      full = make_const(elem_float, {M, N});
      for (index_t k = 0; k < M * N; ++k)
        full.f[std::size_t(k)] = float(beta * c.at(broadcast_index(k, {M, N}, c.shape)));
      add_full = true;
    }
  }
  run_value y =
      linear(cx, n, a, w, bias, add_full ? cx.unique(n.output(0) + "/linear") : cx.out_name(n));
  if (add_full) {
    const run_value ct = cx.graph_constant(full, cx.unique(n.output(0) + "/C"));
    y.id = cx.g.add(cx.out_name(n), y.id, ct.id);
  }
  cx.set_run(n, 0, y);
}

void import_matmul(context& cx, const node_proto& n) {
  cx.only_attrs(n, {});
  const bool weight = cx.is_const(n, 1) && cx.in(n, 1).c.shape.size() <= 2;
  if (!weight) {
    // Two run-time operands (or a batched / leading constant): the graph's matmul, whose
    // batched GEMM broadcasts the batch dimensions without copying.
    const run_value a = cx.as_plain(cx.float_in(n, 0), n.output(0) + "/a");
    const run_value b = cx.as_plain(cx.float_in(n, 1), n.output(0) + "/b");
    const kfuse::matmul_geometry g = kfuse::matmul_geometry_of(a.shape, b.shape);
    if (!g.error.empty())
      cx.fail(n, "A " + shape_str(a.shape) + " and B " + shape_str(b.shape) + ": " + g.error);
    run_value y;
    y.id = cx.g.matmul(cx.out_name(n), a.id, b.id);
    y.shape = g.out_shape;
    cx.set_run(n, 0, y);
    return;
  }
  run_value a = cx.as_plain(cx.float_in(n, 0), n.output(0));
  const const_value& b = cx.const_in(n, 1, "B");
  if (!b.is_float()) cx.fail(n, "B is " + elem_name(b.elem));
  const bool vec_b = b.shape.size() == 1;
  const_value b2 = b;
  if (vec_b) b2.shape = {b.shape[0], 1};
  const_value w = weights_nk(b2, false, 1.0);
  const bool vec_a = a.shape.size() == 1;
  if (vec_a) a = cx.reshape(a, {1, a.shape[0]}, n.output(0) + "/row");
  if (a.shape.back() != w.shape[1])
    cx.fail(n, "A " + shape_str(a.shape) + " and B " + shape_str(b.shape) + " do not multiply");
  const bool reshape_after = vec_a || vec_b;
  run_value y =
      linear(cx, n, a, w, {}, reshape_after ? cx.unique(n.output(0) + "/linear") : cx.out_name(n));
  if (reshape_after) {
    std::vector<index_t> s = y.shape;
    if (vec_b) s.pop_back();
    if (vec_a) s.erase(s.end() - (vec_b ? 1 : 2));
    y = cx.reshape(y, s, n.output(0));
  }
  cx.set_run(n, 0, y);
}

void fold_matmul(context& cx, const node_proto& n) {
  const const_value& a = cx.in(n, 0).c;
  const const_value& b = cx.in(n, 1).c;
  const kfuse::matmul_geometry g = kfuse::matmul_geometry_of(a.shape, b.shape);
  if (!g.error.empty())
    cx.fail(n, "A " + shape_str(a.shape) + " and B " + shape_str(b.shape) + ": " + g.error);
  const batched_gemm_problem& p = g.problem;
  const_value y = make_const(a.elem, g.out_shape);
  const index_t batches = p.batches();
  for (index_t bi = 0; bi < batches; ++bi) {
    const index_t ao = p.batch_offset(p.a_batch, bi), bo = p.batch_offset(p.b_batch, bi);
    for (index_t i = 0; i < p.m; ++i)
      for (index_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (index_t k = 0; k < p.k; ++k) s += a.at(ao + i * p.k + k) * b.at(bo + k * p.n + j);
        store(y, (bi * p.m + i) * p.n + j, s);
      }
  }
  cx.set_const(n, 0, std::move(y));
}

}  // namespace kfuse::onnx::detail
