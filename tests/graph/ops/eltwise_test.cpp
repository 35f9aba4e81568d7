// eltwise as a graph op: chains of the common form (a per-channel scale, a bias, a second tensor,
// a clamp: batch norm and its ReLU) run inline, other chains stage by stage; both against a
// double reference on nchw and nhwc images with channel counts that leave vector tails, on 1
// and 2 threads, and the bytes the profiler counts for per-channel operands.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "graph/graph_common.hpp"

using namespace kfuse;

namespace {

// An image [N, C, H, W] given and returned in nchw, held in `layout` inside the plan.
struct image_graph {
  graph g;
  tensor_layout layout;
  tensor_id x, inner;
  image_graph(index_t N, index_t C, index_t H, index_t W, tensor_layout l) : layout(l) {
    x = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
    inner = layout == tensor_layout::nhwc ? g.convert_layout("x/nhwc", x, layout) : x;
  }
  void output(tensor_id y) {
    g.output(layout == tensor_layout::nhwc ? g.convert_layout("y", y, tensor_layout::nchw) : y);
  }
};

}  // namespace

TEST_CASE("graph: a batch norm and its clamp run as one inline chain, nchw and nhwc", "[graph]") {
  const index_t N = 2, H = 3, W = 5;
  for (const tensor_layout layout : {tensor_layout::nchw, tensor_layout::nhwc})
    for (const index_t C : {1, 5, 16, 37})
      for (const int act : {0, 1, 2}) {  // none, relu, clip(-0.5, 2)
        const auto mean = gt::random_vec(std::size_t(C), 1),
                   gamma = gt::random_vec(std::size_t(C), 3),
                   beta = gt::random_vec(std::size_t(C), 4),
                   var = gt::random_vec(std::size_t(C), 2, 0.5f, 2.f);
        image_graph ig(N, C, H, W, layout);
        graph& g = ig.g;
        tensor_id y =
            g.batch_norm("bn", ig.inner, g.constant("mean", {C}, mean.data()),
                         g.constant("var", {C}, var.data()), g.constant("gamma", {C}, gamma.data()),
                         g.constant("beta", {C}, beta.data()), 1e-3f);
        if (act == 1) y = g.relu("act", y);
        if (act == 2) y = g.eltwise("act", y, {eltwise_stage{stage_kind::clamp, -0.5f, 2.f}});
        ig.output(y);
        const std::size_t count = std::size_t(N * C * H * W);
        auto xv = gt::random_vec(count, 8, -3, 3);
        xv[count / 2] = std::nanf("");  // clamps keep NaN, as the stage-by-stage chain does
        for (const int threads : {1, 2}) {
          INFO(layout_name(layout) << " C " << C << " act " << act << " threads " << threads);
          const plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
          const step_info* bn = gt::step_named(p, "bn");
          REQUIRE(bn != nullptr);
          CHECK(bn->kernel.rfind("eltwise [mul, add", 0) == 0);
          // The scale and shift are one value a channel each.
          CHECK(bn->bytes ==
                double(2 * count * sizeof(float) + 2 * std::size_t(C) * sizeof(float)));
          std::vector<float> yv(count, -7.f);
          p.record({bind(xv)}, {bind(yv)}).replay();
          for (std::size_t i = 0; i < count; ++i) {
            const std::size_t c = (i / std::size_t(H * W)) % std::size_t(C);
            if (std::isnan(xv[i])) {
              REQUIRE(std::isnan(yv[i]));
              continue;
            }
            const double sc = gamma[c] / std::sqrt(double(var[c]) + 1e-3);
            double v = (xv[i] - mean[c]) * sc + beta[c];
            if (act == 1) v = std::max(0.0, v);
            if (act == 2) v = std::clamp(v, -0.5, 2.0);
            REQUIRE(std::fabs(yv[i] - v) <= 1e-5 * (1 + std::fabs(v)));
          }
        }
      }
}

TEST_CASE("graph: eltwise chains with a second tensor, inline and stage by stage", "[graph]") {
  const index_t N = 1, C = 19, H = 4, W = 3;
  const std::size_t count = std::size_t(N * C * H * W);
  const auto bias = gt::random_vec(std::size_t(C), 11), xv = gt::random_vec(count, 12, -2, 2),
             tv = gt::random_vec(count, 13, -2, 2);
  for (const tensor_layout layout : {tensor_layout::nchw, tensor_layout::nhwc})
    for (const bool common : {true, false}) {
      image_graph ig(N, C, H, W, layout);
      graph& g = ig.g;
      const tensor_id t_in = g.input("t", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
      const tensor_id t =
          layout == tensor_layout::nhwc ? g.convert_layout("t/nhwc", t_in, layout) : t_in;
      const tensor_id b = g.constant("b", {C}, bias.data());
      // common: bias, add t, relu6 (the common form); otherwise relu before the add.
      const std::vector<eltwise_stage> stages =
          common ? std::vector<eltwise_stage>{{stage_kind::bias, 0, 0, b},
                                              {stage_kind::add, 0, 0, t},
                                              {stage_kind::clamp, 0.f, 6.f}}
                 : std::vector<eltwise_stage>{
                       {stage_kind::bias, 0, 0, b}, {stage_kind::relu}, {stage_kind::add, 0, 0, t}};
      ig.output(g.eltwise("chain", ig.inner, stages));
      for (const int threads : {1, 2}) {
        INFO(layout_name(layout) << (common ? " common form" : " stage by stage") << ", " << threads
                                 << " threads");
        const plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
        const step_info* s = gt::step_named(p, "chain");
        REQUIRE(s != nullptr);
        // x, t and the output a value an element; the bias a value a channel.
        CHECK(s->bytes == double(3 * count * sizeof(float) + std::size_t(C) * sizeof(float)));
        std::vector<float> yv(count, -7.f);
        p.record({bind(xv), bind(tv)}, {bind(yv)}).replay();
        for (std::size_t i = 0; i < count; ++i) {
          const std::size_t c = (i / std::size_t(H * W)) % std::size_t(C);
          const double v = common ? std::clamp(double(xv[i]) + bias[c] + tv[i], 0.0, 6.0)
                                  : std::max(0.0, double(xv[i]) + bias[c]) + tv[i];
          REQUIRE(std::fabs(yv[i] - v) <= 1e-6 * (1 + std::fabs(v)));
        }
      }
    }
}
