// The layout choice (graph/passes/layout_choice.hpp) on the rewritten graph alone: which nodes
// join the NHWC region, where the conversions go, and that the caller's names and layouts stay.
#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;
using kfuse::stage_kind;

namespace {

const node_desc* node_named(const graph& g, const std::string& name) {
  for (const node_desc& n : g.nodes())
    if (n.name == name) return &n;
  return nullptr;
}

/// x (nchw) -> conv "c" -> relu "r" (returned) and, when `head`, flatten "f" -> linear "fc".
graph conv_net(tensor_layout layout, bool head) {
  graph g;
  static const std::vector<float> w = filled(4 * 3 * 9), wl = filled(2 * 4 * 36);
  auto x = g.input("x", {1, 3, 6, 6}, dtype::f32, layout);
  conv2d_params cp;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  auto r = g.relu("r", g.conv2d("c", x, g.constant("w", {4, 3, 3, 3}, w.data()), {}, cp));
  if (head) g.output(g.linear("fc", g.flatten("f", r, 1), g.constant("wl", {2, 144}, wl.data())));
  g.output(r);
  return g;
}

}  // namespace

TEST_CASE("layout choice: an nchw conv region runs in nhwc, converted at its edges") {
  const graph g = conv_net(tensor_layout::nchw, true);
  detail::layout_rewrite r;
  REQUIRE(detail::choose_layout(g, r));
  CHECK(r.region_nodes == 2);  // c, r
  CHECK(r.conversions == 2);   // x in; r out (returned and read by the flatten)
  const graph& h = r.g;
  // The entry conversion feeds the conv; the returned tensor keeps its name on the exit one.
  const node_desc* in = node_named(h, "x/nhwc");
  REQUIRE(in);
  CHECK(in->op == op_kind::convert_layout);
  CHECK(in->attr<convert_layout_params>().to == tensor_layout::nhwc);
  CHECK(node_named(h, "c")->inputs[0].index == in->output.index);
  const node_desc* out = node_named(h, "r");
  REQUIRE(out);
  CHECK(out->op == op_kind::convert_layout);
  CHECK(out->attr<convert_layout_params>().to == tensor_layout::nchw);
  CHECK(h.tensor(out->inputs[0]).name == "r/nhwc");
  CHECK(h.tensor(h.outputs()[1]).name == "r");
  CHECK(node_named(h, "f")->inputs[0].index == out->output.index);
  // The caller's inputs are the declared ones.
  CHECK(h.inputs().size() == 1);
  CHECK(h.tensor(h.inputs()[0]).layout == tensor_layout::nchw);
  // The rewritten graph analyzes: the conv writes nhwc, and reads the entry conversion's NCHW
  // input itself (3 channels: passes/entry_layout.hpp).
  const analyzed a(h);
  CHECK(a.tensor(a.step_of("c").out).layout == tensor_layout::nhwc);
  CHECK(a.tensor(a.step_of("c").x).name == "x");
}

TEST_CASE("layout choice: nothing to do without an nchw conv") {
  detail::layout_rewrite r;
  CHECK_FALSE(detail::choose_layout(conv_net(tensor_layout::nhwc, true), r));
  graph pool_only;
  pool2d_params mp;
  mp.kind = kfuse::pool_kind::max;
  mp.r = mp.s = mp.stride_h = mp.stride_w = 2;
  pool_only.output(pool_only.pool2d(
      "mp", pool_only.input("x", {1, 2, 4, 4}, dtype::f32, tensor_layout::nchw), mp));
  CHECK_FALSE(detail::choose_layout(pool_only, r));
  graph broken = conv_net(tensor_layout::nchw, false);
  broken.output(tensor_id{99});  // compile() reports it; the pass leaves the graph alone
  CHECK_FALSE(detail::choose_layout(broken, r));
}

