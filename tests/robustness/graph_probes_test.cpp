// Bad graphs and bindings, and NaN through whole plans: the executor's side of the robustness
// probes. Each case expects a kfuse::error naming the tensor / node / binding, or the
// documented result (docs/robustness.md).
#include <cfloat>
#include <thread>

#include "graph/graph_common.hpp"

using namespace kfuse;
using Catch::Contains;

namespace {

std::vector<float> run_plan(const plan& p, const std::vector<float>& x, std::size_t n_out) {
  std::vector<float> y(n_out, -777.f);
  p.record({bind(x)}, {bind(y)}).replay();
  return y;
}

graph tiny_graph() {
  graph g;
  auto x = g.input("x", {2, 8});
  g.output(g.relu("act", x));
  return g;
}

}  // namespace

TEST_CASE("graph probes: names must be unique", "[robustness][graph]") {
  {
    graph g;
    auto x = g.input("x", {2, 8});
    g.output(g.relu("act", g.relu("act", x)));
    CHECK_THROWS_WITH(compile(g),
                      "graph: duplicate name 'act': a node and a node (names must be "
                      "unique)");
  }
  {
    graph g;
    auto x = g.input("x", {2, 8});
    auto y = g.input("x", {2, 8});
    g.output(g.add("sum", x, y));
    CHECK_THROWS_WITH(compile(g), Contains("duplicate name 'x': an input and an input"));
  }
  {
    graph g;
    auto x = g.input("w", {2, 8});
    const std::vector<float> w(64);
    g.output(g.linear("w1", x, g.constant("w", {8, 8}, w.data())));
    CHECK_THROWS_WITH(compile(g), Contains("duplicate name 'w': an input and a constant"));
  }
}

TEST_CASE("graph probes: sizes, quant params and empty tensors", "[robustness][graph]") {
  {
    graph g;
    auto x = g.input("x", {index_t(1) << 32, index_t(1) << 32, 4});
    g.output(g.relu("act", x));
    CHECK_THROWS_WITH(compile(g), Contains("tensor 'x' [4294967296, 4294967296, 4]") &&
                                      Contains("overflows a 64-bit count"));
  }
  {
    graph g;
    auto x = g.input("x", {index_t(1) << 31, index_t(1) << 31});  // 2^62 elements, 2^64 bytes
    g.output(g.relu("act", x));
    CHECK_THROWS_WITH(compile(g), Contains("tensor 'x'") && Contains("elements of 4 bytes"));
  }
  {
    graph g = tiny_graph();
    g.set_quant(g.find("x"), {0.1f, 1000});
    CHECK_THROWS_WITH(compile(g),
                      "graph: tensor 'x': quant zero point 1000 is outside [-128, 255]");
  }
  {
    graph g;
    auto x = g.input("x", {2, 8}, dtype::i8);
    g.set_quant(x, {0.1f, 200});
    g.output(g.dequantize("dq", x));
    CHECK_THROWS_WITH(compile(g), Contains("quant zero point 200 is outside [-128, 127] (i8)"));
  }
  {
    graph g = tiny_graph();
    g.set_quant(g.find("x"), {NAN, 0});
    CHECK_THROWS_WITH(compile(g), Contains("quant scale must be positive and finite"));
  }
  {
    graph g;
    auto x = g.input("x", {2, 8});
    g.output(g.quantize("q", x, dtype::u8, {0.1f, 300}));
    CHECK_THROWS_WITH(compile(g), Contains("'q'") && Contains("zero point 300 is outside"));
  }
  {
    graph g;
    auto x = g.input("x", {0, 8});
    g.output(g.relu("act", x));
    CHECK_THROWS_WITH(compile(g), Contains("'act'") && Contains("input 'x' is empty ([0, 8])"));
  }
  {
    graph g;
    const float w[3] = {1, 2, 3};
    CHECK_THROWS_WITH(g.constant("w", {-1, 3}, w), Contains("negative extent"));
    g.output(g.relu("act", g.input("x", {-2, 8})));
    CHECK_THROWS_WITH(compile(g), "graph: tensor 'x' [-2, 8] has a negative extent (-2 x 8)");
  }
  CHECK_THROWS_WITH(compile(tiny_graph(), {.threads = -4}), Contains("threads"));
}

