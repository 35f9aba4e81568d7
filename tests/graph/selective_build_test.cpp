// Selective builds: compile<ops<...>>(g) instantiates only the listed ops' lowerings, and
// compile<ops<...>::in<...>>(g) only their kernels of the listed precisions. The plan matches a
// double reference; a graph holding another op, or a node of another precision, fails naming
// the node and what is missing.
// This TU includes kfuse/graph/compile.hpp only (not kfuse::runtime): what a user's selective
// TU does.
#include <cmath>
#include <vector>

#include "kfuse/graph/compile.hpp"
#include "support/test_support.hpp"

using namespace kfuse;
using Catch::Contains;

namespace {

std::vector<float> seeded(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  unsigned s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int(s >> 9) % 2001 - 1000) / 1000.f;
  }
  return v;
}

using mlp_ops = ops<op_kind::linear, op_kind::eltwise, op_kind::softmax>;
using mlp_f32 = mlp_ops::in<precision::f32>;

struct mlp_weights {
  static constexpr index_t K = 37, H = 19, N = 10;
  std::vector<float> w1 = seeded(std::size_t(H * K), 1), b1 = seeded(std::size_t(H), 2),
                     w2 = seeded(std::size_t(N * H), 3);
};

graph mlp_graph(const mlp_weights& m, index_t batch) {
  graph g;
  auto in = g.input("x", {batch, m.K});
  auto h = g.relu("relu1", g.linear("fc1", in, g.constant("w1", {m.H, m.K}, m.w1.data()),
                                    g.constant("b1", {m.H}, m.b1.data())));
  g.output(g.softmax("prob", g.linear("fc2", h, g.constant("w2", {m.N, m.H}, m.w2.data()))));
  return g;
}

template <class Set>
void check_mlp() {
  const mlp_weights mw;
  const std::vector<float>&w1 = mw.w1, &b1 = mw.b1, &w2 = mw.w2;
  const index_t K = mw.K, H = mw.H, N = mw.N;
  for (const index_t batch : {1, 3}) {
    const auto x = seeded(std::size_t(batch * K), 4);
    const plan p = compile<Set>(mlp_graph(mw, batch), {.threads = 1});
    std::vector<float> y(std::size_t(batch * N), std::nanf(""));  // poisoned
    auto r = p.record({bind(x)}, {bind(y)});
    r.replay();
    for (index_t m = 0; m < batch; ++m) {
      std::vector<double> hid(static_cast<std::size_t>(H)), logit(static_cast<std::size_t>(N));
      for (index_t j = 0; j < H; ++j) {
        double acc = b1[std::size_t(j)];
        for (index_t k = 0; k < K; ++k)
          acc += double(x[std::size_t(m * K + k)]) * w1[std::size_t(j * K + k)];
        hid[std::size_t(j)] = acc > 0 ? acc : 0;
      }
      double mx = -1e300, sum = 0;
      for (index_t j = 0; j < N; ++j) {
        double acc = 0;
        for (index_t k = 0; k < H; ++k) acc += hid[std::size_t(k)] * w2[std::size_t(j * H + k)];
        logit[std::size_t(j)] = acc;
        mx = std::max(mx, acc);
      }
      for (double& l : logit) sum += (l = std::exp(l - mx));
      for (index_t j = 0; j < N; ++j)  // f32 accumulation over <= 37 terms: 1e-5 is ample
        CHECK(std::abs(double(y[std::size_t(m * N + j)]) - logit[std::size_t(j)] / sum) < 1e-5);
    }
  }
}

}  // namespace

TEST_CASE("selective build: an MLP on ops<linear, eltwise, softmax> matches a double reference",
          "[graph]") {
  check_mlp<mlp_ops>();
}

TEST_CASE("selective build: the MLP on ops<...>::in<f32> matches a double reference", "[graph]") {
  check_mlp<mlp_f32>();
}

TEST_CASE("selective build: a precision outside the set is an error naming the node", "[graph]") {
  const mlp_weights m;
  for (const precision pr : {precision::bf16, precision::int8}) {
    CAPTURE(precision_name(pr));
    compile_options o{.threads = 1, .prec = pr};
    const graph g = mlp_graph(m, 2);
    CHECK_THROWS_WITH(compile<mlp_f32>(g, o),
                      Contains("node 'fc1' (linear): runs in " + std::string(precision_name(pr))) &&
                          Contains("(compile<ops<linear, eltwise, softmax>::in<f32>>)") &&
                          Contains("add precision::" + std::string(precision_name(pr))) &&
                          Contains("kfuse::runtime"));
  }
  // bf16 tensors have kernels of their own: an f32 set's eltwise and softmax refuse them.
  graph g;
  auto x = g.input("x", {2, 8}, dtype::bf16);
  g.output(g.softmax("prob", g.relu("act", x)));
  CHECK_THROWS_WITH(
      compile<mlp_f32>(g, {.threads = 1}),
      Contains("node 'act' (eltwise): runs in bf16") && Contains("add precision::bf16"));
  CHECK_NOTHROW(compile<mlp_ops::in<precision::f32, precision::bf16>>(g, {.threads = 1}));
  // The same plan in a precision the set has compiles.
  CHECK_NOTHROW(compile<mlp_ops::in<precision::f32, precision::bf16>>(
      mlp_graph(m, 2), {.threads = 1, .prec = precision::bf16}));
}

TEST_CASE("selective build: an op outside the set is an error naming the node and the op",
          "[graph]") {
  const auto w = seeded(4 * 3 * 3 * 3, 5);
  graph g;
  auto x = g.input("x", {1, 3, 8, 8}, dtype::f32, tensor_layout::nchw);
  g.output(g.relu("act", g.conv2d("stem", x, g.constant("w", {4, 3, 3, 3}, w.data()))));
  CHECK_THROWS_AS(compile<mlp_ops>(g), error);
  CHECK_THROWS_WITH(compile<mlp_ops>(g, {.choose_layout = false}),
                    Contains("node 'stem' (conv2d): runs op conv2d, which this plan compiler was "
                             "not built for (compile<ops<linear, eltwise, softmax>>)") &&
                        Contains("add op_kind::conv2d to the set") && Contains("kfuse::runtime"));
}
