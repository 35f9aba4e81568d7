#pragma once
// attention as a graph op: fused softmax(Q.K^T * scale + bias) . V over heads, Q / K / V and the
// output as [batch, sequence, heads, head_dim] (4-D plain, or the nchw label a reshape gives: the
// same memory order) so that a linear's output is read with no transpose. The ONNX importer
// fuses PyTorch's unfused export (Transpose, MatMul, Div, Add mask, Softmax, MatMul, Transpose)
// into it; the bias (optional) broadcasts to [batch, heads, queries, keys]. Q, K, V and the
// output are f32, or all bf16 (half the bytes of a bf16 KV cache). The node's precision (a bf16
// or int8 plan's by default) picks the products' arithmetic: bf16 on vdpbf16ps where the arch
// has it (twice the f32 rate; the linears' int8 stays for the linears), f32 otherwise.
#include <string>

#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/attention.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

template <class K>
struct attention_step_params {
  typename K::packed packed;
  std::array<index_t, 3> column{};  // Q, K and V's first element (a merged projection's columns)
};

template <class K, class T>
void attention_cmd(const command& c) {
  const auto& p = *static_cast<const attention_step_params<K>*>(c.params);
  K::run(static_cast<const T*>(c.in[0]) + p.column[0], static_cast<const T*>(c.in[1]) + p.column[1],
         static_cast<const T*>(c.in[2]) + p.column[2], static_cast<const float*>(c.in[3]), p.packed,
         static_cast<T*>(c.out), command_workspace(c), run_options{c.threads});
}

/// Lowers step s of an attention-type node through Rule::lower_with<K> with the kernel its
/// precision picks: bf16 products where the arch has a native bf16 dot product and the node is
/// not f32, f32 products otherwise (attention and cached_attention).
template <class Rule, class A, class B>
void lower_attention(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                     step_info& info, std::vector<detail::plan_command>& cmds) {
  if constexpr (A::native_bf16_dot)
    if (cx.precision_of(n) != precision::f32)
      return Rule::template lower_with<attention_kernel<A, B, bf16>>(cx, s, n, info, cmds);
  Rule::template lower_with<attention_kernel<A, B>>(cx, s, n, info, cmds);
}

