#pragma once
// replay_buffer: a plan recorded against bound inputs and outputs, as a flat array of POD
// commands (function pointer + resolved pointers + parameters + work range). replay() walks it:
// no heap allocation, no lookup, no virtual call; only the kernels run.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kfuse/graph/plan.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The executor parallel work of a replay runs on: the plan's, else this thread's or the
/// process's (scoped_executor, set_default_executor), else none (the pool).
inline const executor* executor_in_effect(const executor* plan_exec) {
  if (plan_exec) return plan_exec;
  return thread_executor ? thread_executor : process_executor();
}

/// plan_data::run of the plans this TU lowers: the commands in order, under `exec`, timed for
/// `hook` when given.
inline void run_commands(const command* cmds, std::size_t n, const executor* exec,
                         const profiler_hook* hook) {
  const scoped_executor use(exec);
  if (!hook) {
    for (std::size_t i = 0; i < n; ++i) cmds[i].fn(cmds[i]);
    return;
  }
  using clock = std::chrono::steady_clock;
  for (std::size_t i = 0; i < n; ++i) {
    const auto t0 = clock::now();
    cmds[i].fn(cmds[i]);
    const auto t1 = clock::now();
    hook->on_command(
        hook->user, std::int32_t(i), cmds[i].step,
        std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count(),
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count());
  }
}

}  // namespace detail

class replay_buffer {
 public:
  replay_buffer() = default;
  replay_buffer(replay_buffer&&) noexcept = default;
  replay_buffer& operator=(replay_buffer&&) noexcept = default;
  // Commands point into this buffer's arena and at the bound buffers: copying makes no sense.
  replay_buffer(const replay_buffer&) = delete;
  replay_buffer& operator=(const replay_buffer&) = delete;

  /// Runs every command in order. Safe to call from several threads on distinct replay buffers
  /// (even of one plan): each has its own arena. One buffer used from two threads at once (a
  /// replay or a rebind while another runs) throws kfuse::error in the second thread; the first
  /// one's results are not affected (threading rules: docs/executor.md).
  void replay() {
    const claim mine(*this);
    if (d_) d_->run(cmds_.data(), cmds_.size(), detail::executor_in_effect(exec_), nullptr);
  }

  /// The same, timing each command for a profiler (steady clock, nanoseconds).
  void replay(const profiler_hook& hook) {
    const claim mine(*this);
    if (d_) d_->run(cmds_.data(), cmds_.size(), detail::executor_in_effect(exec_), &hook);
  }

  /// Points graph input i at another buffer (same size) without recording again.
  void bind_input(std::size_t i, binding b) { rebind(false, i, b); }
  void bind_output(std::size_t i, binding b) { rebind(true, i, b); }
  template <class T>
  void bind_input(std::size_t i, const T* p, std::size_t count) {
    bind_input(i, bind(p, count));
  }
  template <class T>
  void bind_output(std::size_t i, T* p, std::size_t count) {
    bind_output(i, bind(p, count));
  }

  std::span<const command> commands() const noexcept { return cmds_; }
  /// The plan step command i runs (name, op, flops, bytes ...).
  const step_info& step(std::int32_t step_index) const {
    if (!d_ || step_index < 0 || std::size_t(step_index) >= d_->steps.size())
      detail::fail("replay", "step " + std::to_string(step_index) +
                                 " does not exist (the plan has " +
                                 std::to_string(d_ ? d_->steps.size() : 0) + ")");
    return d_->steps[std::size_t(step_index)];
  }
  const std::vector<step_info>& steps() const { return d_->steps; }
  std::size_t arena_bytes() const noexcept { return d_ ? d_->arena_bytes : 0; }

 private:
  friend class plan;

  struct free_deleter {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  // A command slot that holds a bound pointer: rebinding rewrites it (base + offset).
  struct patch {
    const void** slot;
    std::size_t offset;
  };

