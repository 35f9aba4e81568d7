// Replay overhead per node: a chain of 1000 relu nodes on 64 floats.
//   direct      the 1000 kernel calls, kfuse::eltwise(in, out, 64, relu), in place after the first
//   replay/T    the recorded plan (compiled unfused, T threads), replay()
//   op_by_op/T  the same plan run without a replay buffer (plan::run: allocation + lookups)
//   fork_join/2 one 2-thread parallel_for of two trivial chunks (the caller claims both)
//   split/2     two chunks of 5 us on two threads: ns_per_split - 5000 = the cost of a split
// Counter ns_per_node = time / 1000. Overhead per node = replay - direct (the kernels are the
// same; replay skips the per-call argument checks, so it can come out below zero).
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "bench_common.hpp"
#include "kfuse/graph/compile.hpp"

namespace {

constexpr int nodes = 1000;
constexpr kfuse::index_t width = 64;

kfuse::graph relu_chain() {
  kfuse::graph g;
  auto y = g.input("x", {width});
  for (int i = 0; i < nodes; ++i) y = g.relu("relu" + std::to_string(i), y);
  g.output(y);
  return g;
}

std::vector<float> input() {
  std::vector<float> x(width);
  for (kfuse::index_t i = 0; i < width; ++i) x[std::size_t(i)] = float(i % 7) - 3.f;
  return x;
}

void per_node(benchmark::State& state) {
  state.counters["ns_per_node"] =
      benchmark::Counter(double(nodes) * double(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void direct(benchmark::State& state) {
  const auto x = input();
  std::vector<float> y(width);
  const kfuse::epilogue<kfuse::relu> ep{};
  for (auto _ : state) {
    kfuse::eltwise(x.data(), y.data(), width, ep);
    for (int i = 1; i < nodes; ++i) kfuse::eltwise(y.data(), y.data(), width, ep);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  per_node(state);
}

void replay(benchmark::State& state) {
  const int threads = int(state.range(0));
  const kfuse::plan p = kfuse::compile(relu_chain(), {.threads = threads, .fuse = false});
  const auto x = input();
  std::vector<float> y(width);
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  for (auto _ : state) {
    r.replay();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  per_node(state);
  state.counters["arena_bytes"] = double(p.arena_bytes());
}

void op_by_op(benchmark::State& state) {
  const int threads = int(state.range(0));
  const kfuse::plan p = kfuse::compile(relu_chain(), {.threads = threads, .fuse = false});
  const auto x = input();
  std::vector<float> y(width);
  for (auto _ : state) {
    p.run({kfuse::bind(x)}, {kfuse::bind(y)});
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  per_node(state);
}

// The 1000 relus fused (the default compile): one pass, for scale.
void replay_fused(benchmark::State& state) {
  const kfuse::plan p = kfuse::compile(relu_chain(), {.threads = 1});
  const auto x = input();
  std::vector<float> y(width);
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  for (auto _ : state) {
    r.replay();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  per_node(state);
}

// What a node split across threads pays on top of its kernel: one fork/join of the pool (two
// chunks, one per thread, each touching one cache line). Small nodes never pay it: the plan runs
// them on the calling thread (docs/executor.md, threads per node).
void fork_join(benchmark::State& state) {
  const int threads = int(state.range(0));
  alignas(64) float lines[2][16] = {};
  for (auto _ : state) {
    kfuse::parallel_for(
        0, 2, 1, [&](kfuse::range r, int) { lines[r.begin][0] += 1.f; }, threads);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(lines);
  state.counters["ns_per_fork_join"] = benchmark::Counter(
      double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// A node split over two threads on an idle machine: two chunks of 5 us of spinning each, one per
// thread. Time - 5 us = what the split costs on top of perfect halving (the fork/join target,
// <= 1 us). fork_join/2 above has trivial chunks, which the caller now claims both of before a
// worker arrives: it measures the cost of publishing a job, not of a split.
void split(benchmark::State& state) {
  const int threads = int(state.range(0));
  using kfuse_bench::clock;
  for (auto _ : state) {
    kfuse::parallel_for(
        0, 2, 1,
        [&](kfuse::range, int) {
          const auto until = clock::now() + std::chrono::microseconds(5);
          while (clock::now() < until) {
          }
        },
        threads);
  }
  state.counters["ns_per_split"] = benchmark::Counter(
      double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(split)->Arg(2)->UseRealTime();
BENCHMARK(direct);
BENCHMARK(replay)->Arg(1)->Arg(2);
BENCHMARK(op_by_op)->Arg(1)->Arg(2);
BENCHMARK(replay_fused);
BENCHMARK(fork_join)->Arg(2);
BENCHMARK_MAIN();
