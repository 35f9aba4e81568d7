// Graph compile and record errors: each names the node (or binding) and the problem.
#include "graph/graph_common.hpp"

using namespace kfuse;
using Catch::Contains;
using Catch::StartsWith;

namespace {
std::vector<float> zeros(std::size_t n) { return std::vector<float>(n, 0.f); }
}  // namespace

TEST_CASE("graph errors: shape and type mismatches name the node", "[graph]") {
  {
    graph g;
    auto x = g.input("x", {2, 1000});
    auto w = g.constant("w2", {10, 1024}, zeros(10240).data());
    g.output(g.linear("fc2", x, w));
    CHECK_THROWS_WITH(compile(g),
                      "graph: node 'fc2' (linear): input has 1000 features, weights expect 1024");
  }
  {
    graph g;
    auto x = g.input("x", {2, 8});
    g.output(g.linear("fc", x, g.constant("w", {4, 8}, zeros(32).data()),
                      g.constant("b", {5}, zeros(5).data())));
    CHECK_THROWS_WITH(compile(g),
                      Contains("node 'fc' (linear): bias 'b' has 5 values for 4 output features"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 8});
    auto b = g.input("b", {2, 9});
    g.output(g.add("sum", a, b));
    CHECK_THROWS_WITH(compile(g), Contains("node 'sum' (eltwise): operand 'b' has shape [2, 9]") &&
                                      Contains("shapes must match"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 8}, dtype::i8);
    g.output(g.relu("act", a));
    CHECK_THROWS_WITH(compile(g), Contains("node 'act' (eltwise): input 'a' is i8"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 8}, dtype::u8);
    g.output(g.dequantize("dq", a));
    CHECK_THROWS_WITH(compile(g),
                      Contains("node 'dq' (cast): input 'a' is u8 without quant params"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 6});
    g.output(g.reshape("r", a, {5, -1}));
    CHECK_THROWS_WITH(compile(g), Contains("node 'r' (reshape): cannot infer -1"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 6});
    auto b = g.input("b", {3, 5});
    g.output(g.concat("cat", {a, b}, 1));
    CHECK_THROWS_WITH(compile(g), Contains("node 'cat' (concat): input 'b' has shape [3, 5]"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 6});
    g.output(g.convert_layout("cl", a, tensor_layout::nhwc));
    CHECK_THROWS_WITH(compile(g),
                      Contains("node 'cl' (convert_layout): input 'a' has 2 dimensions"));
  }
  {
    graph g;
    auto a = g.input("a", {2, 6});
    auto w = g.input("w", {3, 6});
    g.output(g.linear("fc", a, w));
    CHECK_THROWS_WITH(compile(g), Contains("node 'fc' (linear): weight 'w' must be a constant"));
  }
}

TEST_CASE("graph errors: cycle, unknown input, missing weight, outputs", "[graph]") {
  {
    graph g;
    auto x = g.input("x", {4});
    auto a = g.relu("a", x);
    auto b = g.relu("b", a);
    auto c = g.add("c", b, x);
    g.output(c);
    g.set_node_input("a", 0, c);  // a <- c <- b <- a
    CHECK_THROWS_WITH(compile(g), Contains("graph: cycle through node '") &&
                                      Contains("its inputs depend on its own output"));
  }
  {
    graph g;
    auto x = g.input("x", {4});
    g.output(g.add("sum", x, tensor_id{42}));
    CHECK_THROWS_WITH(compile(g),
                      "graph: node 'sum' (eltwise): input 1 is an unknown tensor (id 42)");
  }
  {
    graph g;
    auto x = g.input("x", {2, 4});
    auto w = g.weight("w1", {3, 4});
    g.output(g.linear("fc1", x, w));
    CHECK_THROWS_WITH(compile(g),
                      "graph: node 'fc1' (linear): weight 'w1' has no data (graph::set_data)");
    g.set_data(w, zeros(12).data());
    CHECK_NOTHROW(compile(g));
  }
  {
    graph g;
    auto x = g.input("x", {4});
    g.relu("r", x);
    CHECK_THROWS_WITH(compile(g), Contains("no outputs"));
    g.output(x);
    CHECK_THROWS_WITH(compile(g), Contains("output 'x' is a graph input"));
  }
  {
    graph g;
    CHECK_THROWS_WITH(g.set_node_input("nope", 0, tensor_id{0}), Contains("no node 'nope'"));
    CHECK_THROWS_WITH(g.find("nope"), Contains("no tensor 'nope'"));
  }
}