  static void check_binding(const plan_tensor& t, bool output, std::size_t i, const binding& b) {
    const std::string what =
        std::string(output ? "output " : "input ") + std::to_string(i) + " ('" + t.name + "')";
    // An empty tensor's buffer may be null (an empty std::vector's data()).
    if (b.data == nullptr && t.bytes != 0)
      detail::fail("replay", what + " is bound to a null pointer");
    if (!output && t.written && b.read_only)
      detail::fail("replay", what +
                                 " is written by the plan (a KV cache): bind a writable "
                                 "(non-const) buffer");
    if (b.typed && b.type != t.type)
      detail::fail("replay", what + " is bound to a buffer of " + std::string(dtype_name(b.type)) +
                                 ", the plan's tensor holds " + std::string(dtype_name(t.type)) +
                                 " (convert the data, or add a cast / quantize node)");
    if (b.bytes != t.bytes)
      detail::fail("replay",
                   what + " is bound to " + std::to_string(b.bytes) + " bytes, the plan expects " +
                       std::to_string(t.bytes) + " (" + std::string(dtype_name(t.type)) + ", " +
                       std::to_string(t.bytes / std::max<std::size_t>(1, dtype_size(t.type))) +
                       " elements)");
    if (reinterpret_cast<std::uintptr_t>(b.data) % dtype_size(t.type) != 0)
      detail::fail("replay", what + " is not aligned to its element size");
  }

  /// An output buffer shares no byte with an input or another output: a plan reads its inputs
  /// after it has begun to write its outputs, so an aliased output would be silently wrong.
  static void check_apart(const detail::plan_data& d, std::span<const binding> in,
                          std::span<const binding> out) {
    // An input the plan writes (a KV cache) shares no byte with another input either.
    for (std::size_t w = 0; w < in.size(); ++w) {
      if (!d.tensors[std::size_t(d.inputs[w])].written) continue;
      for (std::size_t i = 0; i < in.size(); ++i)
        if (i != w && detail::bytes_overlap(in[w].data, in[w].bytes, in[i].data, in[i].bytes))
          detail::fail("replay", "input " + std::to_string(w) + " ('" +
                                     d.tensors[std::size_t(d.inputs[w])].name +
                                     "') is written by the plan and overlaps input " +
                                     std::to_string(i) + " (bind separate buffers)");
    }
    for (std::size_t o = 0; o < out.size(); ++o) {
      for (std::size_t i = 0; i < in.size(); ++i)
        if (detail::bytes_overlap(out[o].data, out[o].bytes, in[i].data, in[i].bytes))
          detail::fail("replay", "output " + std::to_string(o) + " overlaps input " +
                                     std::to_string(i) +
                                     ": a plan cannot run in place (bind separate buffers)");
      for (std::size_t j = 0; j < o; ++j)
        if (detail::bytes_overlap(out[o].data, out[o].bytes, out[j].data, out[j].bytes))
          detail::fail("replay", "outputs " + std::to_string(j) + " and " + std::to_string(o) +
                                     " overlap (bind separate buffers)");
    }
  }

  // Set while replay() or a rebind runs: one atomic exchange per call finds a second thread.
  struct in_use_flag {
    std::atomic<bool> on{false};
    in_use_flag() = default;
    in_use_flag(in_use_flag&&) noexcept {}  // a moved buffer starts free (moving one in use is
    in_use_flag& operator=(in_use_flag&&) noexcept { return *this; }  // a race of its own)
  };
  struct claim {
    in_use_flag& f;
    explicit claim(replay_buffer& r) : f(r.in_use_) {
      if (!r.d_)
        detail::fail("replay",
                     "empty replay buffer (default-constructed or moved-from): use plan::record");
      if (f.on.exchange(true, std::memory_order_acquire))
        detail::fail("replay", "this replay buffer (plan of " + std::to_string(r.d_->steps.size()) +
                                   " steps, first '" + r.first_step_name() +
                                   "') is already in use on another thread (replay or bind_input / "
                                   "bind_output at the same time); record one buffer per thread");
    }
    ~claim() { f.on.store(false, std::memory_order_release); }
    claim(const claim&) = delete;
    claim& operator=(const claim&) = delete;
  };
  std::string first_step_name() const { return d_->steps.empty() ? "" : d_->steps[0].name; }

