// profiler + machine_limits: the probe's figures are sane, the roofline verdicts and table follow
// from exact synthetic events, and the Chrome trace is valid JSON with the fields chrome://tracing
// and Perfetto read (parsed here, and by python3's json module in a separate ctest when present).
#include "kfuse/tools/profiler.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "kfuse/arch/cpu_features.hpp"
#include "tools/json_check.hpp"

#define KFUSE_TEST_STR2(x) #x
#define KFUSE_TEST_STR(x) KFUSE_TEST_STR2(x)

namespace {

bool cpu_can_run() {
  if (kfuse::cpu_supports<kfuse::arch::native>()) return true;
  WARN("CPU lacks " << kfuse::arch::native::name << ": skipped");
  return false;
}

// 100 GFLOP/s per core, 20 GB/s (1 thread), 30 GB/s (2 threads): ridge at 5 (1 thread).
kfuse::machine_limits test_limits() {
  auto m = kfuse::machine_limits::given(100, 20, 2, 200, 400);
  m.mem_gbs_all = 30;
  return m;
}

}  // namespace

TEST_CASE("machine_limits: the probe measures positive figures, cached once", "[tools]") {
  if (!cpu_can_run()) return;
  const kfuse::machine_limits& m = kfuse::cached_machine_limits();
  INFO("f32 " << m.f32_gflops << " bf16 " << m.bf16_gflops << " int8 " << m.int8_gops << " mem "
              << m.mem_gbs_1t << " / " << m.mem_gbs_all);
  CHECK(m.source == "probe");
  // Positive and finite only: the figures depend on the build (-O0 + ASan runs the FMA chains
  // through unoptimised calls) and on the load, and tests never assert timings.
  for (const double v : {m.f32_gflops, m.bf16_gflops, m.int8_gops, m.mem_gbs_1t})
    CHECK((v > 0 && std::isfinite(v)));
  CHECK(m.mem_gbs_all >= m.mem_gbs_1t);
  CHECK(m.cores == kfuse::pool_threads(0));
  CHECK(&kfuse::cached_machine_limits() == &m);
  CHECK(m.peak(kfuse::compute_kind::f32, 1) == m.f32_gflops);
  CHECK(m.peak(kfuse::compute_kind::f32, 1000) == m.f32_gflops * m.cores);
}

TEST_CASE("machine_limits::given fills unstated kinds with the f32 peak", "[tools]") {
  const auto m = kfuse::machine_limits::given(50, 10);
  CHECK(m.source == "given");
  CHECK(m.bf16_gflops == 50);
  CHECK(m.int8_gops == 50);
  CHECK(m.bandwidth(1) == 10);
  CHECK(m.bandwidth(4) == 10);
  CHECK(m.peak(kfuse::compute_kind::int8, 3) == 50);  // one core given
}

