// The view-absorption pass (graph/passes/view_absorption.hpp) on the steps alone: a strided_view
// read only by a matmul becomes that operand's strides; every reason it stays a copy.
#include <tuple>

#include "graph/passes/passes_common.hpp"
#include "support/test_support.hpp"

using namespace passes_test;

TEST_CASE("view absorption: a strided_view read only by a matmul becomes the operand's strides") {
  const auto build = [](bool view_is_output, bool second_reader, index_t flip) {
    graph g;
    const tensor_id x = g.input("x", {2, 7, 5}), b = g.input("b", {7, 4});
    // flip = -1: the view reads rows backwards (a negative stride the matmul cannot take).
    const tensor_id xt = g.strided_view("xt", x, {2, 5, 7}, flip < 0 ? 30 : 0, {35, 1, 5 * flip});
    g.output(g.matmul("mm", xt, b));
    if (view_is_output) g.output(xt);
    if (second_reader) g.output(g.relu("r", xt));
    return g;
  };
  {
    const graph g = build(false, false, 1);
    const analyzed a(g);
    const auto& mm = a.step_of("mm");
    CHECK(mm.views[0] >= 0);
    CHECK(mm.views[1] == -1);
    CHECK(a.tensor(mm.x).name == "x");
    CHECK(mm.fused == std::vector<std::string>{"xt"});
    CHECK_THROWS(a.step_of("xt"));
  }
  for (const auto& [out, second, flip] :
       {std::tuple{true, false, index_t(1)}, std::tuple{false, true, index_t(1)},
        std::tuple{false, false, index_t(-1)}}) {
    INFO("output " << out << " second reader " << second << " flip " << flip);
    const graph g = build(out, second, flip);
    const analyzed a(g);
    CHECK(a.step_of("mm").views[0] == -1);
    CHECK(a.step_of("xt").alive);
  }
  compile_options off;
  off.fuse = false;
  const graph g = build(false, false, 1);  // the analysis keeps a reference to it
  const analyzed a(g, off);
  CHECK(a.step_of("mm").views[0] == -1);
}
