// First use: this TU is compiled with -march=x86-64 and without KFUSE_FORCE_GENERIC, as a plain
// `g++ -std=c++20` build of a user's program is. arch::native is then the one-lane generic arch,
// and target_of(), the profiler table and the fusion report say "scalar fallback" with what to
// do about it, instead of running scalar code without a word.
#include <catch2/catch.hpp>
#include <string>

#include "kfuse/graph/plan.hpp"
#include "kfuse/simd/target.hpp"
#include "kfuse/tools/profiler.hpp"

namespace {

constexpr const char* fallback_text =
    "generic (scalar) -- scalar fallback: compiled without -march flags for a SIMD target; build "
    "with -march=native (or e.g. -march=x86-64-v3) or kfuse_add_arch_sources, see "
    "docs/toolchain.md";

}  // namespace

TEST_CASE("first use: without SIMD -march flags arch::native is the scalar fallback",
          "[first_use]") {
  STATIC_REQUIRE(KFUSE_SCALAR_FALLBACK == 1);
  STATIC_REQUIRE(std::is_same_v<kfuse::arch::native, kfuse::arch::generic>);
  for (const kfuse::target_info& t :
       {kfuse::target_of(), kfuse::target_of<kfuse::arch::native, kfuse::backend::hwy>()}) {
    CHECK(t.arch == "generic");
    CHECK(t.impl == "scalar");
    CHECK(t.scalar_fallback);
    CHECK(t.text() == fallback_text);
  }
}

TEST_CASE("first use: the profiler table and the fusion report print the scalar fallback",
          "[first_use]") {
  kfuse::profiler p(kfuse::machine_limits::given(100, 20));
  const auto n = p.add_node({"fc", "gemm f32", 1000, 100, kfuse::compute_kind::f32, 1});
  p.record(n, 0, 1000);
  const std::string table = p.table();
  INFO(table);
  CHECK(table.find(std::string("\narch (this TU's default kernels): ") + fallback_text + "\n") !=
        std::string::npos);

  // The report of a plan compiled here: compile<A, B>() records make_target_info<A>(impl).
  kfuse::fusion_report r;
  r.nodes_before = 3;
  r.nodes_after = 2;
  r.fused.push_back("fused relu (eltwise) into fc (linear)");
  r.target = kfuse::make_target_info<kfuse::arch::native>("scalar");
  CHECK(r.text() == std::string("arch: ") + fallback_text +
                        "\nfusion: 3 nodes -> 2 steps\n  fused relu (eltwise) into fc (linear)\n");
}