TEST_CASE("profiler: rows sorted by time with exact rates and roofline verdicts", "[tools]") {
  kfuse::profiler p(test_limits());
  // gemm: 2e6 flops, 1e5 bytes (intensity 20 > ridge 5) -> compute-bound.
  const auto gemm = p.add_node({"fc1", "gemm+bias+relu", 2e6, 1e5, kfuse::compute_kind::f32, 1});
  // eltwise: 1e4 flops, 1e5 bytes (intensity 0.1) -> memory-bound.
  const auto relu = p.add_node({"act", "eltwise", 1e4, 1e5, kfuse::compute_kind::f32, 1});
  // copy: no flops -> memory-bound, judged by bandwidth; 2 threads use the 2-thread bandwidth.
  const auto copy = p.add_node({"copy", "reshape", 0, 3e5, kfuse::compute_kind::f32, 2});
  // never run: not in the rows.
  p.add_node({"idle", "softmax", 1, 1, kfuse::compute_kind::f32, 1});
  // bf16 node judged against the bf16 peak (200 per core).
  const auto dot = p.add_node({"fc2", "gemm bf16", 4e6, 1e4, kfuse::compute_kind::bf16, 1});
  for (int run = 0; run < 2; ++run) {
    const std::int64_t t = run * 1'000'000;
    p.record(gemm, t + 0, t + 40'000);       // 40 us: 50 GFLOP/s, 2.5 GB/s
    p.record(relu, t + 40'000, t + 50'000);  // 10 us: 1 GFLOP/s, 10 GB/s
    p.record(copy, t + 50'000, t + 70'000);  // 20 us: 15 GB/s
    p.record(dot, t + 70'000, t + 90'000);   // 20 us: 200 GFLOP/s
  }
  const auto rows = p.rows();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].node == gemm);
  CHECK(rows[3].node == relu);
  for (const auto& r : rows) CHECK(r.calls == 2);
  CHECK(rows[0].mean_s == Approx(40e-6));
  CHECK(rows[0].share == Approx(40.0 / 90.0));
  CHECK(rows[0].gflops == Approx(50));
  CHECK(rows[0].gbs == Approx(2.5));
  CHECK(rows[0].intensity == Approx(20));
  CHECK(rows[0].compute_bound);
  CHECK(rows[0].roofline == Approx(0.5));    // 50 of min(100, 20*20)
  CHECK(rows[0].excess_s == Approx(20e-6));  // 40 us against the 20 us of its flops at peak

  const auto& r_relu = rows[3];
  CHECK(r_relu.gflops == Approx(1));
  CHECK(r_relu.gbs == Approx(10));
  CHECK_FALSE(r_relu.compute_bound);
  CHECK(r_relu.roofline == Approx(0.5));   // 1 of min(100, 0.1*20) = 2
  CHECK(r_relu.excess_s == Approx(5e-6));  // 10 us against the 5 us of its bytes at 20 GB/s

  auto find = [&](std::int32_t node) {
    for (const auto& r : rows)
      if (r.node == node) return &r;
    FAIL("node " << node << " has no row");
    return &rows[0];
  };
  const auto* r_copy = find(copy);
  CHECK_FALSE(r_copy->compute_bound);
  CHECK(r_copy->gbs == Approx(15));
  CHECK(r_copy->roofline == Approx(0.5));  // 15 of the 2-thread 30 GB/s
  CHECK(r_copy->excess_s == Approx(10e-6));

  const auto* r_dot = find(dot);
  CHECK(r_dot->compute_bound);
  CHECK(r_dot->gflops == Approx(200));
  CHECK(r_dot->roofline == Approx(1.0));
  CHECK(r_dot->excess_s == Approx(0).margin(1e-12));  // at the bf16 peak: nothing over

  const std::string t = p.table();
  INFO(t);
  CHECK(t.find("compute-bound") != std::string::npos);
  CHECK(t.find("memory-bound") != std::string::npos);
  CHECK(t.find("over us") != std::string::npos);
  CHECK(t.find("idle") == std::string::npos);
  CHECK(t.find("fc1") < t.find("act"));  // sorted by time
  CHECK(t.find("total 90.0 us per run (2 runs)") != std::string::npos);
  CHECK(t.find("limits (given)") != std::string::npos);
}

TEST_CASE("profiler: the table names the arch and vector impl", "[tools]") {
  kfuse::profiler p(test_limits());
  const auto a = p.add_node({"a", "eltwise", 10, 10, kfuse::compute_kind::f32, 1});
  p.record(a, 0, 1000);
  // Default: this TU's default kernels (arch::native, xsimd). The generic copy of this test is
  // built with KFUSE_FORCE_GENERIC, so it is "generic (scalar)", asked for, not the fallback.
  const std::string native = std::string(kfuse::arch::native::name) + " (" +
                             kfuse::simd::impl_name<kfuse::arch::native, kfuse::backend::xsimd>() +
                             ")";
  std::string t = p.table();
  INFO(t);
  CHECK_FALSE(p.target_given());
  CHECK(t.find("\narch (this TU's default kernels): " + native + "\npool: ") != std::string::npos);
  CHECK(t.find("scalar fallback") == std::string::npos);

  // Named explicitly (replay_profiler does this with the plan's target).
  p.set_target(kfuse::make_target_info<kfuse::arch::generic>("scalar"));
  t = p.table();
  CHECK(p.target_given());
  CHECK(t.find("\narch: generic (scalar)\n") != std::string::npos);

  // A plan compiled without SIMD -march flags (tests/first_use builds such a TU).
  p.set_target(kfuse::target_info{"generic", "scalar", true});
  t = p.table();
  CHECK(t.find("\narch: generic (scalar) -- scalar fallback: compiled without -march flags for a "
               "SIMD target; build with -march=native") != std::string::npos);
}

