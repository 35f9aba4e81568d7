// The fusion pass (graph/passes/fusion.hpp) on the steps alone: which eltwise steps are absorbed
// into which producers, batch-norm folding, and every reason not to fuse.
#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;
using kfuse::stage_kind;

namespace {

/// x -> linear(+bias) -> relu -> add(skip): one step [bias, relu, add].
graph linear_relu_add(bool output_hidden = false) {
  graph g;
  auto x = g.input("x", {4, 8});
  auto skip = g.input("skip", {4, 6});
  const auto w = filled(48), b = filled(6);
  auto h = g.linear("fc", x, g.constant("w", {6, 8}, w.data()), g.constant("b", {6}, b.data()));
  auto r = g.relu("act", h);
  g.output(g.add("res", r, skip));
  if (output_hidden) g.output(r);
  return g;
}

graph conv_bn_relu(bool conv_bias) {
  graph g;
  auto x = g.input("x", {1, 3, 8, 8}, dtype::f32, tensor_layout::nchw);
  const auto w = filled(4 * 3 * 9), b = filled(4), m = filled(4, 0.1f), v = filled(4, 0.5f);
  conv2d_params p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  auto c = conv_bias ? g.conv2d("conv", x, g.constant("w", {4, 3, 3, 3}, w.data()),
                                g.constant("b", {4}, b.data()), p)
                     : g.conv2d("conv", x, g.constant("w", {4, 3, 3, 3}, w.data()), {}, p);
  auto bn =
      g.batch_norm("bn", c, g.constant("mean", {4}, m.data()), g.constant("var", {4}, v.data()),
                   g.constant("gamma", {4}, v.data()), g.constant("beta", {4}, m.data()));
  g.output(g.relu("act", bn));
  return g;
}

}  // namespace

TEST_CASE("fusion: an eltwise chain joins its producer's epilogue") {
  const graph g = linear_relu_add();
  const analyzed a(g);
  REQUIRE(a.live().size() == 1);
  CHECK(a.chain("fc") == std::vector{stage_kind::bias, stage_kind::relu, stage_kind::add});
  CHECK(a.step_of("fc").fused == std::vector<std::string>{"act", "res"});
  CHECK(a.cx.d->report.fused.size() == 2);
  CHECK(a.cx.d->report.fused[0] == "fused act (eltwise) into fc (linear)");
  CHECK(a.cx.d->report.nodes_before == 3);
}

TEST_CASE("fusion: off, nothing moves") {
  const graph g = linear_relu_add();
  const analyzed a(g, compile_options{.fuse = false});
  CHECK(a.live().size() == 3);
  CHECK(a.chain("fc") == std::vector{stage_kind::bias});
  CHECK(a.cx.d->report.fused.empty());
}

TEST_CASE("fusion: a tensor that is a graph output or read twice stays") {
  const graph g = linear_relu_add(/*output_hidden=*/true);
  const analyzed a(g);
  // relu's output is a graph output: relu joins fc, the add cannot join it.
  CHECK(a.live().size() == 2);
  CHECK(a.chain("fc") == std::vector{stage_kind::bias, stage_kind::relu});
  CHECK(a.chain("res") == std::vector{stage_kind::add});

  graph g2;
  auto x = g2.input("x", {2, 4});
  const auto w = filled(16);
  auto h = g2.linear("fc", x, g2.constant("w", {4, 4}, w.data()));
  g2.output(g2.relu("a", h));
  g2.output(g2.sigmoid("b", h));  // h read twice
  const analyzed a2(g2);
  CHECK(a2.live().size() == 3);
}

TEST_CASE("fusion: add(skip, y) is swapped so that y's producer absorbs it") {
  graph g;
  auto x = g.input("x", {2, 4});
  auto skip = g.input("skip", {2, 4});
  const auto w = filled(16);
  auto y = g.linear("fc", x, g.constant("w", {4, 4}, w.data()));
  g.output(g.add("res", skip, y));
  const analyzed a(g);
  REQUIRE(a.live().size() == 1);
  const detail::step& s = a.step_of("fc");
  REQUIRE(s.chain.size() == 1);
  CHECK(s.chain[0].operand == skip.index);
}

TEST_CASE("fusion: a chain beyond the operand limit is not absorbed") {
  graph g;
  auto x = g.input("x", {2, 4});
  std::vector<tensor_id> ops;
  for (int i = 0; i < graph_ops::chain_max_operands; ++i)
    ops.push_back(g.input("o" + std::to_string(i), {2, 4}));
  const auto w = filled(16), b = filled(4);
  auto h = g.linear("fc", x, g.constant("w", {4, 4}, w.data()), g.constant("b", {4}, b.data()));
  for (int i = 0; i < graph_ops::chain_max_operands; ++i)
    h = g.add("add" + std::to_string(i), h, ops[std::size_t(i)]);
  g.output(h);
  const analyzed a(g);
  // bias + (max - 1) adds fit; the last add stays a step of its own.
  CHECK(detail::operand_count(a.step_of("fc").chain) == graph_ops::chain_max_operands);
  CHECK(a.live().size() == 2);
}

TEST_CASE("fusion: batch norm after a conv folds into its weights") {
  for (const bool bias : {false, true}) {
    CAPTURE(bias);
    const graph g = conv_bn_relu(bias);
    const analyzed a(g);
    REQUIRE(a.live().size() == 1);
    const detail::step& s = a.step_of("conv");
    CHECK(s.folded_bn == 1);  // the node index of "bn"
    CHECK(s.bn_after_bias == bias);
    CHECK(a.chain("conv") ==
          (bias ? std::vector{stage_kind::bias, stage_kind::relu} : std::vector{stage_kind::relu}));
    CHECK(a.cx.d->report.fused[0] == "folded bn (batch_norm) into conv (conv2d)");
  }
}

TEST_CASE("fusion: batch norm without a conv before it runs as a per-channel chain") {
  graph g;
  auto x = g.input("x", {1, 4, 2, 2}, dtype::f32, tensor_layout::nhwc);
  const auto m = filled(4, 0.1f), v = filled(4, 0.5f);
  g.output(g.batch_norm("bn", x, g.constant("mean", {4}, m.data()),
                        g.constant("var", {4}, v.data()), g.constant("gamma", {4}, v.data()),
                        g.constant("beta", {4}, m.data())));
  const analyzed a(g);
  const detail::step& s = a.step_of("bn");
  CHECK(s.op == op_kind::eltwise);
  CHECK(s.source == op_kind::batch_norm);
  CHECK(a.chain("bn") == std::vector{stage_kind::mul, stage_kind::add});
  // scale = gamma / sqrt(var + eps), shift = beta - mean * scale, from batch_norm_affine.
  const float scale = 0.5f / std::sqrt(0.5f + 1e-5f);
  CHECK(static_cast<const float*>(a.tensor(s.chain[0].operand).data)[3] ==
        Approx(scale).epsilon(1e-6));
  CHECK(static_cast<const float*>(a.tensor(s.chain[1].operand).data)[0] ==
        Approx(0.1f - 0.1f * scale).epsilon(1e-6));
}
