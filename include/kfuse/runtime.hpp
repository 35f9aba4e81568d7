#pragma once
// kfuse::runtime: the plan compiler prebuilt for several CPU tiers, the best one this CPU runs
// chosen at run time. A translation unit that includes this header instantiates no kernel and
// needs no -march flag: the binary runs on any x86-64 CPU from the lowest tier built up.
//
//   #include <kfuse/runtime.hpp>
//   kfuse::plan p = kfuse::compile(g);          // the best tier of this CPU
//   std::cout << p.report().text();             // "arch: avx2 (...)", "dispatch: ... why"
//
// CMake: link kfuse::runtime (find_package(kfuse COMPONENTS runtime) for an installed kfuse). Its
// tiers are KFUSE_RUNTIME_ARCHS (default: sse4, avx2, avx512, avx512_bf16 on x86-64); each is a
// self-contained object whose symbols, the standard library's inline code included, are local
// to it, so that no code built for one tier is ever called by another. KFUSE_ARCH=<tier> in the
// environment picks a tier instead; a tier the CPU or the library lacks is a kfuse::error naming
// it. docs/executor.md, "Run-time dispatch".
#include <string>
#include <vector>

#include "kfuse/graph/compile_fwd.hpp"
#include "kfuse/tools/machine_limits.hpp"

namespace kfuse {

/// The tier kfuse::runtime compiles plans for in this process, and why (chosen once).
struct runtime_tier_choice {
  std::string name;    // an arch name: "avx2"
  std::string reason;  // "the best of this kfuse::runtime's tiers (...) that this CPU runs"
  std::vector<std::string> built;     // the tiers the library holds, best first
  std::vector<std::string> runnable;  // those this CPU runs, best first
};
/// Throws kfuse::error when KFUSE_ARCH names a tier this library or this CPU lacks.
const runtime_tier_choice& runtime_tier();

// The run-time entry points (src/runtime/dispatch.cpp): the graph, options and plan are the
// caller's, whatever its per-ISA namespace (their layout does not depend on it). Not
// kfuse::detail: that name is also each per-ISA namespace's.
namespace runtime_entry {
void compile(const void* graph, const void* options, void* plan_out);
void limits(void* limits_out);
}  // namespace runtime_entry

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Compiles a graph into a plan for the tier runtime_tier() names. Preferred by overload
/// resolution over the compile<A, B> template of kfuse/graph/compile.hpp.
inline plan compile(const graph& g, const compile_options& options = {}) {
  plan p;
  ::kfuse::runtime_entry::compile(&g, &options, &p);
  return p;
}

/// The machine limits (peak GFLOP/s, bandwidth) probed with the chosen tier's kernels: what a
/// profiler of its plans should compare against (profiler::set_limits).
inline machine_limits runtime_machine_limits() {
  machine_limits m;
  ::kfuse::runtime_entry::limits(&m);
  return m;
}

KFUSE_END_NAMESPACE
