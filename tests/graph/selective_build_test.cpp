// Selective builds: compile<ops<...>>(g) instantiates only the listed ops' lowerings. The plan
// matches a double reference, and a graph holding another op fails naming the node and the op.
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

}  // namespace

TEST_CASE("selective build: an MLP on ops<linear, eltwise, softmax> matches a double reference",
          "[graph]") {
  for (const index_t batch : {1, 3}) {
    const index_t K = 37, H = 19, N = 10;
    const auto w1 = seeded(std::size_t(H * K), 1), b1 = seeded(std::size_t(H), 2),
               w2 = seeded(std::size_t(N * H), 3), x = seeded(std::size_t(batch * K), 4);
    graph g;
    auto in = g.input("x", {batch, K});
    auto h = g.relu("relu1", g.linear("fc1", in, g.constant("w1", {H, K}, w1.data()),
                                      g.constant("b1", {H}, b1.data())));
    g.output(g.softmax("prob", g.linear("fc2", h, g.constant("w2", {N, H}, w2.data()))));
    const plan p = compile<mlp_ops>(g, {.threads = 1});
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
