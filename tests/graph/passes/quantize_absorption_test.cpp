// The quantize absorption pass (graph/passes/quantize_absorption.hpp) on the steps alone.
#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;

namespace {

/// x -> fc1 (f32) -> relu -> fc2 (precision p2) [-> quantize u8 node].
graph mlp(precision p2, bool explicit_quantize, bool hidden_is_output = false) {
  graph g;
  auto x = g.input("x", {2, 8});
  const auto w1 = filled(64), w2 = filled(32);
  auto h = g.relu("act", g.linear("fc1", x, g.constant("w1", {8, 8}, w1.data())));
  g.set_quant(h, {0.05f, 3});
  if (hidden_is_output) g.output(h);
  if (explicit_quantize) {
    g.output(g.quantize("q", h, dtype::u8, {0.05f, 3}));
    return g;
  }
  g.output(g.linear("fc2", h, g.constant("w2", {4, 8}, w2.data()), {}, p2));
  return g;
}

}  // namespace

TEST_CASE("quantize absorption: an int8 linear's input is written as u8 by its producer") {
  const graph g = mlp(precision::int8, false);
  const analyzed a(g);
  const detail::step& fc1 = a.step_of("fc1");
  CHECK(a.tensor(fc1.out).type == dtype::u8);
  CHECK(fc1.out_quant.scale == 0.05f);
  CHECK(fc1.out_quant.zero_point == 3);
  CHECK(a.cx.d->report.fused.back() == "fused quantize of fc2's input (u8) into fc1 (linear)");
}

TEST_CASE("quantize absorption: not without an int8 kernel, nor into a tensor read elsewhere") {
  {
    const graph g = mlp(precision::int8, false);
    const analyzed a(g, {}, /*int8_gemm=*/false);
    CHECK(a.tensor(a.step_of("fc1").out).type == dtype::f32);
  }
  {
    const graph g = mlp(precision::int8, false, /*hidden_is_output=*/true);
    const analyzed a(g);
    CHECK(a.tensor(a.step_of("fc1").out).type == dtype::f32);
  }
  {
    const graph g = mlp(precision::f32, false);  // an f32 consumer reads f32
    const analyzed a(g);
    CHECK(a.tensor(a.step_of("fc1").out).type == dtype::f32);
  }
}

TEST_CASE("quantize absorption: an explicit quantize node joins its producer") {
  const graph g = mlp(precision::f32, true);
  const analyzed a(g);
  REQUIRE(a.live().size() == 1);
  const detail::step& fc1 = a.step_of("fc1");
  CHECK(a.tensor(fc1.out).type == dtype::u8);
  CHECK(fc1.fused == std::vector<std::string>{"act", "q"});
  CHECK(a.cx.d->report.fused.back() == "fused q (quantize u8) into fc1 (linear)");
}

TEST_CASE("quantize absorption: a depthwise conv keeps the separate quantize") {
  graph g;
  auto x = g.input("x", {1, 4, 6, 6}, dtype::f32, tensor_layout::nhwc);
  const auto w = filled(4 * 9);
  conv2d_params p;
  p.groups = 4;
  p.prec = precision::int8;
  auto c = g.conv2d("dw", x, g.constant("w", {4, 1, 3, 3}, w.data()), {}, p);
  g.output(g.quantize("q", c, dtype::u8, {0.1f, 0}));
  const analyzed a(g);
  CHECK(a.live().size() == 2);
  CHECK(a.tensor(a.step_of("dw").out).type == dtype::f32);
}
