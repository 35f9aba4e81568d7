// The tools on a compiled plan: replay_profiler records one event per step per replay through
// the executor's hook (and the trace parses), calibrate_graph observes inputs and intermediate
// activations exactly as a direct computation does, and the int8 plan built from it agrees with
// the fp32 plan.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/arch/cpu_features.hpp"
#include "kfuse/tools/accuracy.hpp"
#include "kfuse/tools/calibrate_graph.hpp"
#include "kfuse/tools/replay_profiler.hpp"
#include "tools/json_check.hpp"

namespace {

using kfuse::index_t;

struct small_mlp {
  static constexpr index_t M = 6, K = 40, N = 24;
  std::vector<float> w, b;
  kfuse::graph g;
  kfuse::tensor_id x, h, y;
  explicit small_mlp(std::uint64_t seed) {
    std::mt19937 rng{static_cast<unsigned>(seed)};
    std::normal_distribution<float> nd(0.f, std::sqrt(2.f / K));
    w.resize(std::size_t(N * K));
    b.resize(std::size_t(N));
    for (auto& v : w) v = nd(rng);
    for (auto& v : b) v = 0.1f * nd(rng);
    x = g.input("x", {M, K});
    auto wt = g.constant("fc.w", {N, K}, w.data());
    auto bt = g.constant("fc.b", {N}, b.data());
    h = g.relu("relu", g.linear("fc", x, wt, bt));
    y = g.scale("out", h, 2.f);
    g.output(y);
  }
  // relu(x . W^T + b) in double.
  std::vector<double> hidden(const std::vector<float>& xv) const {
    std::vector<double> out(static_cast<std::size_t>(M * N));
    for (index_t m = 0; m < M; ++m)
      for (index_t n = 0; n < N; ++n) {
        double s = b[std::size_t(n)];
        for (index_t k = 0; k < K; ++k)
          s += double(xv[std::size_t(m * K + k)]) * double(w[std::size_t(n * K + k)]);
        out[std::size_t(m * N + n)] = std::max(s, 0.0);
      }
    return out;
  }
};

std::vector<float> normal(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& e : v) e = nd(rng);
  return v;
}

}  // namespace

TEST_CASE("replay_profiler: one event per step per replay, trace parses", "[tools][graph]") {
  small_mlp m(1);
  const kfuse::plan p = kfuse::compile(m.g, {.threads = 1});
  const auto x = normal(std::size_t(small_mlp::M * small_mlp::K), 2);
  std::vector<float> y(std::size_t(small_mlp::M * small_mlp::N));
  auto r = p.record({kfuse::bind(x)}, {kfuse::bind(y)});
  kfuse::profiler prof(kfuse::machine_limits::given(100, 20));
  kfuse::replay_profiler rp(prof, r, "m.");
  REQUIRE(prof.nodes().size() == p.steps().size());
  constexpr int runs = 7;
  for (int i = 0; i < runs; ++i) r.replay(rp.hook());
  const auto rows = prof.rows();
  REQUIRE(rows.size() == p.steps().size());
  for (const auto& row : rows) {
    const auto& step = p.steps()[std::size_t(row.node)];
    INFO(step.name << " " << step.kernel);
    CHECK(row.calls == runs);
    CHECK(prof.nodes()[std::size_t(row.node)].name == "m." + step.name);
    CHECK(prof.nodes()[std::size_t(row.node)].flops == step.flops);
    CHECK(row.total_s > 0);
  }
  // Events of one replay follow the plan order and do not overlap.
  const auto& ev = prof.events();
  REQUIRE(ev.size() == runs * p.steps().size());
  for (std::size_t i = 1; i < ev.size(); ++i) CHECK(ev[i].start_ns >= ev[i - 1].end_ns);
  const auto doc = kt::json::parse(prof.chrome_trace());
  CHECK(doc["traceEvents"].arr.size() == ev.size());
  const std::string table = prof.table();
  CHECK(table.find("m.fc") != std::string::npos);
  // The arch line names what the plan was compiled for (replay_profiler takes it from the steps).
  INFO(table);
  CHECK(prof.target_given());
  CHECK(prof.target().text() == p.report().target.text());
  CHECK(table.find("\narch: " + std::string(kfuse::arch::native::name) + " (" +
                   kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::xsimd>() + ")\n") !=
        std::string::npos);

  // The hooked replay computes the same as the plain one.
  std::vector<float> y2(y.size());
  auto r2 = p.record({kfuse::bind(x)}, {kfuse::bind(y2)});
  r2.replay();
  CHECK(y == y2);
}