TEST_CASE("graph errors: bindings", "[graph]") {
  graph g;
  auto x = g.input("x", {2, 4});
  g.output(g.relu("r", x));
  const plan p = compile(g);
  std::vector<float> in(8), out(8), small(7);
  CHECK_NOTHROW(p.record({bind(in)}, {bind(out)}));
  CHECK_THROWS_WITH(
      p.record({bind(small)}, {bind(out)}),
      "replay: input 0 ('x') is bound to 28 bytes, the plan expects 32 (f32, 8 elements)");
  CHECK_THROWS_WITH(p.record({bind(in)}, {bind(small)}),
                    Contains("output 0 ('r') is bound to 28 bytes"));
  CHECK_THROWS_WITH(p.record({binding{nullptr, 32}}, {bind(out)}),
                    "replay: input 0 ('x') is bound to a null pointer");
  CHECK_THROWS_WITH(p.record({}, {bind(out)}), "record: 0 inputs bound, the plan has 1");
  CHECK_THROWS_WITH(p.record({bind(in)}, {bind(out), bind(out)}),
                    "record: 2 outputs bound, the plan has 1");
  CHECK_THROWS_WITH(p.run({bind(small)}, {bind(out)}),
                    Contains("input 0 ('x') is bound to 28 bytes"));
  CHECK_THROWS_WITH(plan{}.record({}, {}), Contains("empty plan"));
}

TEST_CASE("graph errors: conv2d geometry", "[graph]") {
  graph g;
  auto x = g.input("x", {1, 4, 5, 5}, dtype::f32, tensor_layout::nhwc);
  conv2d_params cp;
  cp.groups = 4;
  auto w = g.constant("w", {4, 2, 3, 3}, zeros(72).data());
  g.output(g.conv2d("c1", x, w, {}, cp));
  CHECK_THROWS_WITH(
      compile(g),
      "graph: node 'c1' (conv2d): input has 4 channels, weights expect 8 (2 per group x 4 groups)");
  graph g2;
  auto x2 = g2.input("x", {1, 4, 2, 2}, dtype::f32, tensor_layout::nchw);
  cp.groups = 4;
  g2.output(g2.conv2d("c2", x2, g2.constant("w", {4, 1, 3, 3}, zeros(36).data()), {}, cp));
  CHECK_THROWS_WITH(compile(g2), Contains("node 'c2' (conv2d): output size is not positive"));
  graph g3;
  auto x3 = g3.input("x", {1, 4, 5, 5});
  g3.output(g3.conv2d("c3", x3, g3.constant("w", {4, 1, 3, 3}, zeros(36).data()), {}, cp));
  CHECK_THROWS_WITH(
      compile(g3),
      Contains("node 'c3' (conv2d): input 'x' must be 4-D (N, C, H, W) with layout nchw or nhwc"));
  // The kernel's own check, as the node's error (its "pool2d: " prefix dropped).
  graph g4;
  auto x4 = g4.input("x", {1, 4, 2, 2}, dtype::f32, tensor_layout::nchw);
  pool2d_params pp;
  pp.r = pp.s = 3;
  g4.output(g4.pool2d("p4", x4, pp));
  CHECK_THROWS_WITH(compile(g4), StartsWith("graph: node 'p4' (pool2d): ") &&
                                     !Contains("(pool2d): pool2d") && Contains("not positive"));
}
