#pragma once
// Threads per plan step: the cost model of docs/executor.md ("Threads per node"). A step's time
// on one thread is flops / flop_rate + bytes / byte_rate (ns); split over t threads it takes
// t1 / t plus one fork/join. t1 / t + fj falls as t grows, so the choice is all threads or one:
// all when that saves 10% or more.
#include "kfuse/config/macros.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

// Round per-core figures of kfuse's kernels on AVX2 / AVX-512 machines: they only decide
// whether a split pays for its fork/join.
inline constexpr double node_flop_rate = 50.0;  // flop per ns (50 GFLOP/s)
inline constexpr double node_byte_rate = 20.0;  // bytes per ns (20 GB/s)
/// The split cost assumed for a user executor (kfuse cannot measure it).
inline constexpr double user_executor_fork_join_ns = 5000;

/// Threads for a step of `flops` and `bytes` on at most `max_threads`; fork_join_ns <= 0 splits
/// every step.
inline int node_threads(int max_threads, double fork_join_ns, double bytes, double flops) {
  if (max_threads <= 1) return 1;
  if (fork_join_ns <= 0) return max_threads;
  const double t1 = flops / node_flop_rate + bytes / node_byte_rate;
  return t1 / max_threads + fork_join_ns <= 0.9 * t1 ? max_threads : 1;
}

}  // namespace detail
KFUSE_END_NAMESPACE