TEST_CASE("calibrate_graph: observes inputs and activations exactly", "[tools][graph]") {
  small_mlp m(3);
  std::vector<std::vector<float>> samples;
  for (unsigned s = 0; s < 3; ++s)
    samples.push_back(normal(std::size_t(small_mlp::M * small_mlp::K), 10 + s));
  const std::vector<kfuse::tensor_id> targets{m.x, m.h};
  const auto cal = kfuse::calibrate_graph(m.g, targets, samples, {kfuse::observer_method::minmax});
  REQUIRE(cal.tensors.size() == 2);
  double xlo = 1e30, xhi = -1e30, hhi = 0;
  for (const auto& s : samples) {
    for (float v : s) {
      xlo = std::min(xlo, double(v));
      xhi = std::max(xhi, double(v));
    }
    for (double v : m.hidden(s)) hhi = std::max(hhi, v);
  }
  CHECK(cal.ranges[0].lo == float(xlo));
  CHECK(cal.ranges[0].hi == float(xhi));
  CHECK(cal.ranges[1].lo == 0.f);
  CHECK(cal.ranges[1].hi == Approx(hhi).epsilon(1e-5));
  CHECK(cal.observed[0] == 3 * small_mlp::M * small_mlp::K);
  CHECK(cal.observed[1] == 3 * small_mlp::M * small_mlp::N);
  CHECK(cal.quant[1].zero_point == 0);
  CHECK(cal.quant[1].scale == Approx(hhi / 255).epsilon(1e-5));

  // Errors: a constant, a sample of the wrong size.
  const std::vector<kfuse::tensor_id> bad{m.g.find("fc.w")};
  CHECK_THROWS_WITH(kfuse::calibrate_graph(m.g, bad, samples), Catch::Contains("is a constant"));
  std::vector<std::vector<float>> wrong{std::vector<float>(5)};
  CHECK_THROWS_WITH(kfuse::calibrate_graph(m.g, targets, wrong),
                    Catch::Contains("a sample has 5 values"));
}

// A transformer-like graph: int64 token ids (gathered from a table) and an f32 mask, both
// inputs; each sample binds both; the linear's input (the masked embeddings) is observed.
TEST_CASE("calibrate_graph: samples of several inputs of any type", "[tools][graph]") {
  kfuse::graph g;
  const auto ids = g.input("ids", {4}, kfuse::dtype::i64);
  const auto mask = g.input("mask", {4, 3});
  std::vector<float> table(5 * 3), w(2 * 3, 0.5f);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = float(i) - 7.f;
  const auto t = g.constant("table", {5, 3}, table.data());
  const auto e = g.gather("emb", t, ids);
  const auto h = g.eltwise("masked", e, {{kfuse::stage_kind::mul, 0, 0, mask}});
  g.output(g.linear("fc", h, g.constant("fc.w", {2, 3}, w.data())));
  std::vector<std::int64_t> id0 = {0, 4, 2, 4}, id1 = {1, 1, 3, 0};
  std::vector<float> m0(12, 1.f), m1(12, 2.f);
  const std::vector<std::vector<kfuse::binding>> samples = {{kfuse::bind(id0), kfuse::bind(m0)},
                                                            {kfuse::bind(id1), kfuse::bind(m1)}};
  const std::vector<kfuse::tensor_id> targets{h, mask};
  const auto cal =
      kfuse::calibrate_graph(g, targets, std::span<const std::vector<kfuse::binding>>(samples),
                             {kfuse::observer_method::minmax});
  // Sample 0: rows 0, 4, 2, 4 -> values -7 .. 7; sample 1: 2 x rows 1, 1, 3, 0 -> -14 .. 8.
  CHECK(cal.ranges[0].lo == -14.f);
  CHECK(cal.ranges[0].hi == 8.f);
  CHECK(cal.ranges[1].lo == 1.f);  // the f32 input itself
  CHECK(cal.ranges[1].hi == 2.f);
  CHECK(cal.observed[0] == 24);
  // A sample that binds one input of two, or the wrong type, is an error.
  const std::vector<std::vector<kfuse::binding>> short_sample = {{kfuse::bind(id0)}};
  CHECK_THROWS_WITH(kfuse::calibrate_graph(
                        g, targets, std::span<const std::vector<kfuse::binding>>(short_sample)),
                    Catch::Contains("binds 1 inputs, the graph has 2"));
}

TEST_CASE("calibrate_graph: the calibrated int8 plan agrees with fp32", "[tools][graph]") {
  if (!kfuse::cpu_supports<kfuse::arch::native>()) return;
  small_mlp m(5);
  std::vector<std::vector<float>> samples;
  for (unsigned s = 0; s < 4; ++s)
    samples.push_back(normal(std::size_t(small_mlp::M * small_mlp::K), 20 + s));
  const std::vector<kfuse::tensor_id> targets{m.x};
  const auto cal =
      kfuse::calibrate_graph(m.g, targets, samples, {kfuse::observer_method::percentile, 99.9});
  kfuse::graph g8 = m.g;
  kfuse::apply_calibration(g8, cal);
  kfuse::plan p8;
  try {
    p8 = kfuse::compile(g8, {.threads = 1, .prec = kfuse::precision::int8});
  } catch (const kfuse::error& e) {
    WARN("no int8 plan on this arch: " << e.what());
    return;
  }
  const kfuse::plan p32 = kfuse::compile(m.g, {.threads = 1});
  const auto x = normal(std::size_t(small_mlp::M * small_mlp::K), 99);
  std::vector<float> y32(std::size_t(small_mlp::M * small_mlp::N)), y8(y32.size());
  p32.record({kfuse::bind(x)}, {kfuse::bind(y32)}).replay();
  p8.record({kfuse::bind(x)}, {kfuse::bind(y8)}).replay();
  const auto rep = kfuse::compare_outputs(y32, y8, small_mlp::M);
  INFO(kfuse::to_string(rep));
  CHECK(rep.cosine > 0.999);
  CHECK(rep.nonfinite == 0);
}
