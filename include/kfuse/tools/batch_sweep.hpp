#pragma once
// Batch-size sweep: for each batch size, run the model repeatedly, take the median latency, and
// report throughput and the batch with the best throughput whose latency fits a budget.
//
//   auto sweep = kfuse::batch_sweep([&](int batch) {          // setup, not timed
//     auto run = model.prepare(batch);
//     return [run] { run(); };                                // one timed inference
//   }, {.batches = {1, 2, 4, 8, 16, 32, 64}, .budget_ms = 5});
//   std::printf("%s", kfuse::to_string(sweep).c_str());
//
// The callable may also run the inference itself (returning void): f(batch) is then timed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"

namespace kfuse {

struct sweep_options {
  std::vector<int> batches{1, 2, 4, 8, 16, 32, 64};
  double budget_ms = 0;       // 0: no budget (best = highest throughput)
  int warmup = 2;             // untimed runs per batch
  int min_reps = 5;           // at least this many timed runs per batch
  int max_reps = 1000;        // at most this many
  double min_seconds = 0.05;  // keep timing a batch until this much time was spent
};

struct sweep_point {
  int batch = 0;
  int reps = 0;
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  double items_per_s = 0;  // batch / median
};

struct sweep_result {
  std::vector<sweep_point> points;
  double budget_ms = 0;
  int best = -1;  // index into points of the best batch within the budget, -1: none fits
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Index of the point with the highest throughput among those whose median latency is within
/// `budget_ms` (every point when budget_ms <= 0); -1 when none fits. Ties: the smaller batch.
inline int best_within_budget(const std::vector<sweep_point>& points, double budget_ms) {
  int best = -1;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const sweep_point& p = points[i];
    if (budget_ms > 0 && p.median_s * 1e3 > budget_ms) continue;
    if (best < 0 || p.items_per_s > points[std::size_t(best)].items_per_s) best = int(i);
  }
  return best;
}

/// Median of a sample (mean of the middle two for an even count); sorts `v`.
inline double median_of(std::vector<double>& v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

/// Runs the sweep. `f(batch)` either returns a callable that runs one inference (setup is then
/// untimed) or runs the inference itself.
template <class F>
sweep_result batch_sweep(F&& f, const sweep_options& opt = {}) {
  if (opt.batches.empty()) detail::fail("batch_sweep", "no batch sizes given");
  for (const int b : opt.batches)
    if (b <= 0) detail::fail("batch_sweep", "batch size " + std::to_string(b) + " is not positive");
  if (opt.min_reps < 1 || opt.max_reps < opt.min_reps || opt.warmup < 0)
    detail::fail("batch_sweep", "need 1 <= min_reps <= max_reps and warmup >= 0");
  using clock = std::chrono::steady_clock;
  sweep_result res;
  res.budget_ms = opt.budget_ms;
  std::vector<double> times;
  times.reserve(std::size_t(opt.max_reps));
  for (const int batch : opt.batches) {
    auto measure = [&](auto&& run) {
      for (int i = 0; i < opt.warmup; ++i) run();
      times.clear();
      const auto start = clock::now();
      while (int(times.size()) < opt.max_reps) {
        const auto t0 = clock::now();
        run();
        const auto t1 = clock::now();
        times.push_back(std::chrono::duration<double>(t1 - t0).count());
        if (int(times.size()) >= opt.min_reps &&
            std::chrono::duration<double>(t1 - start).count() >= opt.min_seconds)
          break;
      }
    };
    if constexpr (std::is_void_v<std::invoke_result_t<F&, int>>) {
      measure([&] { f(batch); });
    } else {
      auto run = f(batch);
      measure(run);
    }
    sweep_point p;
    p.batch = batch;
    p.reps = int(times.size());
    p.min_s = *std::min_element(times.begin(), times.end());
    p.max_s = *std::max_element(times.begin(), times.end());
    p.median_s = median_of(times);
    p.items_per_s = p.median_s > 0 ? double(batch) / p.median_s : 0;
    res.points.push_back(p);
  }
  res.best = best_within_budget(res.points, opt.budget_ms);
  return res;
}

/// The sweep as a table, then the verdict on the budget.
inline std::string to_string(const sweep_result& r) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%6s %12s %12s %12s %14s %6s\n", "batch", "median ms", "min ms",
                "max ms", "items/s", "reps");
  out += buf;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const sweep_point& p = r.points[i];
    const bool over = r.budget_ms > 0 && p.median_s * 1e3 > r.budget_ms;
    std::snprintf(buf, sizeof buf, "%6d %12.3f %12.3f %12.3f %14.0f %6d%s\n", p.batch,
                  p.median_s * 1e3, p.min_s * 1e3, p.max_s * 1e3, p.items_per_s, p.reps,
                  int(i) == r.best ? "  <- best"
                  : over           ? "  (over budget)"
                                   : "");
    out += buf;
  }
  if (r.best >= 0) {
    const sweep_point& b = r.points[std::size_t(r.best)];
    if (r.budget_ms > 0)
      std::snprintf(buf, sizeof buf,
                    "best batch within %.3g ms: %d (%.3f ms median, %.0f items/s)\n", r.budget_ms,
                    b.batch, b.median_s * 1e3, b.items_per_s);
    else
      std::snprintf(buf, sizeof buf, "best batch (no budget): %d (%.3f ms median, %.0f items/s)\n",
                    b.batch, b.median_s * 1e3, b.items_per_s);
  } else {
    std::snprintf(buf, sizeof buf, "no batch size meets the %.3g ms budget\n", r.budget_ms);
  }
  out += buf;
  return out;
}

KFUSE_END_NAMESPACE
