#pragma once
// compile(graph, options) -> plan: the plan compiler's pipeline. Each pass lives in
// graph/passes/, each op's inference, fusion hooks and lowering in graph/ops/<op>.hpp
// (docs/executor.md, "Inside compile()").
//
//   layout_choice  an nchw graph's image region rewritten to run in nhwc (on a copy)
//   graph_checks   tensors copied (the plan owns its constants), names, quant params, ids,
//                  topological order, inputs and outputs
//   build_steps    each node validated and inferred by its op's rule, then one step per node
//   unread_steps   steps whose outputs nothing reads do not run
//   narrow_int8    an int8 plan's convs of at most 16 output channels run in f32
//   fusion         eltwise chains into producers' epilogues, batch norms folded into convs
//   qkv_merge      an attention's Q / K / V linears of one input become one linear
//   quantize       f32 -> int8 quantization absorbed into producers' epilogues
//   channel_gate   squeeze-excite multiplies into the weights of the pointwise conv after them
//   bf16           a bf16 conv's f32 input written as bf16 by the bf16 conv producing it
//   views          a strided_view read by a matmul in place (its strides become the operand's)
//   lower          each live step -> replay commands (weights packed; kernels instantiated for
//                  arch A and backend B: the only part that is a template)
//   memory_plan    caller buffers, views, in-place steps, one liveness-planned arena
//
// This header instantiates the kernels a plan may call: include it only in the translation
// units that compile plans (everything else needs kfuse/graph/graph.hpp and plan.hpp only), or
// link kfuse::runtime and include kfuse/runtime.hpp instead.
#include <algorithm>
#include <string>

#include "kfuse/arch/target_info.hpp"
#include "kfuse/graph/compile_fwd.hpp"
#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/passes/build_steps.hpp"
#include "kfuse/graph/passes/channel_gate.hpp"
#include "kfuse/graph/passes/entry_layout.hpp"
#include "kfuse/graph/passes/fusion.hpp"
#include "kfuse/graph/passes/graph_checks.hpp"
#include "kfuse/graph/passes/layout_choice.hpp"
#include "kfuse/graph/passes/lower.hpp"
#include "kfuse/graph/passes/memory_plan.hpp"
#include "kfuse/graph/passes/narrow_int8.hpp"
#include "kfuse/graph/passes/qkv_merge.hpp"
#include "kfuse/graph/passes/quantize_absorption.hpp"
#include "kfuse/graph/passes/unread_steps.hpp"
#include "kfuse/graph/passes/view_absorption.hpp"
#include "kfuse/graph/replay.hpp"
#include "kfuse/kernels/gemm/dot_rates.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Threads and split cost of a plan from its options (threads < 0 or a NaN cost are errors).
inline void choose_threads(plan_data& d, const compile_options& opt) {
  if (opt.threads < 0)
    fail("compile", "threads = " + std::to_string(opt.threads) +
                        ": must be >= 1, or 0 for the default pool's size");
  if (!(opt.fork_join_ns < 0 || opt.fork_join_ns >= 0))
    fail("compile",
         "fork_join_ns is NaN: give a cost in ns, 0 to split every node, or < 0 to measure it");
  d.threads = opt.threads > 0 ? std::min(opt.threads, pool_threads(0)) : pool_threads(0);
  if (opt.exec) d.threads = std::min(d.threads, std::max(1, opt.exec->concurrency));
  d.fork_join_ns = opt.fork_join_ns >= 0 ? opt.fork_join_ns
                   : d.threads <= 1      ? 0
                   : opt.exec            ? user_executor_fork_join_ns
                                         : default_pool().fork_join_ns();
}

/// Every pass up to (not including) lowering: arch-independent.
inline void analyze(compile_context& cx) {
  cx.d->options = cx.opt;
  choose_threads(*cx.d, cx.opt);
  copy_tensors(cx);
  check_ids(cx);
  topo_sort(cx);
  infer_nodes(cx);
  check_io(cx);
  build_steps(cx);
  cx.d->report.nodes_before = int(cx.g.nodes().size());
  drop_unread_steps(cx);
  keep_narrow_int8_in_f32(cx);
  if (cx.opt.fuse) {
    fuse_chains(cx);
    merge_qkv(cx);
    absorb_quantize(cx);
    fuse_channel_gates(cx);
    absorb_entry_layout(cx);  // before absorb_bf16: a stem read in NCHW can still write bf16
    absorb_bf16(cx);
    absorb_views(cx);
  }
}

