// kfuse's side of the threading benchmark (scripts/bench_threading.sh runs it under the four
// conditions of docs/executor.md "Threading where inference runs": 1 thread, 2 threads, 2 threads
// with the process pinned to one core, 2 threads while a busy loop occupies one core, and ONNX
// Runtime on the same models in the same conditions):
//   kfuse/<model>/threads:T   replay of the fp32 plan compiled with .threads = T
// Models (examples/04_models/models.hpp): MLP 784-1024-1024-10 at batch 1 and 64, the ResNet
// basic block (64 channels, 56x56) at batch 1, a MobileNetV3-style small CNN at batch 1.
// Counters: the plan's split nodes, and the pool's jobs that ran on the caller alone because
// the pool found itself oversubscribed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../examples/04_models/models.hpp"
#include "bench_common.hpp"
#include "kfuse/graph/compile.hpp"
#include "kfuse/tools/machine_limits.hpp"

namespace {

using kfuse::index_t;

struct model {
  kfuse::graph g;
  std::size_t in, out;
};

model make(const std::string& name) {
  if (name == "mlp_b1" || name == "mlp_b64") {
    static const auto w = models::mlp_weights::make(1);
    const index_t b = name == "mlp_b1" ? 1 : 64;
    return {models::build_mlp(w, b).g, std::size_t(b * 784), std::size_t(b * 10)};
  }
  if (name == "block_b1") {
    static const auto w = models::block_weights::make(2, 64);
    return {models::build_block(w, 1, 56, 56).g, std::size_t(64 * 56 * 56), 10};
  }
  static const auto w = models::mobile_weights::make(3);
  return {models::build_mobile(w), std::size_t(3 * 224 * 224), 10};
}

void kfuse_replay(benchmark::State& st, const std::string& name) {
  const int threads = int(st.range(0));
  model m = make(name);
  kfuse::plan p;
  try {
    p = kfuse::compile(m.g, {.threads = threads});
  } catch (const kfuse::error& e) {
    st.SkipWithError(e.what());
    return;
  }
  std::vector<float> x(m.in), y(m.out);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  r.replay();
  for (float v : y)
    if (!std::isfinite(v)) {
      st.SkipWithError("non-finite output");
      return;
    }
  const kfuse::pool_stats before = kfuse::default_pool().stats();
  // Each call timed too: the median call is what ONNX Runtime's line reports; the benchmark's
  // own time is the mean, which a stall of a time slice moves.
  using kfuse_bench::clock;
  std::vector<double> calls;
  calls.reserve(1 << 16);
  for (auto _ : st) {
    const auto t0 = clock::now();
    r.replay();
    benchmark::ClobberMemory();
    if (calls.size() < calls.capacity()) calls.push_back(kfuse_bench::us_since(t0));
  }
  const kfuse::pool_stats after = kfuse::default_pool().stats();
  if (!calls.empty()) {
    std::nth_element(calls.begin(), calls.begin() + long(calls.size() / 2), calls.end());
    st.counters["median_call_us"] = calls[calls.size() / 2];
  }
  int split = 0;
  for (const auto& s : p.steps()) split += s.threads > 1;
  st.counters["split_nodes"] = split;
  st.counters["steps"] = double(p.steps().size());
  st.counters["solo_jobs_per_run"] = double(after.solo_jobs - before.solo_jobs) /
                                     double(std::max<std::int64_t>(1, st.iterations()));
  const double runs = double(std::max<std::int64_t>(1, st.iterations()));
  st.counters["late_per_run"] = double(after.late_jobs - before.late_jobs) / runs;
  st.counters["stalled_per_run"] = double(after.stalled_jobs - before.stalled_jobs) / runs;
  st.counters["jobs_per_run"] =
      double(after.jobs - before.jobs) / double(std::max<std::int64_t>(1, st.iterations()));
}

void threads_args(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_CAPTURE(kfuse_replay, mlp_b1, std::string("mlp_b1"))->Apply(threads_args);
BENCHMARK_CAPTURE(kfuse_replay, mlp_b64, std::string("mlp_b64"))->Apply(threads_args);
BENCHMARK_CAPTURE(kfuse_replay, block_b1, std::string("block_b1"))->Apply(threads_args);
BENCHMARK_CAPTURE(kfuse_replay, mobile_b1, std::string("mobile_b1"))->Apply(threads_args);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("kfuse.pool", kfuse::default_pool().size_reason());
  benchmark::AddCustomContext("kfuse.limits",
                              kfuse_bench::limits_text(kfuse::cached_machine_limits()));
  benchmark::AddCustomContext("kfuse.fork_join_ns",
                              std::to_string(kfuse::default_pool().fork_join_ns()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
