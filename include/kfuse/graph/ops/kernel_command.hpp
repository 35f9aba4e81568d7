#pragma once
// The one graph adapter of the kernel contract (kernels/kernel_contract.hpp): any kernel K
// that follows it runs in a plan through kernel_cmd<K, In, Out>, with its packed state, its
// tensors' extents, the step's fused chain and its slice of the arena as workspace. An op rule
// lowers onto a kernel with add_kernel_command(); with_elem / with_layout pick the
// instantiation from a tensor's dtype and layout instead of a hand-written switch per op.
//
// A kernel K provides, besides the contract:
//   K::extents                       what a view needs besides its pointer (dims4; a matrix's)
//   K::template view<T>              {T* data, extents}: tensor_view<T, L> or matrix_view<T>
//   K::epilogue_type                 its Ep: epilogue<>, epilogue<chain>, or chain + quantize
//   K::run(view<const In>, packed, view<Out>, Ep, workspace, run_options, zero point)
#include <memory>
#include <type_traits>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/layout/tensor_view.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// A step's parameter block for kernel K.
template <class K>
struct kernel_params {
  typename K::packed packed;
  typename K::extents in{}, out{};
  chain_list stages;
  std::int32_t in_zero_point = 0;  // integer inputs: their zero point
  quant_params out_q{};            // an int8 output (quantize fused): its scale and zero point
};

/// Builds K's epilogue from the step's chain: none (epilogue<>), the chain, or the chain then
/// the fused quantize of an int8 output.
template <class Ep>
struct graph_epilogue;
template <>
struct graph_epilogue<epilogue<>> {
  static KFUSE_INLINE epilogue<> make(const chain&, const quant_params&) { return {}; }
};
template <>
struct graph_epilogue<epilogue<chain>> {
  static KFUSE_INLINE epilogue<chain> make(const chain& c, const quant_params&) {
    return epilogue<chain>{c};
  }
};
template <class E>
struct graph_epilogue<epilogue<chain, quantize<E>>> {
  static KFUSE_INLINE epilogue<chain, quantize<E>> make(const chain& c, const quant_params& q) {
    return {c, quantize<E>{q}};
  }
};

/// A command's chain stage: the step's stages, their operands in c.in[1..3].
inline chain command_chain(const command& c, const chain_list& stages) {
  return chain{&stages,
               {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
                static_cast<const float*>(c.in[3])}};
}
/// A command's slice of the arena.
inline workspace command_workspace(const command& c) {
  return workspace{static_cast<std::byte*>(c.workspace), c.workspace_bytes};
}

/// The replay command of every contract kernel: out = K(in) with the step's chain operands in
/// c.in[1..3] and its workspace slice.
template <class K, class In, class Out>
void kernel_cmd(const command& c) {
  const auto& p = *static_cast<const kernel_params<K>*>(c.params);
  K::run(typename K::template view<const In>{static_cast<const In*>(c.in[0]), p.in}, p.packed,
         typename K::template view<Out>{static_cast<Out*>(c.out), p.out},
         graph_epilogue<typename K::epilogue_type>::make(command_chain(c, p.stages), p.out_q),
         command_workspace(c), run_options{c.threads}, p.in_zero_point);
}

/// Finishes command c of a step lowered onto K (its input, output and chain operands set):
/// the parameter block, the entry point, the threads (from the step's cost in `info`) and the
/// workspace K needs for `problem` on those threads.
template <class K, class In, class Out>
void add_kernel_command(detail::compile_context& cx, std::shared_ptr<kernel_params<K>> p,
                        const typename K::problem& problem, detail::plan_command c,
                        const step_info& info, std::vector<detail::plan_command>& cmds) {
  static_assert(kernel_contract<K>, "kfuse: the kernel does not follow the kernel contract");
  c.fn = &kernel_cmd<K, In, Out>;
  c.threads = cx.threads_for(info.bytes, info.flops);
  c.workspace_bytes = K::workspace_size(problem, c.threads);
  c.params = cx.own(p);
  cmds.push_back(c);
}

/// Calls f.template operator()<Elem>() with the element tag of dtype t among Elems (an error
/// otherwise: infer() has already rejected such a tensor, naming the node).
template <class... Elems, class F>
void with_elem(dtype t, F&& f) {
  const bool found =
      ((dtype_of<storage_t<Elems>>() == t ? (f.template operator()<Elems>(), true) : false) || ...);
  if (!found) detail::fail("graph", "no kernel for element type " + std::string(dtype_name(t)));
}

/// Calls f.template operator()<L>() with nhwc or nchw.
template <class F>
void with_layout(tensor_layout l, F&& f) {
  if (l == tensor_layout::nhwc)
    f.template operator()<nhwc>();
  else
    f.template operator()<nchw>();
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