/// compile() of the graph as given (the layout choice is made by compile_with() below), with
/// the lowerings of op set Ops (graph/compiler/op_set.hpp).
template <class A, class B, class Ops>
plan compile_as_given(const graph& g, const compile_options& options, std::string layout_note,
                      const std::string& dispatch) {
  compile_context cx(g, options);
  cx.d->run = &run_commands;
  if (!layout_note.empty()) cx.d->report.notes.push_back(std::move(layout_note));
  cx.int8_gemm = graph_ops::gemm_available<i8, A, B>();
  cx.int8_bf16_outputs = graph_ops::int8_bf16_outputs<A, B>();
  cx.conv_gates = set_builds<Ops>(runtime_family::conv2d_gated);
  cx.few_channel_convs = set_builds<Ops>(runtime_family::conv2d_few_channel);
  if (cx.opt.prec == precision::int8 && !cx.int8_gemm) {
    // An int8 plan asked of an arch without an int8 dot product: the nodes that inherit the
    // plan's precision run in f32 and the report says so (a node that asks for int8 itself
    // still fails, naming it).
    cx.opt.prec = precision::f32;
    cx.d->report.notes.push_back(
        "int8: arch " + std::string(A::name) +
        " has no int8 dot product (vpdpbusd or vpmaddubsw: x86 from avx2 up); "
        "linear and conv nodes of the plan's precision run in f32");
  }
  if (cx.opt.prec == precision::bf16 && !A::native_bf16_dot && !cx.opt.emulated_bf16) {
    // Emulated bf16 only rounds: the same FMAs plus the operands' conversions (docs/design.md).
    cx.opt.prec = precision::f32;
    cx.d->report.notes.push_back(
        "bf16: arch " + std::string(A::name) +
        " has no bf16 dot product (vdpbf16ps): nodes of the plan's precision run in f32, faster "
        "here than emulated bf16 (compile_options::emulated_bf16 = true emulates it)");
  }
  if (cx.opt.prec == precision::bf16 && !graph_ops::gemm_available<bf16, A, B>())
    fail("compile",
         "compile_options::emulated_bf16 on arch " + std::string(A::name) +
             ", which has no bf16 dot product (vdpbf16ps): kfuse::runtime's tiers hold no "
             "emulated bf16 kernels (f32 is faster there, and exact); compile header-only, "
             "kfuse::compile<kfuse::arch::" +
             std::string(A::name) + ">(g, options), for bf16's numerics on this CPU");
  if (cx.opt.prec == precision::bf16 && A::native_bf16_dot && !cx.opt.emulated_bf16) {
    // A vdpbf16ps no faster than the f32 FMAs: bf16 saves bytes, not arithmetic, and its
    // conversions cost more than that (bf16 plans 1.0-1.5x the f32 time on such a Xeon). The
    // probe runs once per process, on the first bf16 plan.
    // AMX tiles (kernels/gemm/amx.hpp) run the convs and linears at ~14x the vdpbf16ps rate:
    // bf16 pays there whatever vdpbf16ps does.
    if (gemm<bf16, A, epilogue<>, B>::amx_active()) {
      cx.d->report.notes.push_back(
          "bf16: dense convs and linears run on AMX tiles (tdpbf16ps; KFUSE_AMX=0 turns them off)");
    } else if (const bf16_dot_speed& s = cached_bf16_dot_speed(); !s.pays()) {
      cx.opt.prec = precision::f32;
      cx.d->report.notes.push_back(
          "bf16: this CPU's bf16 dot product (vdpbf16ps) is no faster than its f32 FMAs (probed " +
          std::to_string(int(s.bf16 + 0.5)) + " against " + std::to_string(int(s.f32 + 0.5)) +
          " GFLOP/s per core): nodes of the plan's precision run in f32, faster here "
          "(compile_options::emulated_bf16 = true keeps bf16)");
    }
  }
  if (cx.opt.prec == precision::int8 && cx.int8_gemm &&
      detail::int8_weight_limit<A, simd::vec_for<A, B>>() < 128)
    cx.d->report.notes.push_back(
        "int8: arch " + std::string(A::name) +
        " has no vpdpbusd: its int8 linears and convs run on vpmaddubsw, with weights quantized "
        "to 7 bits (|q| <= 63, per output channel) so that its 16-bit pair sums cannot saturate");
  analyze(cx);
  lower_steps<A, B, Ops>(cx);
  target_info t = make_target_info<A>(simd::impl_name<A, B>());
  t.dispatch = dispatch;
  set_target(*cx.d, t);
  plan_memory(*cx.d, cx.views);
  return plan(std::shared_ptr<const plan_data>(cx.d));
}

/// compile(): the layout choice, then compile_as_given. `dispatch`: how kfuse::runtime chose A
/// (target_info::dispatch).
template <class A, class B, class Ops>
plan compile_with(const graph& g, const compile_options& options,
                  const std::string& dispatch = {}) {
  detail::layout_rewrite r;
  std::string kept;
  if (options.choose_layout && detail::choose_layout(g, r)) {
    try {
      return compile_as_given<A, B, Ops>(
          r.g, options,
          "layout: " + std::to_string(r.region_nodes) + " image nodes of the nchw graph run in " +
              "nhwc (" + std::to_string(r.conversions) + " layout conversions at the edges; " +
              "compile_options::choose_layout = false keeps the declared layouts)",
          dispatch);
    } catch (const error& e) {
      // The graph as declared reports its own errors, naming the user's nodes.
      kept = std::string("layout: declared layouts kept (in nhwc: ") + e.what() + ")";
    }
  }
  return compile_as_given<A, B, Ops>(g, options, std::move(kept), dispatch);
}

}  // namespace detail

/// Compiles a graph into a plan for arch A and backend B, every op (declared in compile_fwd.hpp).
template <class A, class B>
requires arch::tag<A> plan compile(const graph& g, const compile_options& options) {
  return detail::compile_with<A, B, detail::all_ops>(g, options);
}

/// Compiles a graph with only the ops of set Ops instantiated (compile<ops<...>>(g)): a graph
/// holding another op fails with a kfuse::error naming the node and the op.
template <class Ops, class A, class B>
requires op_set<Ops> plan compile(const graph& g, const compile_options& options) {
  return detail::compile_with<A, B, Ops>(g, options);
}

KFUSE_END_NAMESPACE
