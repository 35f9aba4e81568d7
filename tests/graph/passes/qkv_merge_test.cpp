// The Q/K/V merge (graph/passes/qkv_merge.hpp) on the steps alone: three projections of one
// input under an attention become one linear read in place; every reason they stay apart.
#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;

namespace {

// x [2, 5, 16] -> q / k / v linears (16 -> 16, k without a bias) -> [2, 5, 4, 4] (q through two
// reshapes) -> attention.
// what: the variation that must keep them apart ("" merges).
graph qkv_graph(const std::string& what) {
  static const std::vector<float> w = filled(16 * 16), b = filled(16), w8 = filled(16 * 8);
  graph g;
  const tensor_id x = g.input("x", {2, 5, 16}), x2 = g.input("x2", {2, 5, 16});
  const auto proj = [&](const std::string& name, tensor_id in, bool bias) {
    const bool narrow = what == "other K" && name == "v";
    const tensor_id xin = narrow ? g.input("x8", {2, 5, 8}) : in;
    tensor_id y =
        g.linear(name + "_proj", xin,
                 g.constant(name + "_w", {16, narrow ? 8 : 16}, narrow ? w8.data() : w.data()),
                 bias ? g.constant(name + "_b", {16}, b.data()) : tensor_id{});
    if (what == "activation" && name == "k") y = g.relu("k_relu", y);
    const tensor_id heads = g.reshape(name, y, {2, 5, 4, 4});
    // q through a second reshape (the importer relabels a layout that way).
    return name == "q" ? g.reshape("q_plain", heads, {2, 5, 4, 4}) : heads;
  };
  const tensor_id q = proj("q", x, true), k = proj("k", x, false);
  const tensor_id v = proj("v", what == "other input" ? x2 : x, true);
  g.output(g.attention("att", q, k, v));
  if (what == "returned") g.output(k);
  return g;
}

}  // namespace

TEST_CASE("qkv merge: one input's three projections become one linear read in place") {
  const graph g = qkv_graph("");
  const analyzed a(g);
  const auto& m = a.step_of("q_proj");
  CHECK(a.tensor(m.others[0]).shape == std::vector<index_t>{48, 16});
  CHECK(a.tensor(m.out).shape == std::vector<index_t>{2, 5, 48});
  CHECK(a.chain("q_proj") == std::vector<stage_kind>{stage_kind::bias});
  // The bias: q's, zeros for k, v's.
  const std::vector<float> bias = a.cx.constant_f32(m.chain[0].operand);
  CHECK(bias[0] == 0.25f);
  CHECK(bias[16] == 0.f);
  CHECK(bias[47] == 0.25f);
  CHECK(m.fused == std::vector<std::string>{"k_proj", "v_proj"});
  const auto& att = a.step_of("att");
  CHECK(att.x == m.out);
  CHECK(att.others[0] == m.out);
  CHECK(att.others[1] == m.out);
  CHECK(att.qkv_column == std::array<index_t, 3>{0, 16, 32});
  CHECK(a.tensor(att.qkv_shape_of[1]).shape == std::vector<index_t>{2, 5, 4, 4});
  for (const char* gone : {"k_proj", "v_proj", "q", "q_plain", "k", "v"})
    CHECK_THROWS(a.step_of(gone));
  CHECK(att.fused == std::vector<std::string>{"q_plain", "q", "k", "v"});
  CHECK(a.live().size() == 2);
}

TEST_CASE("qkv merge: projections stay apart when they cannot be one linear") {
  for (const char* what : {"returned", "activation", "other input", "other K"}) {
    INFO(what);
    const graph g = qkv_graph(what);
    const analyzed a(g);
    CHECK(a.step_of("att").qkv_shape_of[0] == -1);
    CHECK(a.step_of("k_proj").alive);
  }
  compile_options off;
  off.fuse = false;
  const graph g = qkv_graph("");
  const analyzed a(g, off);
  CHECK(a.step_of("att").qkv_shape_of[0] == -1);
}