// ONNX's empty tensors: an input or a constant with an extent of 0 is bound or returned (an
// empty buffer, null or not), never computed on.
TEST_CASE("graph probes: empty inputs and constant outputs", "[robustness][graph]") {
  graph g;
  g.input("e", {0, 8});
  const auto x = g.input("x", {2, 4});
  g.output(g.relu("act", x));
  g.output(g.constant("none", {3, 0}, static_cast<const float*>(nullptr)));
  const plan p = compile(g, {.threads = 1});
  std::vector<float> e, xs(8, -1.f), y(8, 5.f), none;
  xs[3] = 2.f;
  p.run({bind(e), bind(xs)}, {bind(y), bind(none)});
  CHECK(y[0] == 0.f);
  CHECK(y[3] == 2.f);
  replay_buffer r = p.record({bind(e), bind(xs)}, {bind(y), bind(none)});
  r.replay();
  CHECK(y[3] == 2.f);
  std::vector<float> one(1);
  CHECK_THROWS_WITH(p.run({bind(one), bind(xs)}, {bind(y), bind(none)}),
                    Contains("input 0 ('e') is bound to 4 bytes, the plan expects 0"));
}

TEST_CASE("graph probes: bindings are typed, apart and non-null", "[robustness][graph]") {
  const plan p = compile(tiny_graph(), {.threads = 1});
  std::vector<float> x(16, -1.f), y(16);
  std::vector<bf16_t> xb(16);
  CHECK_THROWS_WITH(p.record({bind(xb.data(), 32)}, {bind(y)}),
                    "replay: input 0 ('x') is bound to a buffer of bf16, the plan's tensor holds "
                    "f32 (convert the data, or add a cast / quantize node)");
  std::vector<std::int32_t> yi(16);
  CHECK_THROWS_WITH(p.run({bind(x)}, {bind(yi)}), Contains("buffer of i32"));
  // untyped bindings (raw bytes) are checked by size only
  p.run({binding{x.data(), 64}}, {kfuse::bind(reinterpret_cast<std::byte*>(y.data()), 64)});
  CHECK(y[0] == 0.f);
  // an output on top of the input: rejected by record, run and a rebind
  CHECK_THROWS_WITH(p.record({bind(x)}, {bind(x)}),
                    "replay: output 0 overlaps input 0: a plan cannot run in place (bind "
                    "separate buffers)");
  CHECK_THROWS_WITH(p.run({bind(x)}, {bind(x)}), Contains("overlaps input 0"));
  replay_buffer r = p.record({bind(x)}, {bind(y)});
  CHECK_THROWS_WITH(r.bind_output(0, x.data(), 16), Contains("overlaps input 0"));
  r.replay();  // the failed rebind changed nothing
  CHECK(y[0] == 0.f);
  std::vector<float> x2(16, 3.f);
  CHECK_THROWS_WITH(r.bind_input(0, y.data(), 16), Contains("overlaps input 0"));
  r.bind_input(0, x2.data(), 16);
  r.replay();
  CHECK(y[0] == 3.f);
  // null and empty objects
  CHECK_THROWS_WITH(p.record({binding{nullptr, 64}}, {bind(y)}), Contains("null pointer"));
  replay_buffer empty;
  CHECK_THROWS_WITH(empty.bind_input(0, x.data(), 16), Contains("empty replay buffer"));
  CHECK_THROWS_WITH(empty.replay(), Contains("empty replay buffer"));
  const plan none;
  CHECK_THROWS_WITH(none.record({bind(x)}, {bind(y)}), Contains("empty plan"));
  CHECK_THROWS_WITH(none.run({bind(x)}, {bind(y)}), Contains("empty plan"));
}

TEST_CASE("graph probes: two outputs may not overlap", "[robustness][graph]") {
  graph g;
  auto x = g.input("x", {2, 8});
  g.output(g.relu("a", x));
  g.output(g.scale("b", x, 2.f));
  const plan p = compile(g, {.threads = 1});
  std::vector<float> xs(16), out(24);
  CHECK_THROWS_WITH(p.record({bind(xs)}, {bind(out.data(), 16), bind(out.data() + 8, 16)}),
                    Contains("outputs 0 and 1 overlap"));
}