TEST_CASE("layout choice: operands decide whether an eltwise joins, broadcasts follow") {
  graph g;
  static const std::vector<float> w = filled(4 * 3 * 9), ch = filled(4);
  auto x = g.input("x", {2, 3, 6, 6}, dtype::f32, tensor_layout::nchw);
  // An nchw view of a plain input: made by a reshape, which is no image op.
  auto other = g.reshape("other", g.input("seq", {2, 4, 36}), {2, 4, 6, 6}, tensor_layout::nchw);
  conv2d_params cp;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  auto c = g.conv2d("c", x, g.constant("w", {4, 3, 3, 3}, w.data()), {}, cp);
  // Per-channel constant: joins. Same-shape operand from the region (a broadcast gate): joins.
  eltwise_stage m{stage_kind::mul, 0, 0, g.constant("s", {4}, ch.data())};
  m.per_channel = true;
  auto scaled = g.eltwise("scaled", c, {m});
  pool2d_params gp;
  gp.kind = kfuse::pool_kind::avg;
  gp.global = true;
  auto gate = g.broadcast("expand", g.pool2d("gap", scaled, gp), {2, 4, 6, 6}, tensor_layout::nchw);
  auto gated = g.mul("gated", scaled, gate);
  // A same-shape operand from outside the region: the add stays nchw, and its region operand
  // is converted back.
  g.output(g.add("mixed", gated, other));
  detail::layout_rewrite r;
  REQUIRE(detail::choose_layout(g, r));
  CHECK(r.region_nodes == 5);  // c, scaled, gap, expand, gated
  const graph& h = r.g;
  CHECK(node_named(h, "expand")->attr<broadcast_params>().as == tensor_layout::nhwc);
  const node_desc* mixed = node_named(h, "mixed");
  CHECK(h.tensor(mixed->inputs[0]).name == "gated/nchw");
  CHECK(h.tensor(mixed->inputs[1]).name == "other");
  const analyzed a(h);
  CHECK(a.tensor(a.step_of("mixed").x).layout == tensor_layout::nchw);
}

TEST_CASE("layout choice: a squeeze-excite gate from the region multiplies per channel") {
  // Batch 1: pool -> 1x1 conv -> sigmoid gives C values, the same in either layout.
  graph g;
  static const std::vector<float> w = filled(4 * 3 * 9), wg = filled(4 * 4);
  auto x = g.input("x", {1, 3, 6, 6}, dtype::f32, tensor_layout::nchw);
  conv2d_params cp;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  auto c = g.conv2d("c", x, g.constant("w", {4, 3, 3, 3}, w.data()), {}, cp);
  pool2d_params gp;
  gp.kind = kfuse::pool_kind::avg;
  gp.global = true;
  auto gate = g.sigmoid(
      "gate", g.conv2d("fc", g.pool2d("gap", c, gp), g.constant("wg", {4, 4, 1, 1}, wg.data())));
  eltwise_stage m{stage_kind::mul, 0, 0, gate};
  m.per_channel = true;
  g.output(g.eltwise("se", c, {m}));
  detail::layout_rewrite r;
  REQUIRE(detail::choose_layout(g, r));
  CHECK(r.region_nodes == 5);  // c, gap, fc, gate, se
  CHECK(r.conversions == 2);
  const analyzed a(r.g);
  CHECK(a.tensor(a.step_of("c").out).layout == tensor_layout::nhwc);
}

