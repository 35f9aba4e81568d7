#pragma once
// plan: a compiled graph (compile() in kfuse/graph/compile.hpp). It owns the packed weights,
// the memory plan and one parameter block per step; record() turns it into a replay_buffer.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kfuse/arch/target_info.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/graph/names.hpp"

namespace kfuse {
struct executor;
}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

class graph;
class replay_buffer;

/// One executable step of a plan (a node, or a producer with the nodes fused into it).
struct step_info {
  std::string name;                // the node's name (the producer's, when others were fused)
  op_kind op = op_kind::eltwise;   // its op
  std::string kernel;              // what runs, e.g. "gemm f32 [bias, relu]"
  std::vector<std::string> fused;  // names of the nodes absorbed into this step
  double flops = 0;                // floating-point (or integer) operations per run
  double bytes = 0;                // bytes read and written per run (activations + weights)
  int threads = 1;                 // threads this step may use
  std::vector<index_t> out_shape;  // its output
  dtype out_type = dtype::f32;
  tensor_layout out_layout = tensor_layout::plain;
  target_info target;  // the arch and vector impl its kernel was compiled for (same for all steps)
};

/// What the fusion passes did, and the arch and vector impl the plan's kernels were compiled for.
struct fusion_report {
  std::vector<std::string> fused;  // "fused bn1 (batch_norm) into conv1 (conv2d)", ...
  std::vector<std::string> notes;  // choices the compiler made for this arch (int8 kept in f32)
  int nodes_before = 0;            // graph nodes
  int nodes_after = 0;             // plan steps
  target_info target;              // compile<A, B>: A and simd::impl_name<A, B>()
  /// "arch: avx512_bf16 (xsimd:avx512bw)\nfusion: 8 nodes -> 4 steps\n  fused ...\n"; a plan
  /// compiled for the scalar fallback says "scalar fallback" on its arch line.
  std::string text() const {
    std::string s = "arch: " + target.text() + "\n";
    if (!target.dispatch.empty()) s += "dispatch: " + target.dispatch + "\n";
    s += "fusion: " + std::to_string(nodes_before) + " nodes -> " + std::to_string(nodes_after) +
         " steps\n";
    for (const std::string& f : fused) s += "  " + f + "\n";
    for (const std::string& n : notes) s += "note: " + n + "\n";
    return s;
  }
};

/// A tensor of the plan (after inference): shape, type, layout, size and where it lives.
struct plan_tensor {
  std::string name;
  std::vector<index_t> shape;
  dtype type = dtype::f32;
  tensor_layout layout = tensor_layout::plain;
  std::size_t bytes = 0;
  bool has_quant = false;
  tensor_quant quant{};
  enum class storage : std::uint8_t { arena, input, output, constant, none } where = storage::none;
  std::int32_t index = 0;      // input / output number
  std::size_t offset = 0;      // arena offset, or byte offset into the input / output (views)
  const void* data = nullptr;  // constants
  std::int32_t root = -1;      // a view (reshape): the tensor whose storage it shares
  bool written = false;        // an input the plan writes (cached_attention's KV caches)
};

namespace detail {

/// One command of a step before pointers are resolved: tensor indices instead of addresses.
struct plan_command {
  command_fn fn = nullptr;
  const void* params = nullptr;
  std::int32_t in[4] = {-1, -1, -1, -1};  // plan tensors (-1: unused)
  std::int32_t out = -1;
  index_t begin = 0, end = 0;
  std::int32_t threads = 1;
  std::size_t workspace_bytes = 0;   // the kernel's scratch (workspace_size at `threads`)
  std::size_t workspace_offset = 0;  // its slice of the arena (memory plan)
};

struct plan_data {
  std::vector<plan_tensor> tensors;
  std::vector<step_info> steps;
  std::vector<std::vector<plan_command>> commands;  // per step
  std::vector<std::int32_t> inputs, outputs;        // plan tensor indices
  std::size_t arena_bytes = 0;                      // tensors, then the kernels' workspaces
  std::size_t workspace_bytes = 0;                  // of which the kernels' workspaces
  std::size_t intermediate_bytes = 0;               // the sum of every arena tensor's size
  fusion_report report;
  compile_options options;
  int threads = 1;
  double fork_join_ns = 0;  // the split cost the per-node thread counts were chosen with
  std::vector<std::shared_ptr<const void>> owned;  // parameter blocks, packed weights, constants
  /// Runs commands under an executor (replay.hpp's run_commands of the TU that lowered the plan):
  /// a plan from kfuse::runtime runs its kernels' parallel work in the runtime's own copy of
  /// kfuse, which then sees the executor the replaying code has in effect.
  void (*run)(const command* cmds, std::size_t n, const executor* exec,
              const profiler_hook* hook) = nullptr;
};

/// Records the target compile<A, B> built the plan for, in its report and in every step.
inline void set_target(plan_data& d, const target_info& t) {
  d.report.target = t;
  for (step_info& s : d.steps) s.target = t;
}

}  // namespace detail

