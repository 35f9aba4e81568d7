// The quantize absorption pass (graph/passes/quantize_absorption.hpp) on the steps alone.
#include <algorithm>

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

namespace {

/// NHWC x -> pw (1x1, 8 -> 16) -> relu -> dw (3x3 depthwise) -> proj (1x1, 16 -> 8) -> output,
/// [dw also an output].
graph mobile_block(bool dw_is_output = false) {
  graph g;
  auto x = g.input("x", {1, 8, 6, 6}, dtype::f32, tensor_layout::nhwc);
  const auto w1 = filled(16 * 8), wd = filled(16 * 9), w2 = filled(8 * 16);
  auto h = g.relu("act", g.conv2d("pw", x, g.constant("w1", {16, 8, 1, 1}, w1.data())));
  conv2d_params dp;
  dp.groups = 16;
  dp.pad_top = dp.pad_left = dp.pad_bottom = dp.pad_right = 1;
  auto d = g.conv2d("dw", h, g.constant("wd", {16, 1, 3, 3}, wd.data()), {}, dp);
  if (dw_is_output) g.output(d);
  g.output(g.conv2d("proj", d, g.constant("w2", {8, 16, 1, 1}, w2.data())));
  return g;
}

}  // namespace

TEST_CASE("bf16 absorption: a bf16 conv's input is written as bf16 by the bf16 conv before it") {
  const graph g = mobile_block();
  const analyzed a(g, {.prec = precision::bf16, .choose_layout = false, .emulated_bf16 = true});
  CHECK(a.tensor(a.step_of("pw").out).type == dtype::bf16);
  CHECK(a.tensor(a.step_of("pw").out).bytes == 16 * 36 * 2);
  CHECK(a.tensor(a.step_of("dw").out).type == dtype::bf16);
  CHECK(a.tensor(a.step_of("proj").out).type == dtype::f32);  // a graph output
  const auto& f = a.cx.d->report.fused;
  CHECK(std::count(f.begin(), f.end(), "bf16 output of pw (read as bf16 by dw)") == 1);
}

TEST_CASE("bf16 absorption: not in f32 plans, nor into a tensor read elsewhere") {
  {
    const graph g = mobile_block();
    const analyzed a(g, {.prec = precision::f32, .choose_layout = false});
    CHECK(a.tensor(a.step_of("pw").out).type == dtype::f32);
  }
  {
    const graph g = mobile_block(true);
    const analyzed a(g, {.prec = precision::bf16, .choose_layout = false, .emulated_bf16 = true});
    CHECK(a.tensor(a.step_of("pw").out).type == dtype::bf16);
    CHECK(a.tensor(a.step_of("dw").out).type == dtype::f32);  // also a graph output
  }
}