TEST_CASE("layout choice: conversions the graph has are kept, nhwc-only ops stay in the region") {
  static const std::vector<float> w = filled(4 * 3 * 9), w8 = filled(4 * 8 * 9),
                                  wt = filled(4 * 4 * 4);
  conv2d_params cp;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  {
    // A graph converting by itself: nothing to add, and its own exit stays nchw.
    graph g;
    auto x = g.input("x", {1, 3, 6, 6}, dtype::f32, tensor_layout::nchw);
    auto xc = g.convert_layout("xc", x, tensor_layout::nhwc);
    auto c = g.conv2d("c", xc, g.constant("w", {4, 3, 3, 3}, w.data()), {}, cp);
    g.output(g.convert_layout("out", c, tensor_layout::nchw));
    detail::layout_rewrite r;
    REQUIRE(detail::choose_layout(g, r));
    CHECK(r.conversions == 0);
    CHECK(node_named(r.g, "out")->attr<convert_layout_params>().to == tensor_layout::nchw);
    CHECK(node_named(r.g, "xc")->inputs[0].index == x.index);
  }
  {
    // The importer's shape of a ConvTranspose in an nchw graph (convert, deconv, convert back)
    // between convs and a concat: one region, converted at the input and the output only.
    graph g;
    auto x = g.input("x", {1, 3, 6, 6}, dtype::f32, tensor_layout::nchw);
    auto c = g.conv2d("c", x, g.constant("w", {4, 3, 3, 3}, w.data()), {}, cp);
    pool2d_params mp;
    mp.kind = kfuse::pool_kind::max;
    mp.r = mp.s = mp.stride_h = mp.stride_w = 2;
    auto down = g.pool2d("down", c, mp);
    conv2d_params tp;
    tp.stride_h = tp.stride_w = 2;
    auto up = g.conv_transpose2d("up", g.convert_layout("to_nhwc", down, tensor_layout::nhwc),
                                 g.constant("wt", {4, 4, 2, 2}, wt.data()), {}, tp, 6, 6);
    auto cat = g.concat("cat", {g.convert_layout("to_nchw", up, tensor_layout::nchw), c}, 1);
    g.output(g.conv2d("head", cat, g.constant("w8", {4, 8, 3, 3}, w8.data()), {}, cp));
    detail::layout_rewrite r;
    REQUIRE(detail::choose_layout(g, r));
    CHECK(r.region_nodes == 7);  // c, down, to_nhwc, up, to_nchw, cat, head
    CHECK(r.conversions == 2);
    CHECK(node_named(r.g, "to_nchw")->attr<convert_layout_params>().to ==
          tensor_layout::nhwc);  // now a copy
    const analyzed a(r.g);
    CHECK(a.tensor(a.step_of("cat").x).layout == tensor_layout::nhwc);
  }
}

TEST_CASE("layout choice: an op joins an nhwc region as its KFUSE_GRAPH_OPS line declares") {
  // Every op of the list declares its nhwc trait (the list's X(name, nhwc) form makes it part of
  // adding an op); the pass reads nothing else.
  auto capable = [](op_kind k, bool& every_slot) {
    node_desc n;
    n.op = k;
    if (k == op_kind::broadcast) n.attributes = broadcast_params{};
    return detail::nhwc_capable(n, every_slot);
  };
  bool every = false;
#define KFUSE_CHECK_OP(name, nhwc)                                                                \
  {                                                                                               \
    INFO(#name);                                                                                  \
    const bool joins = capable(op_kind::name, every);                                             \
    CHECK(joins ==                                                                                \
          (nhwc_support::nhwc == nhwc_support::data || nhwc_support::nhwc == nhwc_support::all)); \
    if (joins) CHECK(every == (nhwc_support::nhwc == nhwc_support::all));                         \
  }
  KFUSE_GRAPH_OPS(KFUSE_CHECK_OP)
#undef KFUSE_CHECK_OP
  CHECK(nhwc_support_of(op_kind::conv2d) == nhwc_support::data);
  CHECK(nhwc_support_of(op_kind::concat) == nhwc_support::all);
  CHECK(nhwc_support_of(op_kind::linear) == nhwc_support::no);
  // A broadcast joins only into a 4-D nchw target (its output becomes nhwc).
  node_desc b;
  b.op = op_kind::broadcast;
  b.attributes = broadcast_params{{1, 8, 4, 4}, tensor_layout::nchw};
  CHECK(detail::nhwc_capable(b, every));
  b.attr<broadcast_params>().shape = {8, 16};
  CHECK_FALSE(detail::nhwc_capable(b, every));
}
