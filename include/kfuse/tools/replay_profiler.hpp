#pragma once
// Profiling a replay buffer: each plan step becomes a profiler node (name, kernel, FLOPs, bytes,
// threads, compute kind), and the executor's hook records every command into the profiler. The
// profiler's table then names the arch and vector impl the plan was compiled for.
//
//   kfuse::profiler prof;
//   kfuse::replay_profiler rp(prof, buffer);
//   for (int i = 0; i < 100; ++i) buffer.replay(rp.hook());   // buffer.replay() stays unhooked
//   std::printf("%s", prof.table().c_str());
//   prof.write_chrome_trace("trace.json");
#include <string>
#include <vector>

#include "kfuse/graph/replay.hpp"
#include "kfuse/tools/profiler.hpp"

KFUSE_BEGIN_NAMESPACE

class replay_profiler {
 public:
  /// Registers the steps of `r` as nodes of `prof`; both must outlive this object.
  replay_profiler(profiler& prof, const replay_buffer& r, std::string prefix = {}) : prof_(&prof) {
    base_ = std::int32_t(prof.nodes().size());
    for (const step_info& s : r.steps()) {
      profile_node n;
      n.name = prefix + s.name;
      n.op = s.kernel.empty() ? std::string(op_name(s.op)) : s.kernel;
      n.flops = s.flops;
      n.bytes = s.bytes;
      n.threads = s.threads;
      n.kind = kind_of(s);
      prof.add_node(std::move(n));
    }
    prof.reserve(prof.events().size() + 256 * r.steps().size());
    // The table names the arch and vector impl the plan was compiled for.
    if (!r.steps().empty() && r.steps().front().target.known())
      prof.set_target(r.steps().front().target);
  }

  /// The hook for replay_buffer::replay(hook). Commands of one step form one event per run.
  profiler_hook hook() noexcept { return profiler_hook{this, &on_command}; }

 private:
  // The arithmetic a step runs in, from the kernel the plan chose ("gemm bf16 ...", "... int8").
  static compute_kind kind_of(const step_info& s) {
    if (s.kernel.find("int8") != std::string::npos ||
        s.kernel.find("vpdpbusd") != std::string::npos)
      return compute_kind::int8;
    if (s.kernel.find("bf16") != std::string::npos) return compute_kind::bf16;
    return compute_kind::f32;
  }

  static void on_command(void* user, std::int32_t command, std::int32_t step, std::int64_t begin,
                         std::int64_t end) {
    auto& self = *static_cast<replay_profiler*>(user);
    const bool continues = command > 0 && step == self.last_step_;
    self.last_step_ = step;
    self.prof_->record(self.base_ + step, self.prof_->from_steady_ns(begin),
                       self.prof_->from_steady_ns(end), 0, continues);
  }

  profiler* prof_;
  std::int32_t base_ = 0;
  std::int32_t last_step_ = -1;
};

KFUSE_END_NAMESPACE