TEST_CASE("graph probes: NaN propagates through f32 and bf16 plans", "[robustness][graph][nan]") {
  const index_t M = 4;
  const gt::mlp net(M);
  const graph g = net.build();
  auto x = gt::random_vec(std::size_t(M * net.K), 11);
  x[std::size_t(1 * net.K + 5)] = NAN;  // row 1
  for (precision prec : {precision::f32, precision::bf16}) {
    for (bool fuse : {true, false}) {
      const auto y =
          run_plan(compile(g, {.threads = 1, .prec = prec, .fuse = fuse, .emulated_bf16 = true}), x,
                   std::size_t(M * net.N));
      for (index_t m = 0; m < M; ++m)
        for (index_t n = 0; n < net.N; ++n) {
          const float v = y[std::size_t(m * net.N + n)];
          INFO("prec " << int(prec) << " fuse " << fuse << " row " << m << " col " << n);
          CHECK(std::isnan(v) == (m == 1));
        }
    }
  }
}

TEST_CASE("graph probes: an int8 plan maps NaN to the lowest u8 code, like -inf",
          "[robustness][graph][nan]") {
  if constexpr (graph_ops::gemm_available<i8, arch::native, backend::xsimd>()) {
    const index_t M = 3;
    const gt::mlp net(M);
    graph g = net.build();
    g.set_quant(g.find("x"), {4.f / 255, 128});
    g.set_quant(g.find("gelu1"), {3.f / 255, 10});
    g.set_quant(g.find("relu"), {4.f / 255, 0});
    const plan p8 = compile(g, {.threads = 1, .prec = precision::int8});
    auto xn = gt::random_vec(std::size_t(M * net.K), 12);
    auto xi = xn;
    xn[7] = NAN;
    xi[7] = -INFINITY;
    const auto yn = run_plan(p8, xn, std::size_t(M * net.N));
    const auto yi = run_plan(p8, xi, std::size_t(M * net.N));
    CHECK(std::memcmp(yn.data(), yi.data(), yn.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("graph probes: one plan run directly from two threads at once", "[robustness][threads]") {
  const index_t M = 8;
  const gt::mlp net(M);
  const plan p = compile(net.build(), {.threads = 1});
  const auto x = gt::random_vec(std::size_t(M * net.K), 13);
  const auto want = run_plan(p, x, std::size_t(M * net.N));
  std::atomic<int> bad{0};
  auto work = [&] {
    std::vector<float> y(want.size());
    for (int i = 0; i < 20; ++i) {
      p.run({bind(x)}, {bind(y)});
      if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0) ++bad;
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  CHECK(bad == 0);
}

TEST_CASE("graph probes: node parameters and weights without data", "[robustness][graph]") {
  auto one_stage = [](auto make) {
    graph g;
    auto x = g.input("x", {2, 8});
    g.output(make(g, x));
    return g;
  };
  CHECK_THROWS_WITH(compile(one_stage([](graph& g, tensor_id x) { return g.scale("s", x, NAN); })),
                    Contains("node 's' (eltwise): scale factor must be finite"));
  CHECK_THROWS_WITH(
      compile(one_stage([](graph& g, tensor_id x) { return g.scale("s", x, INFINITY); })),
      Contains("scale factor must be finite"));
  CHECK_THROWS_WITH(
      compile(one_stage([](graph& g, tensor_id x) { return g.leaky_relu("l", x, NAN); })),
      Contains("leaky_relu slope must be finite"));
  CHECK_THROWS_WITH(compile(one_stage([](graph& g, tensor_id x) {
                      return g.add("a", x, g.weight("w", {2, 8}));
                    })),
                    "graph: node 'a' (eltwise): weight 'w' has no data (graph::set_data)");
  {
    graph g;
    auto x = g.input("x", {1, 2, 4, 4}, dtype::f32, tensor_layout::nchw);
    const std::vector<float> m{0, 0}, v{1, -1}, one{1, 1}, zero{0, 0};
    g.output(g.batch_norm("bn", x, g.constant("m", {2}, m.data()), g.constant("v", {2}, v.data()),
                          g.constant("g", {2}, one.data()), g.constant("b", {2}, zero.data())));
    CHECK_THROWS_WITH(compile(g), Contains("node 'bn' (batch_norm): variance of channel 1 is "
                                           "negative or NaN"));
  }
  {
    graph g;
    auto x = g.input("x", {1, 2, 4, 4}, dtype::f32, tensor_layout::nchw);
    pool2d_params p;
    p.kind = kfuse::pool_kind::avg;
    p.global = true;
    p.pad_top = 1;
    g.output(g.pool2d("gap", x, p));
    CHECK_THROWS_WITH(compile(g), Contains("node 'gap' (pool2d): global pooling takes no padding"));
  }
  const plan p = compile(tiny_graph());
  CHECK_THROWS_WITH(p.input(3), "plan: input 3 does not exist (the plan has 1)");
  CHECK_THROWS_WITH(p.output(1), Contains("output 1 does not exist"));
  std::vector<float> x(16), y(16);
  CHECK_THROWS_WITH(p.record({bind(x)}, {bind(y)}).step(7), Contains("step 7 does not exist"));
}

TEST_CASE("graph probes: batch norm folding keeps a bias fused after it, and a bias input",
          "[robustness][graph]") {
  // conv (w = 1, no bias) -> batch_norm (scale 2) -> bias_add(1): 3 -> 7, fused or not
  const std::vector<float> one{1.f}, zero{0.f}, two{2.f};
  for (int variant = 0; variant < 2; ++variant) {
    graph g;
    auto x = g.input("x", {1, 1, 1, 1}, dtype::f32, tensor_layout::nchw);
    auto c = g.conv2d("conv", x, g.constant("w", {1, 1, 1, 1}, one.data()));
    if (variant == 1) c = g.bias_add("pre", c, g.input("b_in", {1}));  // not constant data
    auto bn =
        g.batch_norm("bn", c, g.constant("m", {1}, zero.data()), g.constant("v", {1}, one.data()),
                     g.constant("g", {1}, two.data()), g.constant("beta", {1}, zero.data()), 0.f);
    g.output(g.bias_add("post", bn, g.constant("b", {1}, one.data())));
    for (bool fuse : {true, false}) {
      const plan p = compile(g, {.threads = 1, .fuse = fuse});
      std::vector<float> xv{3.f}, bv{0.5f}, y{-1.f};
      if (variant == 1)
        p.record({bind(xv), bind(bv)}, {bind(y)}).replay();
      else
        p.record({bind(xv)}, {bind(y)}).replay();
      INFO("variant " << variant << " fuse " << fuse);
      CHECK(y[0] == (variant == 1 ? 8.f : 7.f));  // 2 * (3 + 0.5) + 1 with the bias input
    }
  }
}

TEST_CASE("graph probes: a bf16 input or bias where the kernel reads f32 is an error",
          "[robustness][graph]") {
  const std::vector<float> w(12, 0.5f);
  const std::vector<bf16_t> bb(3, to_bf16(1.f));
  {
    graph g;
    auto x = g.input("x", {4, 4}, dtype::bf16);
    g.output(g.linear("fc", x, g.constant("w", {3, 4}, w.data())));
    CHECK_THROWS_WITH(compile(g),
                      "graph: node 'fc' (linear): input 'x' is bf16; an f32 linear "
                      "takes f32 (add a cast node first)");
    CHECK_NOTHROW(compile(g, {.prec = precision::bf16, .emulated_bf16 = true}));
  }
  {
    graph g;
    auto x = g.input("x", {4, 4});
    g.output(g.linear("fc", x, g.constant("w", {3, 4}, w.data()), g.constant("b", {3}, bb.data())));
    CHECK_THROWS_WITH(compile(g), Contains("bias 'b' is bf16; give an f32 bias"));
  }
  {
    graph g;
    auto x = g.input("x", {1, 2, 2, 2}, dtype::bf16, tensor_layout::nchw);
    const std::vector<float> z{0, 0}, o{1, 1};
    g.output(g.batch_norm("bn", x, g.constant("m", {2}, z.data()), g.constant("v", {2}, o.data()),
                          g.constant("g", {2}, o.data()), g.constant("b", {2}, z.data())));
    CHECK_THROWS_WITH(compile(g), Contains("node 'bn' (batch_norm): input 'x' is bf16"));
  }
}