  void rebind(bool output, std::size_t i, binding b) {
    const claim mine(*this);
    const auto& ids = output ? d_->outputs : d_->inputs;
    if (i >= ids.size())
      detail::fail("replay", std::string(output ? "output " : "input ") + std::to_string(i) +
                                 " does not exist (the plan has " + std::to_string(ids.size()) +
                                 ")");
    check_binding(d_->tensors[std::size_t(ids[i])], output, i, b);
    std::vector<binding>& list = output ? bound_out_ : bound_in_;
    const binding old = list[i];
    list[i] = b;
    try {
      check_apart(*d_, bound_in_, bound_out_);
    } catch (...) {
      list[i] = old;  // nothing changes on error
      throw;
    }
    const auto& begin = output ? out_begin_ : in_begin_;
    for (std::uint32_t p = begin[i]; p < begin[i + 1]; ++p)
      *patches_[p].slot = static_cast<const unsigned char*>(b.data) + patches_[p].offset;
  }

  std::shared_ptr<const detail::plan_data> d_;
  std::vector<command> cmds_;
  std::unique_ptr<unsigned char, free_deleter> arena_;
  std::vector<patch> patches_;
  std::vector<std::uint32_t> in_begin_, out_begin_;  // patches_ ranges per input / output
  const executor* exec_ = nullptr;
  std::vector<binding> bound_in_, bound_out_;  // what is bound now (overlap checks of rebinds)
  in_use_flag in_use_;
};

namespace detail {

inline void check_counts(const plan_data& d, std::size_t n_in, std::size_t n_out,
                         std::string_view who) {
  if (n_in != d.inputs.size())
    fail(who,
         std::to_string(n_in) + " inputs bound, the plan has " + std::to_string(d.inputs.size()));
  if (n_out != d.outputs.size())
    fail(who, std::to_string(n_out) + " outputs bound, the plan has " +
                  std::to_string(d.outputs.size()));
}

inline void* arena_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace detail

inline replay_buffer plan::record(std::span<const binding> inputs,
                                  std::span<const binding> outputs) const {
  const detail::plan_data& d = data();
  detail::check_counts(d, inputs.size(), outputs.size(), "record");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    replay_buffer::check_binding(d.tensors[std::size_t(d.inputs[i])], false, i, inputs[i]);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    replay_buffer::check_binding(d.tensors[std::size_t(d.outputs[i])], true, i, outputs[i]);
  replay_buffer::check_apart(d, inputs, outputs);

  replay_buffer r;
  r.d_ = d_;
  r.bound_in_.assign(inputs.begin(), inputs.end());
  r.bound_out_.assign(outputs.begin(), outputs.end());
  r.exec_ = d.options.exec;
  r.arena_.reset(static_cast<unsigned char*>(detail::arena_alloc(d.arena_bytes)));
  std::size_t total = 0;
  for (const auto& s : d.commands) total += s.size();
  r.cmds_.reserve(total);  // slots are patched by address: no reallocation after this

  std::vector<std::vector<replay_buffer::patch>> in_p(inputs.size()), out_p(outputs.size());
  auto resolve = [&](std::int32_t t, const void** slot) {
    if (t < 0) {
      *slot = nullptr;
      return;
    }
    const plan_tensor& pt = d.tensors[std::size_t(t)];
    switch (pt.where) {
      case plan_tensor::storage::arena:
        *slot = r.arena_.get() + pt.offset;
        break;
      case plan_tensor::storage::constant:
        *slot = pt.data;
        break;
      case plan_tensor::storage::input:
        *slot = static_cast<const unsigned char*>(inputs[std::size_t(pt.index)].data) + pt.offset;
        in_p[std::size_t(pt.index)].push_back({slot, pt.offset});
        break;
      case plan_tensor::storage::output:
        *slot = static_cast<const unsigned char*>(outputs[std::size_t(pt.index)].data) + pt.offset;
        out_p[std::size_t(pt.index)].push_back({slot, pt.offset});
        break;
      case plan_tensor::storage::none:
        *slot = nullptr;
        break;
    }
  };
  for (std::size_t s = 0; s < d.commands.size(); ++s)
    for (const detail::plan_command& pc : d.commands[s]) {
      command& c = r.cmds_.emplace_back();
      c.fn = pc.fn;
      c.params = pc.params;
      c.begin = pc.begin;
      c.end = pc.end;
      c.threads = pc.threads;
      c.step = std::int32_t(s);
      for (int k = 0; k < 4; ++k) resolve(pc.in[k], &c.in[k]);
      resolve(pc.out, const_cast<const void**>(&c.out));
      if (pc.workspace_bytes) {
        c.workspace = r.arena_.get() + pc.workspace_offset;
        c.workspace_bytes = pc.workspace_bytes;
      }
    }
  auto flatten = [&](std::vector<std::vector<replay_buffer::patch>>& lists,
                     std::vector<std::uint32_t>& begin) {
    begin.push_back(std::uint32_t(r.patches_.size()));
    for (auto& l : lists) {
      r.patches_.insert(r.patches_.end(), l.begin(), l.end());
      begin.push_back(std::uint32_t(r.patches_.size()));
    }
  };
  flatten(in_p, r.in_begin_);
  flatten(out_p, r.out_begin_);
  return r;
}

inline replay_buffer plan::record(std::initializer_list<binding> inputs,
                                  std::initializer_list<binding> outputs) const {
  return record(std::span<const binding>(inputs.begin(), inputs.size()),
                std::span<const binding>(outputs.begin(), outputs.size()));
}

inline void plan::run(std::span<const binding> inputs, std::span<const binding> outputs) const {
  const detail::plan_data& d = data();
  detail::check_counts(d, inputs.size(), outputs.size(), "run");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    replay_buffer::check_binding(d.tensors[std::size_t(d.inputs[i])], false, i, inputs[i]);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    replay_buffer::check_binding(d.tensors[std::size_t(d.outputs[i])], true, i, outputs[i]);
  replay_buffer::check_apart(d, inputs, outputs);
  const executor* exec = detail::executor_in_effect(d.options.exec);
  // Eager: one allocation per intermediate tensor, pointers found through a map per use.
  std::unordered_map<std::int32_t, std::unique_ptr<void, void (*)(void*)>> buffers;
  std::unordered_map<std::int32_t, const void*> where;
  std::function<const void*(std::int32_t)> lookup = [&](std::int32_t t) -> const void* {
    if (t < 0) return nullptr;
    if (auto it = where.find(t); it != where.end()) return it->second;
    const plan_tensor& pt = d.tensors[std::size_t(t)];
    const void* p = nullptr;
    switch (pt.where) {
      case plan_tensor::storage::constant:
        p = pt.data;
        break;
      case plan_tensor::storage::input:
        p = static_cast<const unsigned char*>(inputs[std::size_t(pt.index)].data) + pt.offset;
        break;
      case plan_tensor::storage::output:
        p = static_cast<const unsigned char*>(outputs[std::size_t(pt.index)].data) + pt.offset;
        break;
      case plan_tensor::storage::arena: {
        if (pt.root >= 0 && pt.root != t) {  // a view: its root's buffer
          p = static_cast<const unsigned char*>(lookup(pt.root)) +
              (pt.offset - d.tensors[std::size_t(pt.root)].offset);
          break;
        }
        std::unique_ptr<void, void (*)(void*)> buf(
            detail::arena_alloc(std::max<std::size_t>(pt.bytes, 1)), std::free);
        p = buf.get();
        buffers.emplace(t, std::move(buf));
        break;
      }
      case plan_tensor::storage::none:
        break;
    }
    where.emplace(t, p);
    return p;
  };
  for (std::size_t s = 0; s < d.commands.size(); ++s)
    for (const detail::plan_command& pc : d.commands[s]) {
      command c;
      c.fn = pc.fn;
      c.params = pc.params;
      c.begin = pc.begin;
      c.end = pc.end;
      c.threads = pc.threads;
      c.step = std::int32_t(s);
      for (int k = 0; k < 4; ++k) c.in[k] = lookup(pc.in[k]);
      c.out = const_cast<void*>(lookup(pc.out));
      std::unique_ptr<void, void (*)(void*)> scratch(detail::arena_alloc(pc.workspace_bytes),
                                                     std::free);
      c.workspace = scratch.get();
      c.workspace_bytes = pc.workspace_bytes;
      d.run(&c, 1, exec, nullptr);
    }
}

KFUSE_END_NAMESPACE
