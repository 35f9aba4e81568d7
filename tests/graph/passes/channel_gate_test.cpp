// The channel-gate pass (graph/passes/channel_gate.hpp) on the steps alone: a squeeze-excite
// multiply (per-channel operand at batch 1, broadcast [N, C, 1, 1] gate at batch > 1) joins the
// pointwise NHWC conv after it, and every reason it stays a pass of its own.
#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;
using kfuse::stage_kind;

namespace {

struct se_options {
  index_t n = 1, c = 8, hw = 6, k = 4;
  tensor_layout layout = tensor_layout::nhwc;
  index_t kernel = 1;           // the consumer conv's kernel size
  bool broadcast = false;       // the gate broadcast to the map's shape (the importer at N > 1)
  bool gate_is_output = false;  // the gated map is a graph output too
  precision prec = precision::inherit;
  bool calibrated = false;  // quant params on the gated map (an int8 conv's input)
};

/// x -> SE gate (pool, 1x1 convs, hardsigmoid) -> x * gate -> conv "proj".
graph se_block(const se_options& o) {
  graph g;
  auto x = g.input("x", {o.n, o.c, o.hw, o.hw}, dtype::f32, o.layout);
  pool2d_params gp;
  gp.kind = kfuse::pool_kind::avg;
  gp.global = true;
  auto pooled = g.pool2d("gap", x, gp);
  const auto w1 = filled(std::size_t(o.c * o.c)),
             w2 = filled(std::size_t(o.k * o.c * o.kernel * o.kernel));
  auto gate =
      g.hardsigmoid("gate", g.conv2d("fc", pooled, g.constant("w1", {o.c, o.c, 1, 1}, w1.data())));
  tensor_id gated;
  if (o.broadcast) {
    auto full = g.broadcast("expand", gate, {o.n, o.c, o.hw, o.hw}, o.layout);
    gated = g.mul("scale", x, full);
  } else {
    eltwise_stage m{stage_kind::mul, 0, 0, gate};
    m.per_channel = true;
    gated = g.eltwise("scale", x, {m});
  }
  if (o.calibrated) g.set_quant(gated, {4.f / 255, 128});
  conv2d_params cp;
  cp.prec = o.prec;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = o.kernel / 2;
  g.output(
      g.conv2d("proj", gated, g.constant("w2", {o.k, o.c, o.kernel, o.kernel}, w2.data()), {}, cp));
  if (o.gate_is_output) g.output(gated);
  return g;
}

bool gated(const analyzed& a) { return a.step_of("proj").gate >= 0; }

bool reported(const analyzed& a, const std::string& line) {
  const auto& f = a.cx.d->report.fused;
  return std::find(f.begin(), f.end(), line) != f.end();
}

}  // namespace

TEST_CASE("channel gate: a per-channel multiply at batch 1 joins the pointwise conv") {
  const graph g = se_block({});
  const analyzed a(g);
  const auto& proj = a.step_of("proj");
  REQUIRE(proj.gate >= 0);
  CHECK(a.tensor(proj.gate).name == "gate");
  CHECK(a.tensor(proj.x).name == "x");
  CHECK(proj.fused == std::vector<std::string>{"scale"});
  CHECK(reported(
      a, "fused scale (channel gate) into proj (conv2d): its weights are scaled per sample"));
  CHECK_THROWS(a.step_of("scale"));
}

TEST_CASE("channel gate: at batch 3 the broadcast goes too, the gate is [N, C, 1, 1]") {
  se_options o;
  o.n = 3;
  o.broadcast = true;
  const graph g = se_block(o);
  const analyzed a(g);
  const auto& proj = a.step_of("proj");
  REQUIRE(proj.gate >= 0);
  CHECK(a.tensor(proj.gate).shape == std::vector<index_t>{3, 8, 1, 1});
  CHECK_THROWS(a.step_of("expand"));
  CHECK_THROWS(a.step_of("scale"));
}

TEST_CASE("channel gate: a bf16 plan's pointwise conv takes the gate too") {
  se_options o;
  o.prec = precision::bf16;
  const graph g = se_block(o);
  const analyzed a(g);
  CHECK(gated(a));
  CHECK_THROWS(a.step_of("scale"));
}

TEST_CASE("channel gate: an int8 pointwise conv takes the gate and quantizes as it loads") {
  se_options o;
  o.prec = precision::int8;
  o.calibrated = true;
  SECTION("as the f32 case") {}
  SECTION("more outputs than pixels: int8 scales no weights, so any K") {
    o.hw = 2;
    o.k = 5;
  }
  SECTION("batch 3, broadcast gate") {
    o.n = 3;
    o.broadcast = true;
  }
  const graph g = se_block(o);
  const analyzed a(g);
  const auto& proj = a.step_of("proj");
  REQUIRE(proj.gate >= 0);
  CHECK(a.tensor(proj.x).name == "x");
  CHECK(a.tensor(proj.x).type == dtype::f32);
  REQUIRE(proj.gated_in >= 0);
  CHECK(a.tensor(proj.gated_in).name == "scale");
  CHECK(a.tensor(proj.gated_in).quant.zero_point == 128);
  CHECK_THROWS(a.step_of("scale"));
  CHECK(reported(a,
                 "fused scale (channel gate) into proj (conv2d): it gates and quantizes its f32 "
                 "input as it loads it"));
}

TEST_CASE("channel gate: an int8 plan without an int8 GEMM keeps the f32 rule") {
  se_options o;
  o.prec = precision::int8;
  o.calibrated = true;
  o.hw = 2;
  o.k = 5;
  const graph g = se_block(o);
  const analyzed a(g, {}, false);
  CHECK_FALSE(gated(a));
}

TEST_CASE("channel gate: more outputs than pixels, the conv gates its input rows instead") {
  se_options o;
  o.hw = 2;
  o.k = 5;
  const graph g = se_block(o);
  const analyzed a(g);
  CHECK(gated(a));
  CHECK(reported(
      a,
      "fused scale (channel gate) into proj (conv2d): it gates its input rows as it loads them"));
}

TEST_CASE("channel gate: the reasons to keep the multiply") {
  se_options o;
  SECTION("NCHW (no pointwise GEMM path)") { o.layout = tensor_layout::nchw; }
  SECTION("a 3x3 consumer") { o.kernel = 3; }
  SECTION("the gated map is also a graph output") { o.gate_is_output = true; }
  const graph g = se_block(o);
  const analyzed a(g);
  CHECK_FALSE(gated(a));
  CHECK(a.step_of("scale").chain.size() == 1);
}

TEST_CASE("channel gate: fusion off, nothing moves") {
  const graph g = se_block({});
  const analyzed a(g, compile_options{.fuse = false});
  CHECK_FALSE(gated(a));
}
