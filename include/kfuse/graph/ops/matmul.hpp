#pragma once
// matmul as a graph op: NumPy / ONNX MatMul of two run-time tensors, a [..., M, K] . b [..., K, N]
// -> [..., M, N] with broadcast batch dimensions (a 1-D a is a row, a 1-D b a column, and that
// dimension leaves the result). Through batched_gemm: no copy of either operand for broadcasting
// (batch stride 0), any following eltwise chain in the epilogue (scale, mask add, activation).
// A constant b is a linear (the importer's choice: packed once at compile time).
#include "kfuse/graph/matmul_shape.hpp"
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/kernel_command.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/gemm/batched_gemm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// A matmul step's parameter block: the kernel's problem and the fused chain.
template <class K>
struct matmul_step_params {
  typename K::packed packed;
  chain_list stages;
  index_t a_offset = 0, b_offset = 0;  // operands read through an absorbed view
};

/// out = chain(a . b): a, b in c.in[0..1], the chain's operands in c.in[2..3].
template <class K>
void matmul_cmd(const command& c) {
  const auto& p = *static_cast<const matmul_step_params<K>*>(c.params);
  const chain ch{&p.stages,
                 {static_cast<const float*>(c.in[2]), static_cast<const float*>(c.in[3]), nullptr}};
  K::run(static_cast<const float*>(c.in[0]) + p.a_offset,
         static_cast<const float*>(c.in[1]) + p.b_offset, p.packed, static_cast<float*>(c.out),
         epilogue<chain>{ch}, command_workspace(c), run_options{c.threads});
}

struct matmul_rule : op_rule {
  static constexpr op_kind kind = op_kind::matmul;
  using attributes = matmul_params;
  static constexpr bool by_precision = true;
  static constexpr bool absorbs_chain = true;
  /// Slots 0 and 1 of the command are a and b: two left for fused operands.
  static constexpr int chain_operand_slots = 2;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& a = cx.T(n.inputs[0]);
    const plan_tensor& b = cx.T(n.inputs[1]);
    for (const plan_tensor* t : {&a, &b}) {
      if (t->type != dtype::f32)
        cx.fail_node(n, "operand '" + t->name + "' is " + std::string(dtype_name(t->type)) +
                            "; matmul reads f32 (cast it first)");
      if (t->layout != tensor_layout::plain)
        cx.fail_node(n, "operand '" + t->name + "' is " + std::string(layout_name(t->layout)) +
                            "; matmul reads plain tensors");
    }
    const kfuse::matmul_geometry g = kfuse::matmul_geometry_of(a.shape, b.shape);
    if (!g.error.empty())
      cx.fail_node(n, "operands '" + a.name + "' " + cx.shape_str(a.shape) + " and '" + b.name +
                          "' " + cx.shape_str(b.shape) + ": " + g.error);
    if (g.problem.k == 0) cx.fail_node(n, "the inner dimension is 0");
    cx.set_out(n, g.out_shape, dtype::f32, tensor_layout::plain);
  }

  template <class A, class B, class Set = detail::all_ops>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    // bf16 plans run the products on bf16 (vdpbf16ps where the arch has it); int8 keeps them in
    // f32 (the linears around them carry the int8 speed-up).
    if (cx.precision_of(n) == precision::bf16) {
      if constexpr (Set::runs_in(precision::bf16))
        return lower_recipe<bf16, A, B>(cx, s, info, cmds, "bf16");
      fail_precision<Set>(cx, n, precision::bf16);
    }
    if constexpr (Set::runs_in(precision::f32) || Set::runs_in(precision::int8))
      return lower_recipe<f32, A, B>(cx, s, info, cmds, "f32");
    fail_precision<Set>(cx, n, precision::f32);
  }

  template <class Recipe, class A, class B>
  static void lower_recipe(detail::compile_context& cx, const detail::step& s, step_info& info,
                           std::vector<detail::plan_command>& cmds, std::string_view recipe) {
    using K = batched_gemm<Recipe, A, epilogue<chain>, B>;
    // An operand with an absorbed view (passes/view_absorption) is the view's shape read
    // through its strides from the view's input.
    const strided_view_params* views[2] = {nullptr, nullptr};
    for (int i = 0; i < 2; ++i)
      if (s.views[std::size_t(i)] >= 0)
        views[i] = &cx.g.nodes()[std::size_t(s.views[std::size_t(i)])].attr<strided_view_params>();
    const std::vector<index_t>& as = views[0] ? views[0]->shape : cx.T(s.x).shape;
    const std::vector<index_t>& bs = views[1] ? views[1]->shape : cx.T(s.others[0]).shape;
    const kfuse::matmul_geometry g =
        kfuse::matmul_geometry_of(as, bs, views[0] ? views[0]->strides : std::vector<index_t>{},
                                  views[1] ? views[1]->strides : std::vector<index_t>{});
    auto p = std::make_shared<matmul_step_params<K>>();
    p->packed = K::initialize(g.problem);
    p->a_offset = views[0] ? views[0]->offset : 0;
    p->b_offset = views[1] ? views[1]->offset : 0;
    detail::plan_command c;
    c.in[0] = s.x;
    c.in[1] = s.others[0];
    c.out = s.out;
    p->stages = cx.make_chain(s.chain, c, 2);
    const double batches = double(g.problem.batches());
    info.flops = 2.0 * batches * double(g.problem.m) * double(g.problem.n) * double(g.problem.k);
    info.bytes = 4.0 * double(shape_numel(as) + shape_numel(bs)) + double(cx.T(s.out).bytes);
    info.kernel = "batched_gemm " + std::string(recipe) + " " + K::base::micro_kernel() +
                  cx.chain_suffix(s, s.chain);
    c.fn = &matmul_cmd<K>;
    c.begin = 0;
    c.end = 1;
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.workspace_bytes = K::workspace_size(g.problem, c.threads);
    c.params = cx.own(std::move(p));
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
