// batch_sweep: setup once per batch and untimed, repetition rules, best batch within a budget on
// synthetic points, medians, the table and the errors. No assertion on measured times.
#include "kfuse/tools/batch_sweep.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <vector>

namespace {

kfuse::sweep_point point(int batch, double ms) {
  kfuse::sweep_point p;
  p.batch = batch;
  p.median_s = p.min_s = p.max_s = ms * 1e-3;
  p.items_per_s = batch / (ms * 1e-3);
  p.reps = 5;
  return p;
}

}  // namespace

TEST_CASE("batch_sweep: a setup callable runs once per batch, its runner is timed", "[tools]") {
  std::map<int, int> setups, runs;
  kfuse::sweep_options opt;
  opt.batches = {1, 3, 8};
  opt.warmup = 2;
  opt.min_reps = 4;
  opt.max_reps = 6;
  opt.min_seconds = 0;
  const auto res = kfuse::batch_sweep(
      [&](int batch) {
        ++setups[batch];
        return [&runs, batch] { ++runs[batch]; };
      },
      opt);
  REQUIRE(res.points.size() == 3);
  for (const int b : opt.batches) {
    CHECK(setups[b] == 1);
    CHECK(runs[b] == 2 + 4);  // warm-up + min_reps (min_seconds 0 stops at min_reps)
  }
  CHECK(res.points[1].batch == 3);
  CHECK(res.points[1].reps == 4);
  for (const auto& p : res.points) {
    CHECK(p.min_s <= p.median_s);
    CHECK(p.median_s <= p.max_s);
    CHECK(p.items_per_s == Approx(p.batch / p.median_s));
  }
  CHECK(res.best >= 0);  // no budget: the highest throughput
}

TEST_CASE("batch_sweep: a callable that runs the inference itself, max_reps bounds it", "[tools]") {
  int calls = 0;
  kfuse::sweep_options opt;
  opt.batches = {2};
  opt.warmup = 0;
  opt.min_reps = 1;
  opt.max_reps = 7;
  opt.min_seconds = 3600;  // would run for an hour without max_reps
  const auto res = kfuse::batch_sweep([&](int b) { calls += b; }, opt);
  CHECK(calls == 2 * 7);
  CHECK(res.points.at(0).reps == 7);
}

TEST_CASE("best_within_budget and median_of", "[tools]") {
  // Latencies grow with batch; throughput too, until batch 64 stalls.
  const std::vector<kfuse::sweep_point> pts{point(1, 0.5), point(8, 1.0), point(16, 4.0),
                                            point(32, 6.0), point(64, 13.0)};
  CHECK(kfuse::best_within_budget(pts, 5.0) == 1);   // 8000/s beats 16 at 4 ms (4000/s)
  CHECK(kfuse::best_within_budget(pts, 0.0) == 1);   // no budget: 8000/s is the best anyway
  CHECK(kfuse::best_within_budget(pts, 0.4) == -1);  // nothing fits
  const std::vector<kfuse::sweep_point> rising{point(1, 1.0), point(2, 1.5), point(4, 2.5)};
  CHECK(kfuse::best_within_budget(rising, 2.0) == 1);
  CHECK(kfuse::best_within_budget(rising, 2.5) == 2);
  const std::vector<kfuse::sweep_point> tie{point(1, 1.0), point(2, 2.0)};
  CHECK(kfuse::best_within_budget(tie, 0) == 0);  // equal throughput: the smaller batch

  std::vector<double> odd{3, 1, 2}, even{4, 1, 3, 2}, none;
  CHECK(kfuse::median_of(odd) == 2);
  CHECK(kfuse::median_of(even) == 2.5);
  CHECK(kfuse::median_of(none) == 0);
}

TEST_CASE("batch_sweep: the table marks the best batch and says when none fits", "[tools]") {
  kfuse::sweep_result r;
  r.points = {point(1, 0.5), point(8, 1.0), point(16, 4.0)};
  r.budget_ms = 2;
  r.best = kfuse::best_within_budget(r.points, r.budget_ms);
  const std::string t = kfuse::to_string(r);
  INFO(t);
  CHECK(t.find("<- best") != std::string::npos);
  CHECK(t.find("(over budget)") != std::string::npos);
  CHECK(t.find("best batch within 2 ms: 8") != std::string::npos);
  r.budget_ms = 0.1;
  r.best = kfuse::best_within_budget(r.points, r.budget_ms);
  CHECK(kfuse::to_string(r).find("no batch size meets the 0.1 ms budget") != std::string::npos);
}

TEST_CASE("batch_sweep: bad options throw naming batch_sweep", "[tools]") {
  auto noop = [](int) {};
  kfuse::sweep_options opt;
  opt.batches = {};
  CHECK_THROWS_WITH(kfuse::batch_sweep(noop, opt), Catch::Contains("batch_sweep: no batch sizes"));
  opt.batches = {1, 0};
  CHECK_THROWS_WITH(kfuse::batch_sweep(noop, opt), Catch::Contains("batch size 0"));
  opt.batches = {1};
  opt.min_reps = 0;
  CHECK_THROWS_AS(kfuse::batch_sweep(noop, opt), kfuse::error);
}