class plan {
 public:
  plan() = default;
  explicit plan(std::shared_ptr<const detail::plan_data> d) : d_(std::move(d)) {}

  /// A replay buffer with these inputs and outputs bound (graph::input / output order).
  /// Throws kfuse::error on a wrong count, a null pointer or a wrong size.
  replay_buffer record(std::span<const binding> inputs, std::span<const binding> outputs) const;
  replay_buffer record(std::initializer_list<binding> inputs,
                       std::initializer_list<binding> outputs) const;

  /// Runs the steps one by one without a replay buffer, as an eager framework does: every call
  /// allocates the intermediate tensors, resolves each pointer through a lookup and builds each
  /// command on the fly. Same results as a replay; for comparison and one-off runs.
  void run(std::span<const binding> inputs, std::span<const binding> outputs) const;
  void run(std::initializer_list<binding> inputs, std::initializer_list<binding> outputs) const {
    run(std::span<const binding>(inputs.begin(), inputs.size()),
        std::span<const binding>(outputs.begin(), outputs.size()));
  }

  const std::vector<step_info>& steps() const { return data().steps; }
  const fusion_report& report() const { return data().report; }
  /// Bytes of the one activation arena a replay buffer allocates (intermediate tensors and the
  /// kernels' workspaces).
  std::size_t arena_bytes() const { return data().arena_bytes; }
  /// The part of the arena that is kernel workspace (scratch of NCHW pooling, depthwise, conv).
  std::size_t workspace_bytes() const { return data().workspace_bytes; }
  /// What the arena tensors would take without reuse (sum of their sizes).
  std::size_t intermediate_bytes() const { return data().intermediate_bytes; }
  /// Threads the plan's biggest steps use.
  int threads() const { return data().threads; }
  /// The cost of splitting a node (ns) the per-node thread counts were chosen with.
  double fork_join_ns() const { return data().fork_join_ns; }
  std::size_t input_count() const { return data().inputs.size(); }
  std::size_t output_count() const { return data().outputs.size(); }
  const plan_tensor& input(std::size_t i) const {
    if (i >= data().inputs.size())
      detail::fail("plan", "input " + std::to_string(i) + " does not exist (the plan has " +
                               std::to_string(data().inputs.size()) + ")");
    return data().tensors[std::size_t(data().inputs[i])];
  }
  const plan_tensor& output(std::size_t i) const {
    if (i >= data().outputs.size())
      detail::fail("plan", "output " + std::to_string(i) + " does not exist (the plan has " +
                               std::to_string(data().outputs.size()) + ")");
    return data().tensors[std::size_t(data().outputs[i])];
  }
  const std::vector<plan_tensor>& tensors() const { return data().tensors; }
  bool empty() const noexcept { return !d_; }

  const detail::plan_data& data() const {
    if (!d_) detail::fail("plan", "empty plan (use compile(graph, options))");
    return *d_;
  }

 private:
  std::shared_ptr<const detail::plan_data> d_;
  friend class replay_buffer;
};

// compile(graph, options) -> plan (infer, validate, fuse, plan memory, pack weights) lives in
// kfuse/graph/compile.hpp: the header that instantiates the kernels, so only the translation
// units that compile plans pay for it. record() and run() are defined with the replay buffer in
// kfuse/graph/replay.hpp (which includes this header).

KFUSE_END_NAMESPACE
