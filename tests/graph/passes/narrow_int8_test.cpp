// The narrow-int8 pass (graph/passes/narrow_int8.hpp): in an int8 plan, a dense conv of at most
// 16 output channels that inherits the plan's precision runs in f32 and the report says so.
#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;

namespace {

/// x [1, 8, 6, 6] nhwc -> conv "c" (k outputs, 1x1 or 3x3), calibrated input.
graph narrow_conv(index_t k, precision own = precision::inherit, index_t kernel = 1,
                  index_t groups = 1) {
  graph g;
  auto x = g.input("x", {1, 8, 6, 6}, dtype::f32, tensor_layout::nhwc);
  g.set_quant(x, {4.f / 255, 128});
  const auto w = filled(std::size_t(k * (8 / groups) * kernel * kernel));
  conv2d_params cp;
  cp.prec = own;
  cp.groups = groups;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = kernel / 2;
  g.output(g.conv2d("c", x, g.constant("w", {k, 8 / groups, kernel, kernel}, w.data()), {}, cp));
  return g;
}

bool noted(const analyzed& a) {
  for (const std::string& n : a.cx.d->report.notes)
    if (n.find("int8: convs with at most 16 output channels run in f32") != std::string::npos)
      return true;
  return false;
}

precision prec_of(const analyzed& a) { return a.cx.precision_of(a.cx.node_of(a.step_of("c"))); }

}  // namespace

TEST_CASE("narrow int8: an int8 plan's conv of at most 16 outputs runs in f32, and says so") {
  for (const index_t kernel : {index_t(1), index_t(3)}) {
    for (const index_t k : {index_t(1), index_t(16)}) {
      const graph g = narrow_conv(k, precision::inherit, kernel);
      const analyzed a(g, compile_options{.prec = precision::int8});
      CHECK(prec_of(a) == precision::f32);
      CHECK(noted(a));
    }
  }
}

TEST_CASE("narrow int8: what stays int8") {
  SECTION("17 outputs") {
    const graph g = narrow_conv(17);
    const analyzed a(g, compile_options{.prec = precision::int8});
    CHECK(prec_of(a) == precision::int8);
    CHECK_FALSE(noted(a));
  }
  SECTION("a node that asks for int8 itself") {
    const graph g = narrow_conv(8, precision::int8);
    const analyzed a(g, compile_options{.prec = precision::int8});
    CHECK(prec_of(a) == precision::int8);
    CHECK_FALSE(noted(a));
  }
  SECTION("a grouped conv") {
    const graph g = narrow_conv(8, precision::inherit, 3, 2);
    const analyzed a(g, compile_options{.prec = precision::int8});
    CHECK(prec_of(a) == precision::int8);
  }
  SECTION("an arch without an int8 GEMM (the plan runs f32 anyway)") {
    const graph g = narrow_conv(8);
    const analyzed a(g, compile_options{.prec = precision::int8}, false);
    CHECK_FALSE(noted(a));
  }
  SECTION("an f32 or bf16 plan") {
    const graph g = narrow_conv(8);
    for (const precision p : {precision::f32, precision::bf16}) {
      const analyzed a(g, compile_options{.prec = p});
      CHECK(prec_of(a) == p);
      CHECK_FALSE(noted(a));
    }
  }
}
