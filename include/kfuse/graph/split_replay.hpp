#pragma once
// split_replay: one request over a batch run as independent parts, each a one-thread replay of a
// plan compiled for its share of the batch, on the pool's threads at once. Where every node of a
// model treats samples independently (a CNN classifier: convs, pools, per-sample linears), this
// needs no fork/join per node: the threads meet once per request instead of once per step, and
// each keeps its part's activations in its own core's cache. On the 2-core Zen 5 VM a
// MobileNetV3-small batch of 8 on 2 threads ran in 4.0-4.5 ms this way against 6.2 ms with every
// node split (docs/executor.md, "Batch split").
//
// The parts are claimed, not assigned (thread_pool's claims): on one core, or next to a busy
// neighbour, one thread runs what the other has not taken, so the request costs about one
// thread's time, never a wait at a barrier.
//
// The caller asserts the model is sample-wise along axis 0 (kfuse-run checks it: the same outputs
// as the whole batch on the run's inputs). What is checked here: every part's plan has one thread,
// the parts have the same inputs and outputs (count, element type), and each bound buffer is
// exactly the parts' buffers laid end to end (axis 0 outermost, as in every kfuse layout).
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kfuse/graph/replay.hpp"

KFUSE_BEGIN_NAMESPACE

class split_replay {
 public:
  split_replay() = default;

  /// parts[k]: the plan of part k (in batch order), compiled with threads = 1; a plan may serve
  /// several parts (all but the last of an uneven split). inputs / outputs: the whole batch's
  /// buffers, as plan::record takes them. threads: the most parts run at once (0: the pool's).
  split_replay(std::span<const plan* const> parts, std::span<const binding> inputs,
               std::span<const binding> outputs, int threads = 0)
      : threads_(threads) {
    if (parts.empty()) detail::fail("split_replay", "no parts to run");
    for (std::size_t k = 0; k < parts.size(); ++k) checked(parts, k);
    check_sizes(parts, inputs, false);
    check_sizes(parts, outputs, true);
    std::vector<std::size_t> in_at(inputs.size()), out_at(outputs.size());
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const plan& p = *parts[k];
      std::vector<binding> bi(inputs.begin(), inputs.end()), bo(outputs.begin(), outputs.end());
      slice(bi, in_at, p, false);
      slice(bo, out_at, p, true);
      buffers_.push_back(p.record(bi, bo));
    }
  }

  /// Runs every part; returns when all are done. Parts run on the pool (or the executor in
  /// effect), each on one thread as worker 0 of its own replay buffer.
  void replay() {
    parallel_for(
        0, index_t(buffers_.size()), 1,
        [this](range r, int) {
          const as_worker_zero own_scratch;
          for (index_t k = r.begin; k < r.end; ++k) buffers_[std::size_t(k)].replay();
        },
        threads_);
  }

  std::size_t part_count() const noexcept { return buffers_.size(); }
  /// Part k's replay buffer (its steps, or a profiled replay of that part alone).
  replay_buffer& part(std::size_t k) {
    if (k >= buffers_.size())
      detail::fail("split_replay", "part " + std::to_string(k) + " does not exist (there are " +
                                       std::to_string(buffers_.size()) + ")");
    return buffers_[k];
  }

 private:
  /// Part k has a one-thread plan of part 0's model (part 0 is checked first).
  static void checked(std::span<const plan* const> parts, std::size_t k) {
    const std::string which = "part " + std::to_string(k);
    if (parts[k] == nullptr || parts[k]->empty())
      detail::fail("split_replay", which + " has no plan");
    const plan& p = *parts[k];
    if (p.threads() != 1)
      detail::fail("split_replay", which + "'s plan uses " + std::to_string(p.threads()) +
                                       " threads: compile each part with threads = 1 (the "
                                       "parts are what runs in parallel)");
    const plan& first = *parts[0];
    if (p.input_count() != first.input_count() || p.output_count() != first.output_count())
      detail::fail("split_replay", which + " has " + std::to_string(p.input_count()) +
                                       " inputs and " + std::to_string(p.output_count()) +
                                       " outputs, part 0 " + std::to_string(first.input_count()) +
                                       " and " + std::to_string(first.output_count()) +
                                       ": every part must be the same model");
    for (const bool output : {false, true})
      for (std::size_t i = 0; i < (output ? p.output_count() : p.input_count()); ++i)
        if (tensor_of(p, i, output).type != tensor_of(first, i, output).type)
          detail::fail("split_replay", which + "'s " + (output ? "output " : "input ") +
                                           std::to_string(i) + " ('" +
                                           tensor_of(p, i, output).name +
                                           "') holds another element type than part 0's");
  }

  static const plan_tensor& tensor_of(const plan& p, std::size_t i, bool output) {
    return output ? p.output(i) : p.input(i);
  }

  /// Each bound buffer is the parts' buffers end to end: anything else would leave samples unread
  /// or read past the buffer.
  static void check_sizes(std::span<const plan* const> parts, std::span<const binding> b,
                          bool output) {
    const plan& first = *parts[0];
    const std::size_t want = output ? first.output_count() : first.input_count();
    const char* kind = output ? "output" : "input";
    if (b.size() != want)
      detail::fail("split_replay", std::to_string(b.size()) + " " + kind +
                                       "s bound, the model has " + std::to_string(want));
    for (std::size_t i = 0; i < b.size(); ++i) {
      std::size_t sum = 0;
      for (const plan* p : parts) sum += tensor_of(*p, i, output).bytes;
      if (b[i].bytes != sum)
        detail::fail("split_replay", std::string(kind) + " " + std::to_string(i) + " ('" +
                                         tensor_of(first, i, output).name + "') is bound to " +
                                         std::to_string(b[i].bytes) + " bytes, the " +
                                         std::to_string(parts.size()) + " parts take " +
                                         std::to_string(sum) +
                                         " (is axis 0 the batch of every input and output?)");
    }
  }

  /// Narrows each binding to part p's slice, starting where the previous part's ended.
  static void slice(std::vector<binding>& b, std::vector<std::size_t>& at, const plan& p,
                    bool output) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const std::size_t bytes = tensor_of(p, i, output).bytes;
      b[i].data = b[i].data == nullptr ? nullptr : static_cast<std::byte*>(b[i].data) + at[i];
      b[i].bytes = bytes;
      at[i] += bytes;
    }
  }

  std::vector<replay_buffer> buffers_;
  int threads_ = 0;
};

KFUSE_END_NAMESPACE
