#pragma once
// Q/K/V merge: the three projections of an attention that read the same input (the linears
// before its [B, S, H, d] reshapes, as a transformer layer is built and exported) become one
// linear with their weights (and biases) concatenated, and the attention reads its three column
// ranges in place through strides. One GEMM with N = Nq + Nk + Nv streams the input once and
// keeps the register tiles busy on wider panels, instead of three launches over the same rows.
//
// Taken when each of Q, K and V is a reshape read only by the attention, of a linear read only
// by that reshape; the three linears share their input, precision and K, have constant weights,
// and no epilogue beyond their own bias (a fused activation or quantize keeps them apart); each
// reshape splits the linear's rows into (B, S) and its columns into (heads, head_dim).
#include <array>
#include <string>
#include <vector>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/passes/step_uses.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The linear step under attention operand `t` (through reshapes, each read only by the next
/// and the last by the attention: the importer adds one that relabels the layout), with the
/// reshape steps in `r`, or -1.
inline int qkv_projection(const compile_context& cx, const step_uses& u, std::int32_t t,
                          std::vector<int>& r) {
  r.clear();
  for (int p = u.single_use_producer(cx, t);
       p >= 0 && cx.steps[std::size_t(p)].op == op_kind::reshape &&
       cx.steps[std::size_t(p)].chain.empty();
       p = u.single_use_producer(cx, cx.steps[std::size_t(p)].x))
    r.push_back(p);
  if (r.empty()) return -1;
  const step& rs = cx.steps[std::size_t(r.front())];    // the reshape the attention reads
  const step& first = cx.steps[std::size_t(r.back())];  // the one reading the linear
  const int l = u.single_use_producer(cx, first.x);
  if (l < 0) return -1;
  const step& ls = cx.steps[std::size_t(l)];
  if (ls.op != op_kind::linear || ls.others.size() != 1) return -1;
  if (cx.T(ls.others[0]).where != plan_tensor::storage::constant) return -1;
  // Nothing fused beyond the linear's own bias (a constant, one value per column).
  if (ls.chain.size() > 1) return -1;
  if (ls.chain.size() == 1 && (ls.chain[0].kind != stage_kind::bias || ls.chain[0].operand < 0 ||
                               cx.T(ls.chain[0].operand).where != plan_tensor::storage::constant))
    return -1;
  // [rows..., N] -> [B, S, H, d]: rows B x S, columns H x d.
  const plan_tensor& y = cx.T(ls.out);
  const plan_tensor& v = cx.T(rs.out);
  if (y.type != dtype::f32 || v.shape.size() != 4 || v.layout == tensor_layout::nhwc) return -1;
  const index_t n = y.shape.back(), rows = shape_numel(y.shape) / std::max<index_t>(n, 1);
  if (v.shape[0] * v.shape[1] != rows || v.shape[2] * v.shape[3] != n) return -1;
  return l;
}

inline void merge_qkv(compile_context& cx) {
  step_uses u(cx);
  for (step& a : cx.steps) {
    if (!a.alive || a.op != op_kind::attention || a.others.size() < 2) continue;
    // (An attention merged already reads one tensor three times.)
    const std::array<std::int32_t, 3> in = {a.x, a.others[0], a.others[1]};
    if (in[0] == in[1] || in[1] == in[2] || in[0] == in[2]) continue;
    std::array<std::vector<int>, 3> r;
    std::array<int, 3> l{};
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) ok = (l[i] = qkv_projection(cx, u, in[i], r[i])) >= 0;
    if (!ok) continue;
    const step& lq = cx.steps[std::size_t(l[0])];
    const node_desc& nq = cx.node_of(lq);
    const index_t K = cx.T(lq.others[0]).shape[1];
    bool any_bias = false;
    for (int i = 0; i < 3; ++i) {
      const step& li = cx.steps[std::size_t(l[i])];
      ok = ok && li.x == lq.x && cx.T(li.others[0]).shape[1] == K &&
           cx.precision_of(cx.node_of(li)) == cx.precision_of(nq);
      any_bias = any_bias || !li.chain.empty();
    }
    if (!ok) continue;
    // The merged weights [Nq + Nk + Nv, K] and bias (zeros for a projection without one).
    std::vector<float> w, bias;
    std::array<index_t, 3> column{};
    index_t total = 0;
    std::string names;
    for (int i = 0; i < 3; ++i) {
      const step& li = cx.steps[std::size_t(l[i])];
      const index_t n = cx.T(li.out).shape.back();
      column[std::size_t(i)] = total;
      total += n;
      const std::vector<float> wi = cx.constant_f32(li.others[0]);
      w.insert(w.end(), wi.begin(), wi.end());
      const std::vector<float> bi = li.chain.empty() ? std::vector<float>(std::size_t(n), 0.f)
                                                     : cx.constant_f32(li.chain[0].operand);
      bias.insert(bias.end(), bi.begin(), bi.end());
      names += (i ? ", " : "") + cx.node_of(li).name;
    }
    std::vector<index_t> shape = cx.T(lq.out).shape;
    shape.back() = total;
    step& m = cx.steps[std::size_t(l[0])];
    const std::string base = nq.name + "+kv";
    m.others[0] = cx.new_constant(base + ".weight", {total, K}, std::move(w));
    m.chain.clear();
    if (any_bias)
      m.chain.push_back(
          {stage_kind::bias, 0, 0, cx.new_constant(base + ".bias", {total}, bias), true});
    m.out = cx.new_tensor(base, shape, dtype::f32);
    for (int i = 0; i < 3; ++i) {
      if (i > 0) {
        step& li = cx.steps[std::size_t(l[i])];
        li.alive = false;
        m.fused.push_back(cx.node_of(li).name);
      }
      for (int ri : r[std::size_t(i)]) {
        cx.steps[std::size_t(ri)].alive = false;
        a.fused.push_back(cx.node_of(cx.steps[std::size_t(ri)]).name);
      }
      a.qkv_shape_of[std::size_t(i)] = cx.steps[std::size_t(r[std::size_t(i)].front())].out;
    }
    a.x = a.others[0] = a.others[1] = m.out;
    a.qkv_column = column;
    cx.d->report.fused.push_back("merged " + names + " (linear) into one linear of " +
                                 std::to_string(total) + " outputs; " + cx.node_of(a).name +
                                 " (attention) reads its Q, K and V columns in place");
    u.count(cx);
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