struct attention_rule : op_rule {
  static constexpr op_kind kind = op_kind::attention;
  using attributes = attention_params;
  static bool optional_slot(std::size_t slot) { return slot == 3; }

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& q = cx.T(n.inputs[0]);
    const plan_tensor& k = cx.T(n.inputs[1]);
    const plan_tensor& v = cx.T(n.inputs[2]);
    for (const plan_tensor* t : {&q, &k, &v}) {
      if ((t->type != dtype::f32 && t->type != dtype::bf16) || t->type != q.type)
        cx.fail_node(n, "'" + t->name + "' is " + std::string(dtype_name(t->type)) +
                            "; attention reads Q, K and V all f32 or all bf16");
      if (t->shape.size() != 4 || t->layout == tensor_layout::nhwc)
        cx.fail_node(n, "'" + t->name + "' " + cx.shape_str(t->shape) +
                            " must be [batch, sequence, heads, head_dim]");
    }
    if (k.shape != v.shape)
      cx.fail_node(
          n, "keys " + cx.shape_str(k.shape) + " and values " + cx.shape_str(v.shape) + " differ");
    if (k.shape[0] != q.shape[0] || k.shape[3] != q.shape[3])
      cx.fail_node(n, "queries " + cx.shape_str(q.shape) + " and keys " + cx.shape_str(k.shape) +
                          " differ in batch or head dimension");
    if (q.shape[2] % k.shape[2] != 0)
      cx.fail_node(n, std::to_string(q.shape[2]) + " query heads do not group over " +
                          std::to_string(k.shape[2]) + " key / value heads");
    if (q.shape[1] == 0 || k.shape[1] == 0) cx.fail_node(n, "a sequence of length 0");
    if (!std::isfinite(n.attr<attention_params>().scale))
      cx.fail_node(n, "the scale is not finite");
    if (n.inputs.size() > 3 && n.inputs[3].index >= 0) {
      const plan_tensor& b = cx.T(n.inputs[3]);
      const std::vector<index_t> full = {q.shape[0], q.shape[2], q.shape[1], k.shape[1]};
      if (b.type != dtype::f32 || b.layout == tensor_layout::nhwc || b.shape.size() > 4 ||
          !broadcasts_to(b.shape, full))
        cx.fail_node(n, "the bias '" + b.name + "' " + cx.shape_str(b.shape) + " (" +
                            std::string(dtype_name(b.type)) + ") does not broadcast to " +
                            cx.shape_str(full) + " [batch, heads, queries, keys] in f32");
    }
    cx.set_out(n, q.shape, q.type, tensor_layout::plain);
  }

  static bool broadcasts_to(const std::vector<index_t>& s, const std::vector<index_t>& full) {
    const std::size_t off = full.size() - s.size();
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] != 1 && s[i] != full[off + i]) return false;
    return true;
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    lower_attention<attention_rule, A, B>(cx, s, n, info, cmds);
  }

  template <class K>
  static void lower_with(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                         step_info& info, std::vector<detail::plan_command>& cmds) {
    const attention_params& attr = n.attr<attention_params>();
    // The step's inputs: x = Q, others = K, V and the bias when there is one; after the Q/K/V
    // merge all three are one projection [B, S, Nq + Nk + Nv] read at their first columns.
    const bool merged = s.qkv_shape_of[0] >= 0;
    const plan_tensor& q = cx.T(merged ? s.qkv_shape_of[0] : s.x);
    const plan_tensor& k = cx.T(merged ? s.qkv_shape_of[1] : s.others[0]);
    attention_problem pr = attention_problem::bshd(q.shape[0], q.shape[2], q.shape[1], k.shape[1],
                                                   q.shape[3], k.shape[2]);
    if (merged) {
      const index_t row = cx.T(s.x).shape.back();
      pr.q_strides = {pr.q_len * row, pr.head_dim, row};
      pr.k_strides = {pr.kv_len * row, pr.head_dim, row};
      pr.v_strides = pr.k_strides;
    }
    pr.scale = attr.scale;
    pr.causal = attr.causal;
    detail::plan_command c;
    c.in[0] = s.x;
    c.in[1] = s.others[0];
    c.in[2] = s.others[1];
    double bias_bytes = 0;
    if (s.others.size() > 2) {
      const plan_tensor& b = cx.T(s.others[2]);
      const std::size_t off = 4 - b.shape.size();
      index_t stride = 1;
      for (std::size_t i = 4; i-- > 0;) {
        const index_t dim = i >= off ? b.shape[i - off] : 1;
        pr.bias_strides[i] = dim == 1 ? 0 : stride;
        stride *= dim;
      }
      c.in[3] = s.others[2];
      bias_bytes = double(b.bytes);
    }
    auto p = std::make_shared<attention_step_params<K>>();
    p->packed = K::initialize(pr);
    if (merged) p->column = s.qkv_column;
    const double sq = double(pr.q_len), sk = double(pr.kv_len);
    info.flops = 4.0 * double(pr.batch * pr.heads) * sq * sk * double(pr.head_dim);
    info.bytes = double(q.bytes) + 2.0 * double(k.bytes) + bias_bytes + double(cx.T(s.out).bytes);
    const bool bf16_io = cx.T(s.x).type == dtype::bf16;
    const bool bf16_math = K::G == 2;
    info.kernel = std::string(bf16_math ? "attention bf16 "
                              : bf16_io ? "attention bf16 in / f32 "
                                        : "attention f32 ") +
                  std::string(K::base::micro_kernel()) + (pr.causal ? " causal" : "") +
                  (bias_bytes > 0 ? " + bias" : "") + (merged ? " (Q, K, V in place)" : "");
    c.out = s.out;
    c.fn = bf16_io ? &attention_cmd<K, bf16_t> : &attention_cmd<K, float>;
    c.begin = 0;
    c.end = 1;
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.workspace_bytes = K::workspace_size(pr, c.threads);
    c.params = cx.own(std::move(p));
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