TEST_CASE("profiler: begin/end, time(), continued events and bad use", "[tools]") {
  kfuse::profiler p(test_limits());
  const auto a = p.add_node({"a", "eltwise", 10, 10, kfuse::compute_kind::f32, 1});
  p.reserve(16);
  p.begin(a);
  p.end(a);
  volatile int sink = 0;
  p.time(a, [&] { sink = sink + 1; });
  REQUIRE(p.events().size() == 2);
  CHECK(p.events()[0].end_ns >= p.events()[0].start_ns);
  CHECK(p.events()[1].start_ns >= p.events()[0].end_ns);
  CHECK_THROWS_WITH(p.end(a), Catch::Contains("end(0) without begin"));

  // A node run as two commands is one event per run.
  p.clear_events();
  p.record(a, 100, 200);
  p.record(a, 200, 350, 0, true);
  p.record(a, 1000, 1100);
  REQUIRE(p.events().size() == 2);
  CHECK(p.events()[0].end_ns == 350);

  // Steady-clock nanoseconds from a hook map onto the profiler's origin.
  const auto now = std::chrono::steady_clock::now();
  const std::int64_t steady =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  CHECK(p.from_steady_ns(steady) == p.to_ns(now));

  p.record(7, 0, 1);
  CHECK_THROWS_WITH(p.rows(), Catch::Contains("unknown node 7"));
  CHECK_THROWS_AS(p.write_chrome_trace("/nonexistent-dir/x/trace.json"), kfuse::error);
}

TEST_CASE("profiler: Chrome trace JSON parses, with X events in microseconds", "[tools][trace]") {
  kfuse::profiler p(test_limits());
  const auto a =
      p.add_node({"conv \"1\"\\a\nb", "conv2d", 1.5e9, 2.5e6, kfuse::compute_kind::int8, 2});
  const auto b = p.add_node({"pool", "pool2d", 0, 1024, kfuse::compute_kind::f32, 1});
  p.record(a, 1'500, 3'250, 0);
  p.record(b, 3'250, 4'000, 1);
  const std::string s = p.chrome_trace();
  INFO(s);
  kt::json::value doc;
  REQUIRE_NOTHROW(doc = kt::json::parse(s));
  const auto& ev = doc["traceEvents"];
  REQUIRE(ev.k == kt::json::value::kind::array);
  REQUIRE(ev.arr.size() == 2);
  const auto& e0 = ev.arr[0];
  CHECK(e0["name"].str == "conv \"1\"\\a\nb");
  CHECK(e0["cat"].str == "conv2d");
  CHECK(e0["ph"].str == "X");
  CHECK(e0["ts"].num == Approx(1.5));
  CHECK(e0["dur"].num == Approx(1.75));
  CHECK(e0["pid"].num == 1);
  CHECK(e0["tid"].num == 0);
  CHECK(e0["args"]["flops"].num == 1.5e9);
  CHECK(e0["args"]["bytes"].num == 2.5e6);
  CHECK(e0["args"]["threads"].num == 2);
  CHECK(e0["args"]["compute"].str == "int8");
  CHECK(ev.arr[1]["tid"].num == 1);
  CHECK(ev.arr[1]["dur"].num == Approx(0.75));

  // The file the python3 json check (a separate ctest) reads.
  const std::string path = "kfuse_profiler_trace_" KFUSE_TEST_STR(KFUSE_ISA_NS) ".json";
  p.write_chrome_trace(path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK(ss.str() == s);

  kfuse::profiler empty(test_limits());
  CHECK_NOTHROW(kt::json::parse(empty.chrome_trace()));
  CHECK(kt::json::parse(empty.chrome_trace())["traceEvents"].arr.empty());
}

TEST_CASE("json_check rejects malformed documents", "[tools]") {
  for (const char* bad :
       {"{", "{\"a\":}", "[1,]", "{\"a\" 1}", "\"x", "01", "1.", "tru", "{\"a\":1}x", "[\"\\q\"]"})
    CHECK_THROWS_AS(kt::json::parse(bad), std::runtime_error);
  CHECK(kt::json::parse(" {\"a\": [1, -2.5e3, true, null, \"\\u0041\"]} ")["a"].arr[4].str == "A");
}
