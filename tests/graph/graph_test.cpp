// Graph executor: replay vs the kernels one by one (bitwise), vs the eager run and the unfused
// plan, repeated replays, 1 vs 2 threads, rebinding, memory plan, fusion report, shape ops,
// casts, custom nodes, reduced-precision plans, the executor and profiler hooks.
#include <atomic>
#include <thread>
#include <tuple>

#include "graph/graph_common.hpp"

using namespace kfuse;
using gt::index_t;

namespace {

std::vector<float> replay_once(const plan& p, const std::vector<float>& x, std::size_t out_n) {
  std::vector<float> y(out_n, std::numeric_limits<float>::quiet_NaN());
  auto r = p.record({bind(x)}, {bind(y)});
  r.replay();
  return y;
}

}  // namespace

TEST_CASE("graph: MLP replay equals the kernels called one by one", "[graph]") {
  for (index_t M : {1, 3, 8, 13}) {
    const gt::mlp net(M);
    const graph g = net.build();
    const auto x = gt::random_vec(std::size_t(M * net.K), 7);
    const auto direct = net.direct(x);
    const auto ref = net.reference(x);
    for (bool fuse : {true, false}) {
      const plan p = compile(g, {.threads = 1, .fuse = fuse});
      const auto y = replay_once(p, x, direct.size());
      INFO("M=" << M << " fuse=" << fuse);
      CHECK(gt::bitwise_equal(y, direct));
      std::vector<float> eager(direct.size(), std::nanf(""));
      p.run({bind(x)}, {bind(eager)});
      CHECK(gt::bitwise_equal(eager, direct));
      for (std::size_t i = 0; i < y.size(); ++i)
        REQUIRE(std::fabs(y[i] - ref[i]) <= 1e-4 * (1 + std::fabs(ref[i])));
    }
  }
}

TEST_CASE("graph: fusion report and memory plan", "[graph]") {
  const gt::mlp net(4);
  const plan p = compile(net.build(), {.threads = 1});
  const fusion_report& r = p.report();
  CHECK(r.nodes_before == 8);
  CHECK(r.nodes_after == 4);
  const std::string text = r.text();
  // First line: the arch and vector impl compile() built the plan for (arch::native and xsimd by
  // default), also on every step; never the scalar fallback here (the generic copy of this test
  // is built with KFUSE_FORCE_GENERIC: "arch: generic (scalar)").
  const std::string impl = simd::impl_name<arch::native, backend::xsimd>();
  CHECK(text.rfind("arch: " + std::string(arch::native::name) + " (" + impl + ")\nfusion: ", 0) ==
        0);
  CHECK(text.find("scalar fallback") == std::string::npos);
  CHECK(r.target.arch == arch::native::name);
  CHECK(r.target.impl == impl);
  CHECK_FALSE(r.target.scalar_fallback);
  for (const step_info& s : p.steps()) CHECK(s.target.text() == r.target.text());
  CHECK(text.find("fused gelu1 (eltwise) into fc1 (linear)") != std::string::npos);
  CHECK(text.find("fused half (eltwise) into fc2 (linear)") != std::string::npos);
  CHECK(text.find("fused residual (eltwise) into fc_skip (linear)") != std::string::npos);
  CHECK(text.find("fused relu (eltwise) into fc_skip (linear)") != std::string::npos);
  REQUIRE(p.steps().size() == 4);
  CHECK(p.steps()[0].kernel.find("[bias, gelu_tanh]") != std::string::npos);
  CHECK(p.steps()[2].kernel.find("[add, relu]") != std::string::npos);
  CHECK(p.steps()[0].flops == 2.0 * 4 * 37 * 50);
  // Live at once: h1 and h2 (fc_skip reads h2 while writing r, which reuses h1's block).
  CHECK(p.arena_bytes() <= p.intermediate_bytes());
  CHECK(p.arena_bytes() % 64 == 0);
  CHECK(p.arena_bytes() >= 2 * 4 * 50 * sizeof(float));
  const plan unfused = compile(net.build(), {.threads = 1, .fuse = false});
  CHECK(unfused.report().fused.empty());
  CHECK(unfused.steps().size() == 8);
  CHECK(unfused.arena_bytes() < unfused.intermediate_bytes());
}

TEST_CASE("graph: an eltwise chain merges into one in-place pass", "[graph]") {
  graph g;
  auto x = g.input("x", {3, 70});
  auto b = g.constant("b", {70}, gt::random_vec(70, 3).data());
  auto other = g.input("other", {3, 70});
  auto h = g.relu("r0", g.scale("s0", x, 3.f));
  h = g.bias_add("b0", h, b);
  h = g.clamp("c0", g.mul("m0", h, other), -1.f, 2.f);
  auto y = g.sigmoid("sig", g.relu("r1", h));
  g.output(y);
  const plan p = compile(g, {.threads = 1});
  CHECK(p.steps().size() == 1);
  CHECK(p.report().fused.size() == 6);
  const auto xv = gt::random_vec(210, 1, -3, 3), ov = gt::random_vec(210, 2, -2, 2);
  const auto bv = gt::random_vec(70, 3);
  std::vector<float> y1(210, std::nanf("")), y2(210, std::nanf(""));
  auto r = p.record({bind(xv), bind(ov)}, {bind(y1)});
  r.replay();
  const plan q = compile(g, {.threads = 1, .fuse = false});
  CHECK(q.steps().size() == 7);
  CHECK(q.arena_bytes() == 64 * ((210 * 4 + 63) / 64));  // every step in place on one buffer
  auto rq = q.record({bind(xv), bind(ov)}, {bind(y2)});
  rq.replay();
  CHECK(gt::bitwise_equal(y1, y2));
  for (int i = 0; i < 210; ++i) {
    double v = std::max(0.0, 3.0 * xv[std::size_t(i)]) + bv[std::size_t(i % 70)];
    v = std::clamp(v * ov[std::size_t(i)], -1.0, 2.0);
    v = 1 / (1 + std::exp(-std::max(0.0, v)));
    REQUIRE(std::fabs(y1[std::size_t(i)] - v) <= 2e-6);
  }
}

TEST_CASE("graph: math stages fused into a linear's epilogue and run as an eltwise node",
          "[graph][threads]") {
  const index_t M = 5, K = 16, N = 24;
  const auto xv = gt::random_vec(std::size_t(M * K), 11, -1, 1);
  const auto wv = gt::random_vec(std::size_t(N * K), 12, -0.5, 0.5);
  const auto dv = gt::random_vec(std::size_t(M * N), 13, 1, 3);
  const auto sv = gt::random_vec(std::size_t(N), 14, -1, 1);
  graph g;
  const tensor_id x = g.input("x", {M, K}), d = g.input("d", {M, N});
  const tensor_id w = g.constant("w", {N, K}, wv.data());
  const tensor_id slope = g.constant("slope", {N}, sv.data());
  tensor_id h = g.linear("fc", x, w);
  h = g.eltwise("elu", h, {{stage_kind::elu, 0.7f}});
  h = g.eltwise("div", h, {{stage_kind::div, 0, 0, d}});
  h = g.eltwise("prelu", h, {{stage_kind::prelu, 0, 0, slope, true}});
  h = g.eltwise("sp", h, {{stage_kind::softplus}, {stage_kind::power, 1.5f}});
  h = g.eltwise("sq", h, {{stage_kind::power, 2.f}, {stage_kind::sqrt}, {stage_kind::log}});
  g.output(h);
  std::vector<double> want(std::size_t(M * N));
  for (index_t m = 0; m < M; ++m)
    for (index_t n = 0; n < N; ++n) {
      double v = 0;
      for (index_t k = 0; k < K; ++k)
        v += double(xv[std::size_t(m * K + k)]) * wv[std::size_t(n * K + k)];
      v = v > 0 ? v : 0.7 * std::expm1(v);
      v /= dv[std::size_t(m * N + n)];
      v = v < 0 ? v * sv[std::size_t(n)] : v;
      v = std::pow(std::log1p(std::exp(v)), 1.5);
      want[std::size_t(m * N + n)] = std::log(std::sqrt(v * v));
    }
  std::vector<float> first;
  for (bool fuse : {true, false})
    for (int threads : {1, 2}) {
      const plan p = compile(g, {.threads = threads, .fuse = fuse, .fork_join_ns = 0});
      if (fuse) {
        CHECK(p.steps().size() == 1);  // every stage in the linear's epilogue
        CHECK(p.steps()[0].kernel.find("elu, div, prelu, softplus, power, power, sqrt, log") !=
              std::string::npos);
      }
      std::vector<float> y(std::size_t(M * N), std::nanf(""));
      auto r = p.record({bind(xv), bind(dv)}, {bind(y)});
      r.replay();
      for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(std::fabs(y[i] - want[i]) <= 1e-6);
      if (first.empty()) first = y;
      CHECK(gt::bitwise_equal(y, first));
    }
  // Other stages, two of them reading the same run-time operand.
  graph g2;
  const tensor_id x2 = g2.input("x", {M, K}), d2 = g2.input("d", {M, N});
  tensor_id h2 = g2.linear("fc", x2, g2.constant("w", {N, K}, wv.data()));
  h2 = g2.eltwise("chain", h2,
                  {{stage_kind::celu, 0.5f},
                   {stage_kind::max, 0, 0, d2},
                   {stage_kind::exp},
                   {stage_kind::reciprocal},
                   {stage_kind::pow, 0, 0, d2},
                   {stage_kind::erf}});
  g2.output(h2);
  const plan p2 = compile(g2, {.threads = 1});
  CHECK(p2.steps().size() == 1);
  std::vector<float> y2(std::size_t(M * N), std::nanf(""));
  auto r2 = p2.record({bind(xv), bind(dv)}, {bind(y2)});
  r2.replay();
  for (index_t m = 0; m < M; ++m)
    for (index_t n = 0; n < N; ++n) {
      double v = 0;
      for (index_t k = 0; k < K; ++k)
        v += double(xv[std::size_t(m * K + k)]) * wv[std::size_t(n * K + k)];
      v = v > 0 ? v : 0.5 * std::expm1(v / 0.5);
      const double dd = dv[std::size_t(m * N + n)];
      v = std::erf(std::pow(1 / std::exp(std::max(v, dd)), dd));
      REQUIRE(std::fabs(y2[std::size_t(m * N + n)] - v) <= 2e-6);
    }
  graph g3;
  const tensor_id x3 = g3.input("x", {2, 3});
  g3.output(g3.eltwise("e", x3, {{stage_kind::celu, 0.f}}));
  CHECK_THROWS_WITH(compile(g3), Catch::Matchers::Contains("node 'e' (eltwise)") &&
                                     Catch::Matchers::Contains("celu: alpha must not be 0"));
  graph g4;
  const tensor_id x4 = g4.input("x", {2, 3});
  g4.output(g4.eltwise("e", x4, {{stage_kind::power, std::nanf("")}}));
  CHECK_THROWS_WITH(compile(g4), Catch::Matchers::Contains("power exponent must be finite"));
}

TEST_CASE("graph: reduce over any axes and log_softmax, in plain and image layouts",
          "[graph][threads]") {
  const std::vector<index_t> shape{2, 3, 4, 5};
  const auto xv = gt::random_vec(2 * 3 * 4 * 5, 21, -2, 2);
  auto at = [&](index_t n, index_t c, index_t h, index_t w) {
    return double(xv[std::size_t(((n * 3 + c) * 4 + h) * 5 + w)]);
  };
  for (tensor_layout l : {tensor_layout::plain, tensor_layout::nchw, tensor_layout::nhwc})
    for (int threads : {1, 2}) {
      INFO("layout " << layout_name(l) << " threads " << threads);
      graph g;
      tensor_id x = g.input("x", shape);
      if (l != tensor_layout::plain) x = g.convert_layout("img", x, l);
      g.output(g.reduce("sum_c", x, reduce_kind::sum, {1}, true));            // [2, 1, 4, 5]
      g.output(g.reduce("max_hw", x, reduce_kind::max, {-1, 2}, false));      // [2, 3]
      g.output(g.reduce("lse_all", x, reduce_kind::log_sum_exp, {}, false));  // [1]
      g.output(g.log_softmax("lsm", x, 1));
      const plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
      CHECK(p.output(1).shape == std::vector<index_t>{2, 3});
      CHECK(p.output(2).shape == std::vector<index_t>{1});
      std::vector<float> s(2 * 4 * 5), m(6), lse(1), lsm(120);
      auto r = p.record({bind(xv)}, {bind(s), bind(m), bind(lse), bind(lsm)});
      r.replay();
      // Outputs keep their layout with keepdims (nhwc: [N, H, W, 1] in memory, the same values).
      double all = 0;
      for (index_t n = 0; n < 2; ++n)
        for (index_t c = 0; c < 3; ++c) {
          double mx = -1e30;
          for (index_t h = 0; h < 4; ++h)
            for (index_t w = 0; w < 5; ++w) {
              mx = std::max(mx, at(n, c, h, w));
              all += std::exp(at(n, c, h, w));
            }
          REQUIRE(m[std::size_t(n * 3 + c)] == float(mx));
        }
      CHECK(std::fabs(lse[0] - std::log(all)) <= 1e-5);
      for (index_t n = 0; n < 2; ++n)
        for (index_t h = 0; h < 4; ++h)
          for (index_t w = 0; w < 5; ++w) {
            double sum = 0, e = 0;
            for (index_t c = 0; c < 3; ++c) {
              sum += at(n, c, h, w);
              e += std::exp(at(n, c, h, w));
            }
            REQUIRE(std::fabs(s[std::size_t((n * 4 + h) * 5 + w)] - sum) <= 1e-5);
            for (index_t c = 0; c < 3; ++c) {
              const std::size_t o = l == tensor_layout::nhwc
                                        ? std::size_t(((n * 4 + h) * 5 + w) * 3 + c)
                                        : std::size_t(((n * 3 + c) * 4 + h) * 5 + w);
              REQUIRE(std::fabs(lsm[o] - (at(n, c, h, w) - std::log(e))) <= 1e-5);
            }
          }
    }
  {  // arg_reduce: int64 indices, bound as int64_t buffers
    graph g;
    const tensor_id x = g.input("x", shape);
    g.output(g.arg_reduce("am", x, arg_kind::max, 1, false));
    g.output(g.arg_reduce("an", x, arg_kind::min, -1, true, true));
    const plan p = compile(g, {.threads = 1});
    CHECK(p.output(0).type == dtype::i64);
    CHECK(p.output(1).shape == std::vector<index_t>{2, 3, 4, 1});
    std::vector<std::int64_t> am(2 * 4 * 5, -1), an(2 * 3 * 4, -1);
    auto r = p.record({bind(xv)}, {bind(am), bind(an)});
    r.replay();
    for (index_t n = 0; n < 2; ++n)
      for (index_t h = 0; h < 4; ++h)
        for (index_t w = 0; w < 5; ++w) {
          index_t best = 0;
          for (index_t c = 1; c < 3; ++c)
            if (at(n, c, h, w) > at(n, best, h, w)) best = c;
          REQUIRE(am[std::size_t((n * 4 + h) * 5 + w)] == best);
        }
    for (index_t n = 0; n < 2; ++n)
      for (index_t c = 0; c < 3; ++c)
        for (index_t h = 0; h < 4; ++h) {
          index_t best = 0;
          for (index_t w = 1; w < 5; ++w)
            if (at(n, c, h, w) <= at(n, c, h, best)) best = w;
          REQUIRE(an[std::size_t((n * 3 + c) * 4 + h)] == best);
        }
    std::vector<float> wrong(40);
    CHECK_THROWS_WITH(p.record({bind(xv)}, {bind(wrong), bind(an)}),
                      Catch::Matchers::Contains("i64"));
  }
  graph g;
  const tensor_id x = g.input("x", shape);
  g.output(g.reduce("r", x, reduce_kind::sum, {4}));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'r' (reduce)") &&
                                    Catch::Matchers::Contains("axis 4 is out of range"));
  graph g2;
  const tensor_id x2 = g2.convert_layout("img", g2.input("x", shape), tensor_layout::nhwc);
  g2.output(g2.reduce("r", x2, reduce_kind::mean, {0}, false));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("keeps C and H or W"));
}

TEST_CASE("graph: pad in plain and image layouts, every mode", "[graph]") {
  const std::vector<index_t> shape{1, 2, 3, 4};
  const auto xv = gt::random_vec(24, 5, -1, 1);
  const std::vector<index_t> pads{0, 0, 1, -1, 0, 1, 2, 2};  // H +1 / +2, W -1 / +2; C +1 after
  for (pad_mode m : {pad_mode::constant, pad_mode::reflect, pad_mode::edge})
    for (tensor_layout l : {tensor_layout::plain, tensor_layout::nchw, tensor_layout::nhwc}) {
      INFO("mode " << int(m) << " layout " << layout_name(l));
      graph g;
      tensor_id x = g.input("x", shape);
      if (l != tensor_layout::plain) x = g.convert_layout("img", x, l);
      tensor_id y = g.pad("pad", x, pads, m, 0.5f);
      if (l == tensor_layout::nhwc) y = g.convert_layout("back", y, tensor_layout::nchw);
      g.output(y);
      const plan p = compile(g, {.threads = 1});
      CHECK(p.output(0).shape == std::vector<index_t>{1, 3, 6, 5});
      std::vector<float> out(90, std::nanf(""));
      auto r = p.record({bind(xv)}, {bind(out)});
      r.replay();
      auto src = [&](index_t o, index_t before, index_t n) -> index_t {
        const index_t i = o - before;
        if (i >= 0 && i < n) return i;
        if (m == pad_mode::constant) return -1;
        if (m == pad_mode::edge) return i < 0 ? 0 : n - 1;
        return i < 0 ? -i : 2 * (n - 1) - i;
      };
      for (index_t c = 0; c < 3; ++c)
        for (index_t h = 0; h < 6; ++h)
          for (index_t w = 0; w < 5; ++w) {
            const index_t sc = src(c, 0, 2), sh = src(h, 1, 3), sw = src(w, -1, 4);
            const float want =
                sc < 0 || sh < 0 || sw < 0 ? 0.5f : xv[std::size_t((sc * 3 + sh) * 4 + sw)];
            REQUIRE(out[std::size_t((c * 6 + h) * 5 + w)] == want);
          }
    }
  graph g;
  const tensor_id x = g.input("x", shape);
  g.output(g.pad("p", x, {0, 0, 3, 0, 0, 0, 0, 0}, pad_mode::reflect));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'p' (pad)") &&
                                    Catch::Matchers::Contains("smaller than its extent"));
  graph g2;
  g2.output(g2.pad("p", g2.input("x", shape), {1, 1}));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("2 pads for rank 4"));
}

TEST_CASE("graph: bicubic resize in both layouts against a double reference", "[graph]") {
  const index_t H = 5, W = 7, OH = 8, OW = 4;  // up along H, down along W
  const auto xv = gt::random_vec(2 * 3 * H * W, 17, -1, 1);
  for (bool exclude : {false, true})
    for (tensor_layout l : {tensor_layout::nchw, tensor_layout::nhwc}) {
      INFO("exclude_outside " << exclude << " layout " << layout_name(l));
      resize_params rp;
      rp.mode = resize_mode::cubic;
      rp.out_h = OH;
      rp.out_w = OW;
      rp.scale_h = double(OH) / H;
      rp.scale_w = double(OW) / W;
      rp.cubic_a = exclude ? -0.5f : -0.75f;
      rp.exclude_outside = exclude;
      graph g;
      tensor_id x = g.convert_layout("img", g.input("x", {2, 3, H, W}), l);
      tensor_id y = g.resize("rs", x, rp);
      if (l == tensor_layout::nhwc) y = g.convert_layout("back", y, tensor_layout::nchw);
      g.output(y);
      const plan p = compile(g, {.threads = 2, .fork_join_ns = 0});
      std::vector<float> out(2 * 3 * OH * OW, std::nanf(""));
      auto r = p.record({bind(xv)}, {bind(out)});
      r.replay();
      // Keys' kernel on the edge-replicated input, half_pixel coordinates.
      auto taps = [&](index_t o, index_t in, double scale, index_t* idx, double* w) {
        const double a = rp.cubic_a, xs = (double(o) + 0.5) / scale - 0.5, f = std::floor(xs);
        double sum = 0;
        for (int t = 0; t < 4; ++t) {
          const index_t i = index_t(f) - 1 + t;
          const double d = std::fabs(xs - double(i));
          w[t] = d <= 1  ? ((a + 2) * d - (a + 3)) * d * d + 1
                 : d < 2 ? ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
                         : 0.0;
          if (exclude && (i < 0 || i >= in)) w[t] = 0;
          sum += w[t];
          idx[t] = std::clamp<index_t>(i, 0, in - 1);
        }
        if (exclude)
          for (int t = 0; t < 4; ++t) w[t] /= sum;
      };
      for (index_t plane = 0; plane < 6; ++plane)
        for (index_t oh = 0; oh < OH; ++oh)
          for (index_t ow = 0; ow < OW; ++ow) {
            index_t ih[4], iw[4];
            double wh[4], ww[4];
            taps(oh, H, rp.scale_h, ih, wh);
            taps(ow, W, rp.scale_w, iw, ww);
            double want = 0;
            for (int i = 0; i < 4; ++i)
              for (int j = 0; j < 4; ++j)
                want += wh[i] * ww[j] * xv[std::size_t((plane * H + ih[i]) * W + iw[j])];
            REQUIRE(std::fabs(out[std::size_t((plane * OH + oh) * OW + ow)] - want) <= 1e-5);
          }
    }
}

TEST_CASE("graph: tf_crop_and_resize samples a region and extrapolates outside the input",
          "[graph]") {
  const index_t H = 4, W = 6, OH = 5, OW = 4;
  const auto xv = gt::random_vec(2 * 3 * H * W, 23, -1, 1);
  for (resize_mode mode : {resize_mode::linear, resize_mode::nearest})
    for (tensor_layout l : {tensor_layout::nchw, tensor_layout::nhwc}) {
      INFO("linear " << (mode == resize_mode::linear) << " layout " << layout_name(l));
      resize_params rp;
      rp.mode = mode;
      rp.coords = resize_coords::tf_crop_and_resize;
      rp.rounding = resize_rounding::floor;
      rp.out_h = OH;
      rp.out_w = OW;
      rp.roi_h0 = -0.2;  // the first output row lies above the input
      rp.roi_h1 = 0.9;
      rp.roi_w0 = 0.4;  // the last columns lie right of the input
      rp.roi_w1 = 1.7;
      rp.extrapolation = 10.f;
      graph g;
      tensor_id x = g.convert_layout("img", g.input("x", {2, 3, H, W}), l);
      tensor_id y = g.resize("rs", x, rp);
      if (l == tensor_layout::nhwc) y = g.convert_layout("back", y, tensor_layout::nchw);
      g.output(y);
      const plan p = compile(g, {.threads = 2, .fork_join_ns = 0});
      std::vector<float> out(2 * 3 * OH * OW, std::nanf(""));
      auto r = p.record({bind(xv)}, {bind(out)});
      r.replay();
      auto coord = [](index_t o, index_t out_n, index_t in, double a, double b) {
        return a * double(in - 1) + double(o) * (b - a) * double(in - 1) / double(out_n - 1);
      };
      int outside = 0;
      for (index_t plane = 0; plane < 6; ++plane)
        for (index_t oh = 0; oh < OH; ++oh)
          for (index_t ow = 0; ow < OW; ++ow) {
            const double yh = coord(oh, OH, H, rp.roi_h0, rp.roi_h1);
            const double yw = coord(ow, OW, W, rp.roi_w0, rp.roi_w1);
            double want = 10.0;
            if (yh < 0 || yh > H - 1 || yw < 0 || yw > W - 1) {
              ++outside;
            } else if (mode == resize_mode::nearest) {
              want = xv[std::size_t((plane * H + index_t(yh)) * W + index_t(yw))];
            } else {
              const index_t h0 = index_t(yh), w0 = index_t(yw);
              const index_t h1 = std::min(h0 + 1, H - 1), w1 = std::min(w0 + 1, W - 1);
              const double fh = yh - double(h0), fw = yw - double(w0);
              auto at = [&](index_t h, index_t w) {
                return double(xv[std::size_t((plane * H + h) * W + w)]);
              };
              want = (1 - fh) * ((1 - fw) * at(h0, w0) + fw * at(h0, w1)) +
                     fh * ((1 - fw) * at(h1, w0) + fw * at(h1, w1));
            }
            INFO("plane " << plane << " oh " << oh << " ow " << ow);
            REQUIRE(std::fabs(out[std::size_t((plane * OH + oh) * OW + ow)] - want) <= 1e-5);
          }
      CHECK(outside > 0);
    }
}

TEST_CASE("graph: max_pool_indices gives each window's argmax as a flat input index", "[graph]") {
  const index_t N = 2, C = 3, H = 7, W = 7;
  auto xv = gt::random_vec(N * C * H * W, 29, -1, 1);
  xv[5] = xv[6] = 2.f;     // a tie: the first position wins
  xv[50] = std::nanf("");  // a NaN wins its windows
  for (bool ceil : {false, true})
    for (bool col : {false, true}) {
      INFO("ceil_mode " << ceil << " column_major " << col);
      pool2d_params pp;
      pp.kind = kfuse::pool_kind::max;
      pp.r = 3;
      pp.s = 2;
      pp.stride_h = 2;
      pp.stride_w = 2;
      pp.pad_top = 1;
      pp.pad_left = 1;
      pp.ceil_mode = ceil;
      graph g;
      const tensor_id x = g.input("x", {N, C, H, W});
      g.output(g.max_pool_indices("ind", x, pp, col));
      const plan p = compile(g, {.threads = 2, .fork_join_ns = 0});
      const auto& os = p.output(0).shape;
      REQUIRE(os.size() == 4);
      const index_t OH = os[2], OW = os[3];
      CHECK(OH == (ceil ? 4 : 3));
      std::vector<std::int64_t> out(std::size_t(N * C * OH * OW), -7);
      auto r = p.record({bind(xv)}, {bind(out)});
      r.replay();
      for (index_t pl = 0; pl < N * C; ++pl)
        for (index_t oh = 0; oh < OH; ++oh)
          for (index_t ow = 0; ow < OW; ++ow) {
            index_t bh = -1, bw = -1;
            float best = 0;
            for (index_t h = oh * 2 - 1; h < oh * 2 - 1 + 3; ++h)
              for (index_t w = ow * 2 - 1; w < ow * 2 - 1 + 2; ++w) {
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                const float v = xv[std::size_t((pl * H + h) * W + w)];
                const bool better = bh < 0 || (best == best && (v != v || v > best));
                if (better) {
                  best = v;
                  bh = h;
                  bw = w;
                }
              }
            const index_t want = pl * H * W + (col ? bw * H + bh : bh * W + bw);
            INFO("plane " << pl << " oh " << oh << " ow " << ow);
            REQUIRE(out[std::size_t((pl * OH + oh) * OW + ow)] == want);
          }
    }
  graph g;
  const tensor_id x = g.convert_layout("img", g.input("x", {N, C, H, W}), tensor_layout::nhwc);
  g.output(g.max_pool_indices("ind", x, pool2d_params{}));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'ind' (max_pool_indices)") &&
                                    Catch::Matchers::Contains("nhwc"));
  graph g2;
  pool2d_params avg;
  avg.kind = kfuse::pool_kind::avg;
  g2.output(g2.max_pool_indices("ind", g2.input("x", {N, C, H, W}), avg));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("windowed max pooling only"));
}

TEST_CASE("graph: repeated replays are stable, 1 and 2 threads are bitwise identical",
          "[graph][threads]") {
  const gt::mlp net(64);
  const graph g = net.build();
  const auto x = gt::random_vec(std::size_t(64 * net.K), 9);
  const plan p1 = compile(g, {.threads = 1});
  const plan p2 = compile(g, {.threads = 2, .fork_join_ns = 0});
  std::vector<float> y1(std::size_t(64 * net.N)), y2(y1.size());
  auto r1 = p1.record({bind(x)}, {bind(y1)});
  auto r2 = p2.record({bind(x)}, {bind(y2)});
  r1.replay();
  const auto first = y1;
  for (int i = 0; i < 20; ++i) {
    std::fill(y2.begin(), y2.end(), std::nanf(""));
    r2.replay();
    REQUIRE(gt::bitwise_equal(y2, first));
    r1.replay();
    REQUIRE(gt::bitwise_equal(y1, first));
  }
  if (pool_threads(0) >= 2) CHECK(p2.threads() == 2);
  CHECK(gt::bitwise_equal(first, net.direct(x)));
}

TEST_CASE("graph: several application threads replay one plan at once", "[graph][threads]") {
  const gt::mlp net(16);
  const plan p = compile(net.build(), {.threads = 2, .fork_join_ns = 0});
  const auto x = gt::random_vec(std::size_t(16 * net.K), 4);
  const auto expect = net.direct(x);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&] {
      std::vector<float> y(expect.size());
      auto r = p.record({bind(x)}, {bind(y)});
      for (int i = 0; i < 30; ++i) {
        r.replay();
        if (!gt::bitwise_equal(y, expect)) ++bad;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(bad == 0);
}

TEST_CASE("graph: inputs and outputs rebind without recording again", "[graph]") {
  const gt::mlp net(5);
  const plan p = compile(net.build(), {.threads = 1});
  const auto xa = gt::random_vec(std::size_t(5 * net.K), 1),
             xb = gt::random_vec(std::size_t(5 * net.K), 2);
  std::vector<float> ya(std::size_t(5 * net.N)), yb(ya.size()), yc(ya.size());
  auto r = p.record({bind(xa)}, {bind(ya)});
  r.replay();
  r.bind_input(0, xb.data(), xb.size());
  r.bind_output(0, yb.data(), yb.size());
  r.replay();
  CHECK(gt::bitwise_equal(ya, net.direct(xa)));
  CHECK(gt::bitwise_equal(yb, net.direct(xb)));
  r.bind_input(0, bind(xa));
  r.bind_output(0, bind(yc));
  r.replay();
  CHECK(gt::bitwise_equal(yc, ya));
  CHECK_THROWS_WITH(r.bind_input(0, xa.data(), xa.size() - 1),
                    Catch::Contains("input 0 ('x') is bound to") && Catch::Contains("bytes"));
  CHECK_THROWS_WITH(r.bind_output(1, bind(yc)), Catch::Contains("output 1 does not exist"));
  CHECK_THROWS_WITH(r.bind_input(0, binding{nullptr, xa.size() * 4}), Catch::Contains("null"));
}

TEST_CASE("graph: reshape, flatten, concat, layout conversion, casts", "[graph]") {
  // x: [2, 3, 2, 2] nchw -> nhwc -> back; flatten; concat with a reshaped input; casts.
  graph g;
  auto x = g.input("x", {2, 3, 2, 2}, dtype::f32, tensor_layout::nchw);
  auto z = g.input("z", {2, 6});
  auto xh = g.convert_layout("to_nhwc", x, tensor_layout::nhwc);
  auto xc = g.convert_layout("to_nchw", xh, tensor_layout::nchw);
  auto flat = g.flatten("flat", xc);                  // [2, 12] view
  auto flat_h = g.flatten("flat_h", xh);              // nhwc: reorders
  auto zz = g.reshape("zz", z, {2, -1});              // view of an input
  auto cat = g.concat("cat", {flat, zz, flat_h}, 1);  // [2, 30]
  auto bf = g.cast("to_bf16", cat, dtype::bf16);
  auto back = g.cast("to_f32", bf, dtype::f32);
  auto q = g.quantize("q", back, dtype::u8, {0.05f, 100});
  auto dq = g.dequantize("dq", q);
  auto out2 = g.reshape("out2", dq, {60});
  g.output(out2);
  g.output(xh);
  const plan p = compile(g, {.threads = 1});
  const auto xv = gt::random_vec(24, 5, -4, 4), zv = gt::random_vec(12, 6, -4, 4);
  std::vector<float> y(60, std::nanf("")), yh(24, std::nanf(""));
  auto r = p.record({bind(xv), bind(zv)}, {bind(y), bind(yh)});
  r.replay();
  std::vector<float> eager(60), eager_h(24);
  p.run({bind(xv), bind(zv)}, {bind(eager), bind(eager_h)});
  CHECK(gt::bitwise_equal(y, eager));
  CHECK(gt::bitwise_equal(yh, eager_h));
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int hw = 0; hw < 4; ++hw)
        REQUIRE(yh[std::size_t(n * 12 + hw * 3 + c)] == xv[std::size_t(n * 12 + c * 4 + hw)]);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 30; ++j) {
      const float src = j < 12   ? xv[std::size_t(n * 12 + j)]
                        : j < 18 ? zv[std::size_t(n * 6 + j - 12)]
                                 : xv[std::size_t(n * 12 + j - 18)];
      const float b = to_float(from_float<bf16_t>(src));
      const double qv = std::clamp(double(std::nearbyint(b / 0.05f)) + 100, 0.0, 255.0);
      REQUIRE(y[std::size_t(n * 30 + j)] == float((qv - 100) * double(0.05f)));
    }
  // Views are free: flat and zz took no command; out2 moved its source into the output.
  int views = 0;
  for (const step_info& s : p.steps()) views += s.kernel == "view";
  CHECK(views == 3);
}

TEST_CASE("graph: batch norm, custom node, per-channel ops on nchw", "[graph]") {
  graph g;
  const index_t C = 5;
  auto x = g.input("x", {2, C, 3, 3}, dtype::f32, tensor_layout::nchw);
  const auto mean = gt::random_vec(C, 1), var = gt::random_vec(C, 2, 0.5f, 2.f),
             gamma = gt::random_vec(C, 3), beta = gt::random_vec(C, 4);
  auto bn = g.batch_norm("bn", x, g.constant("mean", {C}, mean.data()),
                         g.constant("var", {C}, var.data()), g.constant("gamma", {C}, gamma.data()),
                         g.constant("beta", {C}, beta.data()), 1e-3f);
  auto h = g.relu("relu", bn);
  auto y = g.custom("double_it", {h},
                    make_custom_op(
                        [](const void* const* in, void* out) {
                          const auto* a = static_cast<const float*>(in[0]);
                          auto* o = static_cast<float*>(out);
                          for (int i = 0; i < 90; ++i) o[i] = 2 * a[i];
                        },
                        {2, C, 3, 3}, dtype::f32, 90.0, tensor_layout::nchw));
  g.output(y);
  const plan p = compile(g, {.threads = 1});
  CHECK(p.steps().size() == 2);
  CHECK(p.report().text().find("fused relu (eltwise) into bn (eltwise)") != std::string::npos);
  CHECK(p.steps()[1].op == op_kind::custom);
  CHECK(p.steps()[1].flops == 90.0);
  const auto xv = gt::random_vec(90, 8, -3, 3);
  std::vector<float> yv(90, std::nanf(""));
  auto r = p.record({bind(xv)}, {bind(yv)});
  r.replay();
  for (int i = 0; i < 90; ++i) {
    const int c = (i / 9) % int(C);
    const double sc = gamma[std::size_t(c)] / std::sqrt(double(var[std::size_t(c)]) + 1e-3);
    const double v =
        std::max(0.0, (xv[std::size_t(i)] - mean[std::size_t(c)]) * sc + beta[std::size_t(c)]);
    REQUIRE(std::fabs(yv[std::size_t(i)] - 2 * v) <= 1e-5 * (1 + std::fabs(v)));
  }
}

// Without vdpbf16ps bf16 is an emulation (operands rounded, the same FMAs: slower than f32), so
// a bf16 plan runs its nodes in f32 there and says so; emulated_bf16 keeps the bf16 kernels.
TEST_CASE("graph: a bf16 plan runs in f32 where the arch has no bf16 dot product or a slow one",
          "[graph]") {
  const gt::mlp net(4);
  const graph g = net.build();
  const auto kernels = [](const plan& p) {
    std::string k;
    for (const step_info& s : p.steps()) k += s.kernel + "\n";
    return k;
  };
  const plan p = compile(g, {.threads = 1, .prec = precision::bf16});
  const plan e = compile(g, {.threads = 1, .prec = precision::bf16, .emulated_bf16 = true});
  INFO(p.report().text() << kernels(p));
  constexpr bool native = arch::native::native_bf16_dot;
  // (A vdpbf16ps no faster than the f32 FMAs, as on a Xeon here, also runs f32.)
  const bool pays = cached_bf16_dot_speed().pays();
  CHECK((p.report().text().find("has no bf16 dot product (vdpbf16ps): nodes of the plan's "
                                "precision run in f32") != std::string::npos) == !native);
  CHECK((p.report().text().find("is no faster than its f32 FMAs (probed") != std::string::npos) ==
        (native && !pays));
  CHECK((kernels(p).find("gemm bf16") != std::string::npos) == (native && pays));
  CHECK(kernels(e).find("gemm bf16") != std::string::npos);
  CHECK(e.report().text().find("has no bf16 dot product") == std::string::npos);
  CHECK(e.report().text().find("no faster than its f32") == std::string::npos);
}

TEST_CASE("graph: bf16 and int8 plans track the f32 plan", "[graph]") {
  const index_t M = 6;
  const gt::mlp net(M);
  graph g = net.build();
  const auto x = gt::random_vec(std::size_t(M * net.K), 11);
  const auto y32 = replay_once(compile(g, {.threads = 1}), x, std::size_t(M * net.N));
  const auto ybf = replay_once(
      compile(g, {.threads = 1, .prec = precision::bf16, .emulated_bf16 = true}), x, y32.size());
  double max_err = 0, max_ref = 0;
  for (std::size_t i = 0; i < y32.size(); ++i) {
    max_err = std::max(max_err, double(std::fabs(ybf[i] - y32[i])));
    max_ref = std::max(max_ref, double(std::fabs(y32[i])));
  }
  CHECK(max_err <= 0.03 * max_ref);
  // int8: activations of every linear input need quant params (as calibration would set).
  if constexpr (graph_ops::gemm_available<i8, arch::native, backend::xsimd>()) {
    for (const char* name : {"x", "gelu1", "relu"}) g.set_quant(g.find(name), {4.f / 255, 128});
    g.set_quant(g.find("gelu1"), {3.f / 255, 10});
    g.set_quant(g.find("relu"), {4.f / 255, 0});
    const plan p8 = compile(g, {.threads = 1, .prec = precision::int8});
    CHECK(p8.steps()[0].kernel.find("gemm int8") != std::string::npos);
    const auto y8 = replay_once(p8, x, y32.size());
    max_err = 0;
    for (std::size_t i = 0; i < y32.size(); ++i)
      max_err = std::max(max_err, double(std::fabs(y8[i] - y32[i])));
    CHECK(max_err <= 0.08 * max_ref);
  } else {
    // No int8 dot product on this arch: the plan's linears stay in f32, and the report says so.
    const plan p8 = compile(g, {.threads = 1, .prec = precision::int8});
    CHECK(p8.steps()[0].kernel.find("gemm f32") != std::string::npos);
    CHECK(p8.report().text().find("note: int8: arch") != std::string::npos);
    CHECK(replay_once(p8, x, y32.size()) == y32);
  }
}

TEST_CASE("graph: a user executor runs the parallel work", "[graph][threads]") {
  struct counting {
    std::atomic<int> calls{0};
  } state;
  executor ex;
  ex.context = &state;
  ex.concurrency = 2;
  ex.run = [](void* ctx, int n, void (*task)(void*, int), void* arg) {
    static_cast<counting*>(ctx)->calls++;
    std::vector<std::thread> ts;
    for (int i = 1; i < n; ++i) ts.emplace_back(task, arg, i);
    task(arg, 0);
    for (auto& t : ts) t.join();
  };
  const gt::mlp net(64);
  const auto x = gt::random_vec(std::size_t(64 * net.K), 3);
  const plan p = compile(net.build(), {.threads = 2, .fork_join_ns = 0, .exec = &ex});
  std::vector<float> y(std::size_t(64 * net.N));
  auto r = p.record({bind(x)}, {bind(y)});
  r.replay();
  CHECK(gt::bitwise_equal(y, net.direct(x)));
  if (pool_threads(0) >= 2) CHECK(state.calls > 0);
}

TEST_CASE("graph: the profiler hook sees every command", "[graph]") {
  const gt::mlp net(2);
  const plan p = compile(net.build(), {.threads = 1});
  const auto x = gt::random_vec(std::size_t(2 * net.K), 3);
  std::vector<float> y(std::size_t(2 * net.N));
  auto r = p.record({bind(x)}, {bind(y)});
  struct seen_t {
    std::vector<std::int32_t> steps;
    bool ordered = true;
  } seen;
  profiler_hook hook{
      &seen, [](void* u, std::int32_t, std::int32_t step, std::int64_t t0, std::int64_t t1) {
        auto& s = *static_cast<seen_t*>(u);
        s.steps.push_back(step);
        s.ordered = s.ordered && t0 <= t1;
      }};
  r.replay(hook);
  CHECK(seen.steps == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(seen.ordered);
  CHECK(r.step(0).name == "fc1");
  CHECK(gt::bitwise_equal(y, net.direct(x)));
}

TEST_CASE("graph: softmax and norms, with chains fused into the norm", "[graph]") {
  const index_t R = 5, C = 19;
  graph g;
  auto x = g.input("x", {R, C});
  auto res = g.input("res", {R, C});
  const auto gamma = gt::random_vec(C, 1, 0.5f, 1.5f), beta = gt::random_vec(C, 2);
  auto ln = g.layer_norm("ln", x, g.constant("gamma", {C}, gamma.data()),
                         g.constant("beta", {C}, beta.data()), 1e-5f);
  auto h = g.relu("relu", g.add("res_add", ln, res));
  auto rn = g.rms_norm("rms", h, g.constant("g2", {C}, gamma.data()));
  auto sm = g.softmax("sm", rn, 0);  // over rows
  auto x4 = g.input("x4", {2, 3, 2, 2}, dtype::f32, tensor_layout::nhwc);
  auto sm4 = g.softmax("sm4", x4, 1);  // over C of an nhwc tensor
  g.output(sm);
  g.output(sm4);
  const plan p = compile(g, {.threads = 1});
  CHECK(p.report().text().find("fused res_add (eltwise) into ln (layer_norm)") !=
        std::string::npos);
  CHECK(p.report().text().find("fused relu (eltwise) into ln (layer_norm)") != std::string::npos);
  const auto xv = gt::random_vec(std::size_t(R * C), 3, -2, 2),
             rv = gt::random_vec(std::size_t(R * C), 4);
  const auto x4v = gt::random_vec(24, 5, -3, 3);
  std::vector<float> y(std::size_t(R * C), std::nanf("")), y4(24, std::nanf(""));
  auto r = p.record({bind(xv), bind(rv), bind(x4v)}, {bind(y), bind(y4)});
  r.replay();
  // Reference.
  std::vector<double> hv(std::size_t(R * C));
  for (index_t i = 0; i < R; ++i) {
    double m = 0, v = 0;
    for (index_t j = 0; j < C; ++j) m += xv[std::size_t(i * C + j)];
    m /= double(C);
    for (index_t j = 0; j < C; ++j) v += std::pow(xv[std::size_t(i * C + j)] - m, 2);
    v /= double(C);
    double ss = 0;
    for (index_t j = 0; j < C; ++j) {
      const auto k = std::size_t(i * C + j);
      hv[k] = std::max(0.0, (xv[k] - m) / std::sqrt(v + 1e-5) * gamma[std::size_t(j)] +
                                beta[std::size_t(j)] + rv[k]);
      ss += hv[k] * hv[k];
    }
    for (index_t j = 0; j < C; ++j) {
      const auto k = std::size_t(i * C + j);
      hv[k] = hv[k] / std::sqrt(ss / double(C) + 1e-6) * gamma[std::size_t(j)];
    }
  }
  for (index_t j = 0; j < C; ++j) {
    double mx = -1e300, sum = 0;
    for (index_t i = 0; i < R; ++i) mx = std::max(mx, hv[std::size_t(i * C + j)]);
    for (index_t i = 0; i < R; ++i) sum += std::exp(hv[std::size_t(i * C + j)] - mx);
    for (index_t i = 0; i < R; ++i) {
      const double e = std::exp(hv[std::size_t(i * C + j)] - mx) / sum;
      REQUIRE(std::fabs(y[std::size_t(i * C + j)] - e) <= 2e-5);
    }
  }
  for (int n = 0; n < 2; ++n)
    for (int px = 0; px < 4; ++px) {
      double sum = 0;
      for (int c = 0; c < 3; ++c) sum += std::exp(double(x4v[std::size_t(n * 12 + px * 3 + c)]));
      for (int c = 0; c < 3; ++c)
        REQUIRE(std::fabs(y4[std::size_t(n * 12 + px * 3 + c)] -
                          std::exp(double(x4v[std::size_t(n * 12 + px * 3 + c)])) / sum) <= 1e-6);
    }
  std::vector<float> e(y.size()), e4(y4.size());
  p.run({bind(xv), bind(rv), bind(x4v)}, {bind(e), bind(e4)});
  CHECK(gt::bitwise_equal(e, y));
  CHECK(gt::bitwise_equal(e4, y4));
}

TEST_CASE("graph: depthwise conv with batch norm folded, relu and residual fused", "[graph]") {
  const index_t N = 2, C = 13, H = 7, W = 6;
  const auto wv = gt::random_vec(std::size_t(C * 9), 1), bv = gt::random_vec(std::size_t(C), 2);
  const auto mean = gt::random_vec(std::size_t(C), 3),
             var = gt::random_vec(std::size_t(C), 4, 0.5f, 2.f),
             gamma = gt::random_vec(std::size_t(C), 5), beta = gt::random_vec(std::size_t(C), 6);
  for (tensor_layout L : {tensor_layout::nchw, tensor_layout::nhwc}) {
    graph g;
    auto x = g.input("x", {N, C, H, W}, dtype::f32, L);
    conv2d_params cp;
    cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
    cp.groups = int(C);
    auto conv = g.conv2d("dw", x, g.constant("w", {C, 1, 3, 3}, wv.data()),
                         g.constant("b", {C}, bv.data()), cp);
    auto bn = g.batch_norm(
        "bn", conv, g.constant("mean", {C}, mean.data()), g.constant("var", {C}, var.data()),
        g.constant("gamma", {C}, gamma.data()), g.constant("beta", {C}, beta.data()));
    auto y = g.relu("relu", g.add("res", bn, x));
    g.output(y);
    // The declared layout: this checks the nchw kernels too (the layout choice is tested below).
    const plan p = compile(g, {.threads = 1, .choose_layout = false});
    INFO(p.report().text());
    CHECK(p.steps().size() == 1);
    CHECK(p.report().text().find("folded bn (batch_norm) into dw (conv2d)") != std::string::npos);
    CHECK(p.steps()[0].kernel.find("depthwise_conv2d f32") != std::string::npos);
    const auto xv = gt::random_vec(std::size_t(N * C * H * W), 7, -2, 2);
    std::vector<float> yv(xv.size(), std::nanf(""));
    auto r = p.record({bind(xv)}, {bind(yv)});
    r.replay();
    const plan q = compile(g, {.threads = 1, .fuse = false});
    std::vector<float> yq(xv.size(), std::nanf(""));
    auto rq = q.record({bind(xv)}, {bind(yq)});
    rq.replay();
    const bool cl = L == tensor_layout::nhwc;
    auto at = [&](index_t n, index_t c, index_t h, index_t w) {
      return std::size_t(cl ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w);
    };
    for (index_t n = 0; n < N; ++n)
      for (index_t c = 0; c < C; ++c)
        for (index_t h = 0; h < H; ++h)
          for (index_t w = 0; w < W; ++w) {
            double acc = bv[std::size_t(c)];
            for (index_t r2 = 0; r2 < 3; ++r2)
              for (index_t s2 = 0; s2 < 3; ++s2) {
                const index_t ih = h + r2 - 1, iw = w + s2 - 1;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(wv[std::size_t(c * 9 + r2 * 3 + s2)]) * xv[at(n, c, ih, iw)];
              }
            const double sc = gamma[std::size_t(c)] / std::sqrt(double(var[std::size_t(c)]) + 1e-5);
            const double v = std::max(
                0.0, (acc - mean[std::size_t(c)]) * sc + beta[std::size_t(c)] + xv[at(n, c, h, w)]);
            REQUIRE(std::fabs(yv[at(n, c, h, w)] - v) <= 1e-5 * (1 + std::fabs(v)));
            REQUIRE(std::fabs(yq[at(n, c, h, w)] - v) <= 1e-5 * (1 + std::fabs(v)));
          }
  }
}

namespace {
/// ResNet basic block: conv3x3-BN-ReLU, conv3x3-BN, + x, ReLU, global average pool, flatten,
/// linear; and its double reference.
struct block {
  index_t N = 2, C = 8, H = 9, W = 7, classes = 5;
  std::vector<float> w1, w2, bn[2][4], fw, fb;
  block(index_t c = 8, index_t h = 9, index_t w = 7) : C(c), H(h), W(w) {
    w1 = gt::kaiming(C, C * 9, 21);
    w2 = gt::kaiming(C, C * 9, 22);
    for (int i = 0; i < 2; ++i) {
      bn[i][0] = gt::random_vec(std::size_t(C), 30 + i, -0.2f, 0.2f);  // mean
      bn[i][1] = gt::random_vec(std::size_t(C), 40 + i, 0.5f, 1.5f);   // var
      bn[i][2] = gt::random_vec(std::size_t(C), 50 + i, 0.8f, 1.2f);   // gamma
      bn[i][3] = gt::random_vec(std::size_t(C), 60 + i, -0.1f, 0.1f);  // beta
    }
    fw = gt::kaiming(classes, C, 23);
    fb = gt::random_vec(std::size_t(classes), 24, -0.1f, 0.1f);
  }
  graph build(tensor_layout L) const {
    graph g;
    auto x = g.input("x", {N, C, H, W}, dtype::f32, L);
    conv2d_params same;
    same.pad_top = same.pad_left = same.pad_bottom = same.pad_right = 1;
    auto bnorm = [&](const char* name, tensor_id t, int i) {
      const std::string s = name;
      return g.batch_norm(s, t, g.constant(s + ".mean", {C}, bn[i][0].data()),
                          g.constant(s + ".var", {C}, bn[i][1].data()),
                          g.constant(s + ".gamma", {C}, bn[i][2].data()),
                          g.constant(s + ".beta", {C}, bn[i][3].data()));
    };
    auto r1 = g.relu(
        "relu1",
        bnorm("bn1", g.conv2d("conv1", x, g.constant("w1", {C, C, 3, 3}, w1.data()), {}, same), 0));
    auto n2 =
        bnorm("bn2", g.conv2d("conv2", r1, g.constant("w2", {C, C, 3, 3}, w2.data()), {}, same), 1);
    auto r2 = g.relu("relu2", g.add("residual", n2, x));
    pool2d_params gap;
    gap.kind = kfuse::pool_kind::avg;
    gap.global = true;
    auto flat = g.flatten("flatten", g.pool2d("gap", r2, gap));
    g.output(g.linear("fc", flat, g.constant("fw", {classes, C}, fw.data()),
                      g.constant("fb", {classes}, fb.data())));
    return g;
  }
  std::vector<double> reference(const std::vector<float>& x, tensor_layout L) const {
    const bool cl = L == tensor_layout::nhwc;
    auto at = [&](index_t n, index_t c, index_t h, index_t w) {
      return std::size_t(cl ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w);
    };
    std::vector<double> in(x.begin(), x.end());
    auto conv_bn = [&](const std::vector<double>& a, const std::vector<float>& w, int i) {
      std::vector<double> o(a.size());
      for (index_t n = 0; n < N; ++n)
        for (index_t k = 0; k < C; ++k)
          for (index_t h = 0; h < H; ++h)
            for (index_t ww = 0; ww < W; ++ww) {
              double acc = 0;
              for (index_t c = 0; c < C; ++c)
                for (index_t r = 0; r < 3; ++r)
                  for (index_t s = 0; s < 3; ++s) {
                    const index_t ih = h + r - 1, iw = ww + s - 1;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    acc +=
                        double(w[std::size_t(((k * C + c) * 3 + r) * 3 + s)]) * a[at(n, c, ih, iw)];
                  }
              const auto kk = std::size_t(k);
              o[at(n, k, h, ww)] =
                  (acc - bn[i][0][kk]) / std::sqrt(double(bn[i][1][kk]) + 1e-5) * bn[i][2][kk] +
                  bn[i][3][kk];
            }
      return o;
    };
    auto h1 = conv_bn(in, w1, 0);
    for (double& v : h1) v = std::max(v, 0.0);
    auto h2 = conv_bn(h1, w2, 1);
    std::vector<double> y(std::size_t(N * classes));
    for (index_t n = 0; n < N; ++n) {
      std::vector<double> pooled(std::size_t(C), 0.0);
      for (index_t c = 0; c < C; ++c)
        for (index_t h = 0; h < H; ++h)
          for (index_t ww = 0; ww < W; ++ww)
            pooled[std::size_t(c)] +=
                std::max(0.0, h2[at(n, c, h, ww)] + in[at(n, c, h, ww)]) / double(H * W);
      for (index_t j = 0; j < classes; ++j) {
        double acc = fb[std::size_t(j)];
        for (index_t c = 0; c < C; ++c)
          acc += double(fw[std::size_t(j * C + c)]) * pooled[std::size_t(c)];
        y[std::size_t(n * classes + j)] = acc;
      }
    }
    return y;
  }
};
}  // namespace

TEST_CASE("graph: ResNet basic block (conv-BN-ReLU x2, residual, pool, linear)", "[graph]") {
  const block b;
  for (tensor_layout L : {tensor_layout::nchw, tensor_layout::nhwc}) {
    INFO("layout " << layout_name(L));
    const graph g = b.build(L);
    const plan p = compile(g, {.threads = 1, .choose_layout = false});
    const std::string rep = p.report().text();
    INFO(rep);
    CHECK(rep.find("folded bn1 (batch_norm) into conv1 (conv2d)") != std::string::npos);
    CHECK(rep.find("fused relu1 (eltwise) into conv1 (conv2d)") != std::string::npos);
    CHECK(rep.find("folded bn2 (batch_norm) into conv2 (conv2d)") != std::string::npos);
    CHECK(rep.find("fused residual (eltwise) into conv2 (conv2d)") != std::string::npos);
    CHECK(rep.find("fused relu2 (eltwise) into conv2 (conv2d)") != std::string::npos);
    CHECK(p.steps().size() == 5);  // conv1, conv2, gap, flatten (view), fc
    const auto x = gt::random_vec(std::size_t(b.N * b.C * b.H * b.W), 25, -1, 1);
    const auto ref = b.reference(x, L);
    std::vector<float> y(ref.size(), std::nanf(""));
    auto r = p.record({bind(x)}, {bind(y)});
    r.replay();
    double max_ref = 0;
    for (double v : ref) max_ref = std::max(max_ref, std::fabs(v));
    for (std::size_t i = 0; i < y.size(); ++i)
      REQUIRE(std::fabs(y[i] - ref[i]) <= 1e-4 * (1 + max_ref));
    // Unfused (BN as its own pass) and 2 threads agree; bf16 within bf16 accuracy.
    const plan q = compile(g, {.threads = 1, .fuse = false, .choose_layout = false});
    std::vector<float> yq(y.size());
    auto rq = q.record({bind(x)}, {bind(yq)});
    rq.replay();
    for (std::size_t i = 0; i < y.size(); ++i)
      REQUIRE(std::fabs(yq[i] - ref[i]) <= 1e-4 * (1 + max_ref));
    const plan p2 = compile(g, {.threads = 2, .fork_join_ns = 0, .choose_layout = false});
    std::vector<float> y2(y.size());
    auto r2 = p2.record({bind(x)}, {bind(y2)});
    r2.replay();
    CHECK(gt::bitwise_equal(y2, y));
    const plan pb = compile(
        g, {.threads = 1, .prec = precision::bf16, .choose_layout = false, .emulated_bf16 = true});
    std::vector<float> yb(y.size());
    auto rb = pb.record({bind(x)}, {bind(yb)});
    rb.replay();
    for (std::size_t i = 0; i < y.size(); ++i)
      REQUIRE(std::fabs(yb[i] - ref[i]) <= 0.03 * (1 + max_ref));
  }
}

// 16 channels on 16x12 maps x 2 images: 24 tiles of 4x4 outputs, so conv2d's cost model takes
// Winograd F(4x4, 3x3) for both convs in NHWC (in a bf16 plan too: its full tiles save more than
// bf16's dot product would; not on AMX tiles, which keep a bf16 plan's convs bf16);
// compile_options::winograd = false keeps them direct.
TEST_CASE("graph: 3x3 convs run as Winograd where it pays, direct when told", "[graph]") {
  const block b(16, 16, 12);
  const graph g = b.build(tensor_layout::nhwc);
  const auto x = gt::random_vec(std::size_t(b.N * b.C * b.H * b.W), 26, -1, 1);
  const auto ref = b.reference(x, tensor_layout::nhwc);
  double max_ref = 0;
  for (double v : ref) max_ref = std::max(max_ref, std::fabs(v));
  const auto kernels = [](const plan& p) {
    std::string k;
    for (const step_info& s : p.steps()) k += s.kernel + "\n";
    return k;
  };
  for (const bool wino : {true, false})
    for (const precision pr : {precision::f32, precision::bf16}) {
      const plan p = compile(
          g,
          {.threads = 2, .prec = pr, .fork_join_ns = 0, .winograd = wino, .emulated_bf16 = true});
      const std::string k = kernels(p), rep = p.report().text();
      INFO(k << rep);
      const bool amx =
          kfuse::gemm<kfuse::bf16, kfuse::arch::native>::has_amx && kfuse::amx_enabled();
      if (wino && pr == precision::bf16 && amx) {
        CHECK(k.find("winograd") == std::string::npos);
        CHECK(k.find("conv2d bf16 nhwc [bias, relu]") != std::string::npos);
      } else if (wino) {
        CHECK(k.find("conv2d f32 nhwc winograd [bias, relu]") != std::string::npos);
        CHECK(k.find("conv2d f32 nhwc winograd [bias, add, relu]") != std::string::npos);
      } else {
        CHECK(k.find("winograd") == std::string::npos);
      }
      const bool noted = rep.find("f32 Winograd") != std::string::npos;
      CHECK(noted == (wino && pr == precision::bf16 && !amx));
      std::vector<float> y(ref.size(), std::nanf(""));
      auto r = p.record({bind(x)}, {bind(y)});
      r.replay();
      const double tol = pr == precision::bf16 ? 0.03 : 1e-4;  // the bf16 plan's linear
      for (std::size_t i = 0; i < y.size(); ++i)
        REQUIRE(std::fabs(y[i] - ref[i]) <= tol * (1 + max_ref));
    }
}

TEST_CASE("graph: max and average pooling nodes", "[graph]") {
  const index_t N = 1, C = 3, H = 5, W = 6;
  graph g;
  auto x = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
  pool2d_params mp;
  mp.kind = kfuse::pool_kind::max;
  mp.r = mp.s = 3;
  mp.stride_h = mp.stride_w = 2;
  mp.pad_top = mp.pad_left = mp.pad_bottom = mp.pad_right = 1;
  auto y = g.relu("relu", g.pool2d("maxpool", x, mp));
  g.output(y);
  const plan p = compile(g, {.threads = 1});
  CHECK(p.steps().size() == 1);
  CHECK(p.steps()[0].out_shape == std::vector<index_t>{1, 3, 3, 3});
  const auto xv = gt::random_vec(std::size_t(N * C * H * W), 26, -2, 2);
  std::vector<float> yv(27, std::nanf(""));
  auto r = p.record({bind(xv)}, {bind(yv)});
  r.replay();
  for (index_t c = 0; c < C; ++c)
    for (index_t oh = 0; oh < 3; ++oh)
      for (index_t ow = 0; ow < 3; ++ow) {
        float m = -1e30f;
        for (index_t i = oh * 2 - 1; i < oh * 2 + 2; ++i)
          for (index_t j = ow * 2 - 1; j < ow * 2 + 2; ++j)
            if (i >= 0 && i < H && j >= 0 && j < W)
              m = std::max(m, xv[std::size_t((c * H + i) * W + j)]);
        REQUIRE(yv[std::size_t((c * 3 + oh) * 3 + ow)] == std::max(m, 0.f));
      }
}

// broadcast: every layout pair, a squeeze-excite style gate [N, C, 1, 1] and a row vector,
// against the NumPy rule computed directly; poisoned outputs; 1 and 2 threads.
TEST_CASE("graph: broadcast expands by NumPy's rules into any layout", "[graph][threads]") {
  struct case_t {
    std::vector<index_t> from, to;
    tensor_layout in, out;
  };
  const std::vector<case_t> cases = {
      {{2, 3, 1, 1}, {2, 3, 4, 5}, tensor_layout::nchw, tensor_layout::nchw},
      {{2, 3, 1, 1}, {2, 3, 4, 5}, tensor_layout::nchw, tensor_layout::nhwc},
      {{2, 3, 1, 5}, {2, 3, 4, 5}, tensor_layout::nhwc, tensor_layout::nchw},
      {{1, 3, 4, 1}, {2, 3, 4, 5}, tensor_layout::nhwc, tensor_layout::nhwc},
      {{7}, {3, 2, 7}, tensor_layout::plain, tensor_layout::plain},
      {{3, 1}, {2, 3, 9}, tensor_layout::plain, tensor_layout::plain},
      {{1}, {4, 3, 2, 2}, tensor_layout::plain, tensor_layout::nhwc},
  };
  for (const case_t& k : cases)
    for (int threads : {1, 2}) {
      graph g;
      const tensor_id x = g.input("x", k.from, dtype::f32, k.in);
      g.output(g.broadcast("b", x, k.to, k.out));
      plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
      const index_t nin = shape_numel(k.from), nout = shape_numel(k.to);
      std::vector<float> in(static_cast<std::size_t>(nin)),
          out(static_cast<std::size_t>(nout), std::nanf(""));
      for (index_t i = 0; i < nin; ++i) in[std::size_t(i)] = float(i) * 0.5f - 3.f;
      replay_buffer r = p.record({bind(in)}, {bind(out)});
      r.replay();
      // Logical (row-major) index -> memory index of a 4-D tensor in layout l.
      auto mem = [](const std::vector<index_t>& s, tensor_layout l, index_t i) {
        if (l != tensor_layout::nhwc) return i;
        const index_t w = i % s[3], h = i / s[3] % s[2], c = i / (s[3] * s[2]) % s[1],
                      n = i / (s[3] * s[2] * s[1]);
        return ((n * s[2] + h) * s[3] + w) * s[1] + c;
      };
      for (index_t i = 0; i < nout; ++i) {
        index_t rem = i, src = 0, stride = 1;
        const std::size_t off = k.to.size() - k.from.size();
        for (std::size_t d = k.to.size(); d-- > 0;) {
          const index_t coord = rem % k.to[d];
          rem /= k.to[d];
          if (d >= off) {
            if (k.from[d - off] != 1) src += coord * stride;
            stride *= k.from[d - off];
          }
        }
        INFO("case " << (&k - cases.data()) << " threads " << threads << " element " << i);
        REQUIRE(out[std::size_t(mem(k.to, k.out, i))] == in[std::size_t(mem(k.from, k.in, src))]);
      }
    }
  graph g;
  const tensor_id x = g.input("x", {2, 3});
  g.output(g.broadcast("b", x, {2, 4}));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'b' (broadcast)") &&
                                    Catch::Matchers::Contains("does not broadcast"));
}

// matmul of two run-time tensors: broadcast batch dims, a fused scale and a residual add read by
// flat index across the batch (attention's scores + an additive mask), 1-D operands, errors.
TEST_CASE("graph: a matmul reads a strided_view operand in place (transpose, slice, 1-D)",
          "[graph]") {
  // x [2, 7, 5] transposed to a [2, 5, 7]; y [3, 9, 4] sliced to b rows 1..7 of each batch,
  // broadcast over a's batch of 1 ... : out = a . b for each case, fused and not.
  std::vector<float> x(2 * 7 * 5), y(3 * 9 * 4), z(14);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::cos(float(i) * 0.11f);
  for (std::size_t i = 0; i < z.size(); ++i) z[i] = float(i % 5) - 2.f;
  // a[n][m][k] = x[n][k][m]; b[h][k][j] = y[h][k + 1][j]; the 1-D v[k] = z[2k].
  auto a_at = [&](index_t n, index_t m, index_t k) {
    return double(x[std::size_t((n * 7 + k) * 5 + m)]);
  };
  auto b_at = [&](index_t h, index_t k, index_t j) {
    return double(y[std::size_t((h * 9 + k + 1) * 4 + j)]);
  };
  // out [batches, 5, 4]: batch i is a's batch an(i) times b's batch bn(i).
  auto expect = [&](const std::vector<float>& out, index_t batches, auto an, auto bn) {
    for (index_t i = 0; i < batches; ++i)
      for (index_t m = 0; m < 5; ++m)
        for (index_t j = 0; j < 4; ++j) {
          double acc = 0;
          for (index_t k = 0; k < 7; ++k) acc += a_at(an(i), m, k) * b_at(bn(i), k, j);
          REQUIRE(std::fabs(out[std::size_t((i * 5 + m) * 4 + j)] - acc) <= 1e-5);
        }
  };
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    {  // transposed a [2, 5, 7] . sliced b [1 ... of 3 batches]: a's batch 2 vs b's 3 do not
       // broadcast, so b is the slice of batch 0 only: [7, 4].
      graph g;
      const tensor_id tx = g.input("x", {2, 7, 5}), ty = g.input("y", {3, 9, 4});
      const tensor_id a = g.strided_view("xt", tx, {2, 5, 7}, 0, {35, 1, 5});
      const tensor_id b = g.strided_view("ys", ty, {7, 4}, 4, {4, 1});
      g.output(g.matmul("mm", a, b));
      plan p = compile(g, {.threads = 1, .fuse = fuse});
      CHECK(p.steps().size() == (fuse ? 1u : 3u));
      if (fuse)
        CHECK(p.report().text().find("fused xt (strided_view) into mm (matmul): operand a") !=
              std::string::npos);
      std::vector<float> out(2 * 5 * 4, std::nanf(""));
      replay_buffer r = p.record({bind(x), bind(y)}, {bind(out)});
      r.replay();
      expect(
          out, 2, [](index_t i) { return i; }, [](index_t) { return index_t(0); });
    }
    {  // a [5, 7] (x's batch 1 transposed) broadcast over the sliced b [3, 7, 4] -> [3, 5, 4].
      graph g;
      const tensor_id tx = g.input("x", {2, 7, 5}), ty = g.input("y", {3, 9, 4});
      const tensor_id a = g.strided_view("xt", tx, {5, 7}, 35, {1, 5});
      const tensor_id b = g.strided_view("ys", ty, {3, 7, 4}, 4, {36, 4, 1});
      g.output(g.matmul("mm", a, b));
      plan p = compile(g, {.threads = 2, .fuse = fuse, .fork_join_ns = 0});
      CHECK(p.steps().size() == (fuse ? 1u : 3u));
      std::vector<float> out(3 * 5 * 4, std::nanf(""));
      replay_buffer r = p.record({bind(x), bind(y)}, {bind(out)});
      r.replay();
      expect(
          out, 3, [](index_t) { return index_t(1); }, [](index_t i) { return i; });
    }
    {  // A 1-D view (every second element of z) as the row: [7] . b [7, 4] -> [4].
      graph g;
      const tensor_id tz = g.input("z", {14}), ty = g.input("y", {3, 9, 4});
      const tensor_id v = g.strided_view("zs", tz, {7}, 0, {2});
      const tensor_id b = g.strided_view("ys", ty, {7, 4}, 4 + 36, {4, 1});
      g.output(g.matmul("vm", v, b));
      plan p = compile(g, {.threads = 1, .fuse = fuse});
      CHECK(p.output(0).shape == std::vector<index_t>{4});
      std::vector<float> out(4, std::nanf(""));
      replay_buffer r = p.record({bind(z), bind(y)}, {bind(out)});
      r.replay();
      for (index_t j = 0; j < 4; ++j) {
        double acc = 0;
        for (index_t k = 0; k < 7; ++k) acc += double(z[std::size_t(2 * k)]) * b_at(1, k, j);
        REQUIRE(std::fabs(out[std::size_t(j)] - acc) <= 1e-5);
      }
    }
  }
}

TEST_CASE("graph: matmul of two run-time tensors with a fused chain", "[graph][threads]") {
  const std::vector<index_t> as = {2, 3, 5, 7}, bs = {3, 7, 4}, os = {2, 3, 5, 4};
  std::vector<float> a(2 * 3 * 5 * 7), b(3 * 7 * 4), mask(2 * 3 * 5 * 4);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(float(i) * 0.37f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(float(i) * 0.11f);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = float(i % 5) - 2.f;
  std::vector<double> want(mask.size());
  for (index_t n = 0; n < 2; ++n)
    for (index_t h = 0; h < 3; ++h)
      for (index_t m = 0; m < 5; ++m)
        for (index_t j = 0; j < 4; ++j) {
          double acc = 0;
          for (index_t k = 0; k < 7; ++k)
            acc += double(a[std::size_t(((n * 3 + h) * 5 + m) * 7 + k)]) *
                   b[std::size_t((h * 7 + k) * 4 + j)];
          const std::size_t o = std::size_t(((n * 3 + h) * 5 + m) * 4 + j);
          want[o] = acc * 0.125 + mask[o];
        }
  for (precision prec : {precision::f32, precision::bf16})
    for (int threads : {1, 2}) {
      graph g;
      const tensor_id ta = g.input("a", as), tb = g.input("b", bs), tm = g.input("mask", os);
      const tensor_id y = g.matmul("scores", ta, tb);
      g.output(g.add("masked", g.scale("scaled", y, 0.125f), tm));
      plan p =
          compile(g, {.threads = threads, .prec = prec, .fork_join_ns = 0, .emulated_bf16 = true});
      // The scale and the add run in the product's epilogue: one step.
      CHECK(p.steps().size() == 1);
      CHECK(p.steps()[0].kernel.find("batched_gemm") != std::string::npos);
      std::vector<float> out(mask.size(), std::nanf(""));
      replay_buffer r = p.record({bind(a), bind(b), bind(mask)}, {bind(out)});
      r.replay();
      // bf16: both operands rounded to 8 bits of mantissa, 7 products of values up to 1.
      const double tol = prec == precision::bf16 ? 7 * 2 * 0.0079 * 0.125 : 1e-5;
      for (std::size_t i = 0; i < out.size(); ++i) {
        INFO("prec " << int(prec) << " threads " << threads << " element " << i);
        REQUIRE(std::fabs(out[i] - want[i]) <= tol);
      }
    }
  {  // A 1-D left operand is a row, and leaves the result: [7] . [3, 7, 4] -> [3, 4].
    graph g;
    const tensor_id v = g.input("v", {7}), tb = g.input("b", bs);
    g.output(g.matmul("vm", v, tb));
    plan p = compile(g, {.threads = 1});
    CHECK(p.output(0).shape == std::vector<index_t>{3, 4});
    std::vector<float> vin(a.begin(), a.begin() + 7), out(12);
    replay_buffer r = p.record({bind(vin), bind(b)}, {bind(out)});
    r.replay();
    for (index_t h = 0; h < 3; ++h)
      for (index_t j = 0; j < 4; ++j) {
        double acc = 0;
        for (index_t k = 0; k < 7; ++k)
          acc += double(vin[std::size_t(k)]) * b[std::size_t((h * 7 + k) * 4 + j)];
        REQUIRE(std::fabs(out[std::size_t(h * 4 + j)] - acc) <= 1e-5);
      }
  }
  graph g;
  const tensor_id ta = g.input("a", {2, 5, 7}), tb = g.input("b", {3, 6, 4});
  g.output(g.matmul("mm", ta, tb));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'mm' (matmul)") &&
                                    Catch::Matchers::Contains("a has 7 columns, b has 6 rows"));
  graph g2;
  const tensor_id x2 = g2.input("a", {2, 5, 7}), y2 = g2.input("b", {3, 7, 4});
  g2.output(g2.matmul("mm", x2, y2));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("do not broadcast"));
}

// gather: an embedding lookup with i64 run-time ids (negative ones count from the end), a gather
// along axis 1 with i32 ids, and the index checks at compile time (constant) and replay (run-time).
TEST_CASE("graph: gather rows of a table by i32 and i64 indices", "[graph][threads]") {
  std::vector<float> table(5 * 3);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = float(i);
  for (int threads : {1, 2}) {
    graph g;
    const tensor_id t = g.constant("table", {5, 3}, table.data());
    const tensor_id ids = g.input("ids", {2, 2}, dtype::i64);
    const tensor_id cols = g.input("cols", {2}, dtype::i32);
    g.output(g.gather("emb", t, ids));
    g.output(g.gather("pick", t, cols, 1));
    plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
    CHECK(p.output(0).shape == std::vector<index_t>{2, 2, 3});
    CHECK(p.output(1).shape == std::vector<index_t>{5, 2});
    std::vector<std::int64_t> id_v = {4, 0, -1, 2};
    const std::vector<std::int32_t> col_v = {2, -3};
    std::vector<float> emb(12, std::nanf("")), pick(10, std::nanf(""));
    replay_buffer r = p.record({bind(id_v), bind(col_v)}, {bind(emb), bind(pick)});
    r.replay();
    const int rows[] = {4, 0, 4, 2};
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        REQUIRE(emb[std::size_t(j * 3 + k)] == table[std::size_t(rows[j] * 3 + k)]);
    for (int i = 0; i < 5; ++i) {
      REQUIRE(pick[std::size_t(i * 2)] == table[std::size_t(i * 3 + 2)]);
      REQUIRE(pick[std::size_t(i * 2 + 1)] == table[std::size_t(i * 3)]);
    }
    id_v[2] = 5;  // one past the table: an error naming the node, nothing read outside
    CHECK_THROWS_WITH(r.replay(), Catch::Matchers::Contains("node 'emb' (gather)") &&
                                      Catch::Matchers::Contains("index 5 at position 2"));
  }
  graph g;
  const tensor_id t = g.constant("table", {5, 3}, table.data());
  const std::int64_t bad[] = {1, -6};
  g.output(g.gather("emb", t, g.constant("ids", {2}, dtype::i64, bad)));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'emb' (gather)") &&
                                    Catch::Matchers::Contains("index -6 at position 1"));
  graph g2;
  g2.output(g2.gather("emb", g2.constant("table", {5, 3}, table.data()), g2.input("ids", {2})));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("gather takes i32 or i64 indices"));
}

// attention: the fused node against the same computation spelled out in graph ops (strided views
// for the head transposes, matmul, scale, the broadcast mask added, softmax, matmul, transpose
// back), grouped-query heads and a key-padding mask; errors name the node.
TEST_CASE("graph: fused attention equals the unfused chain of graph ops", "[graph][threads]") {
  const index_t B = 2, S = 11, H = 4, Hkv = 2, d = 16;
  std::vector<float> q(std::size_t(B * S * H * d)), k(std::size_t(B * S * Hkv * d)), v(k.size()),
      mask(std::size_t(B * S), 0.f);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(float(i) * 0.13f);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(float(i) * 0.07f);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i) * 0.29f + 1.f);
  for (index_t j = 8; j < S; ++j) mask[std::size_t(S + j)] = -10000.f;  // batch 1: 3 pads
  // The unfused reference: K / V heads repeated for the query heads by strides (h / 2).
  graph u;
  const tensor_id uq = u.input("q", {B, S, H, d}), uk = u.input("k", {B, S, Hkv, d}),
                  uv = u.input("v", {B, S, Hkv, d}), um = u.input("mask", {B, 1, 1, S});
  const tensor_id qt = u.strided_view("qt", uq, {B, H, S, d}, 0, {S * H * d, d, H * d, 1});
  // K^T and V per query head h read kv head h / 2: a 5-D view repeats each kv head twice.
  const tensor_id kth =
      u.strided_view("kth", uk, {B, Hkv, 2, d, S}, 0, {S * Hkv * d, d, 0, 1, Hkv * d});
  const tensor_id vth =
      u.strided_view("vth", uv, {B, Hkv, 2, S, d}, 0, {S * Hkv * d, d, 0, Hkv * d, 1});
  const tensor_id k4 = u.reshape("k4", kth, {B, H, d, S});
  const tensor_id v4 = u.reshape("v4", vth, {B, H, S, d});
  const tensor_id sc = u.scale("sc", u.matmul("qk", qt, k4), 0.25f);
  const tensor_id masked = u.add("masked", sc, u.broadcast("mb", um, {B, H, S, S}));
  const tensor_id pv = u.matmul("pv", u.softmax("p", masked, -1), v4);
  u.output(u.strided_view("o", pv, {B, S, H, d}, 0, {H * S * d, d, S * d, 1}));
  plan pu = compile(u, {.threads = 1});
  std::vector<float> want(q.size());
  pu.run({bind(q), bind(k), bind(v), bind(mask)}, {bind(want)});
  for (int threads : {1, 2}) {
    graph g;
    const tensor_id gq = g.input("q", {B, S, H, d}), gk = g.input("k", {B, S, Hkv, d}),
                    gv = g.input("v", {B, S, Hkv, d}), gm = g.input("mask", {B, 1, 1, S});
    g.output(g.attention("att", gq, gk, gv, gm, {.scale = 0.25f}));
    plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
    CHECK(p.steps()[0].kernel.find("attention") != std::string::npos);
    std::vector<float> got(q.size(), std::nanf(""));
    replay_buffer r = p.record({bind(q), bind(k), bind(v), bind(mask)}, {bind(got)});
    r.replay();
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("threads " << threads << " element " << i);
      REQUIRE(std::fabs(got[i] - want[i]) <= 2e-5);
    }
  }
  {  // bf16 Q, K, V and output, f32 arithmetic: the f32 plan on the rounded inputs, within
     // the output's rounding (half a bf16 ulp, 2^-8 relative).
    std::vector<bf16_t> qb(q.size()), kb(k.size()), vb(v.size());
    std::vector<float> qr(q.size()), kr(k.size()), vr(v.size());
    auto round = [](const std::vector<float>& x, std::vector<bf16_t>& b, std::vector<float>& r) {
      for (std::size_t i = 0; i < x.size(); ++i) r[i] = to_float(b[i] = from_float<bf16_t>(x[i]));
    };
    round(q, qb, qr);
    round(k, kb, kr);
    round(v, vb, vr);
    std::vector<float> want_r(q.size());
    pu.run({bind(qr), bind(kr), bind(vr), bind(mask)}, {bind(want_r)});
    graph g;
    const tensor_id gq = g.input("q", {B, S, H, d}, dtype::bf16),
                    gk = g.input("k", {B, S, Hkv, d}, dtype::bf16),
                    gv = g.input("v", {B, S, Hkv, d}, dtype::bf16),
                    gm = g.input("mask", {B, 1, 1, S});
    g.output(g.attention("att", gq, gk, gv, gm, {.scale = 0.25f}));
    plan p = compile(g, {.threads = 2, .fork_join_ns = 0});
    CHECK(p.output(0).type == dtype::bf16);
    CHECK(p.steps()[0].kernel.find("attention bf16 in / f32") != std::string::npos);
    std::vector<bf16_t> got(q.size(), from_float<bf16_t>(std::nanf("")));
    p.run({bind(qb), bind(kb), bind(vb), bind(mask)}, {bind(got)});
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("bf16 element " << i);
      REQUIRE(std::fabs(to_float(got[i]) - want_r[i]) <= 2e-5 + std::fabs(want_r[i]) * 0x1p-8);
    }
    graph mixed;  // one f32 operand among bf16 ones
    const tensor_id mq = mixed.input("q", {B, S, H, d}, dtype::bf16),
                    mk = mixed.input("k", {B, S, Hkv, d});
    mixed.output(mixed.attention("att", mq, mk, mk));
    CHECK_THROWS_WITH(compile(mixed), Catch::Matchers::Contains("node 'att' (attention)") &&
                                          Catch::Matchers::Contains("all f32 or all bf16"));
  }
  graph g;
  const tensor_id gq = g.input("q", {B, S, 3, d}), gk = g.input("k", {B, S, Hkv, d});
  g.output(g.attention("att", gq, gk, gk));
  CHECK_THROWS_WITH(compile(g), Catch::Matchers::Contains("node 'att' (attention)") &&
                                    Catch::Matchers::Contains("do not group over"));
  graph g2;
  const tensor_id q2 = g2.input("q", {B, S, H, d}), k2 = g2.input("k", {B, S, H, d});
  g2.output(g2.attention("att", q2, k2, k2, g2.input("m", {B, 2, 1, S})));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("does not broadcast"));
}

// The Q / K / V projections of one input (linears before [B, S, H, d] reshapes) merged into one
// linear that the attention reads in place: the same values as the plan without fusion (f32 and
// bf16: the same products in the same order; int8: the same quantized weights per row), one
// linear step instead of three, and no merge where a projection is read elsewhere.
TEST_CASE("graph: merged Q, K, V projections equal the separate linears", "[graph][threads]") {
  const index_t B = 2, S = 9, E = 24, H = 3, d = 8;
  std::vector<float> x(std::size_t(B * S * E)), wq(std::size_t(E * E)), wk(wq.size()),
      wv(wq.size()), bq(static_cast<std::size_t>(E)), bk(bq.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.31f);
  for (std::size_t i = 0; i < wq.size(); ++i) {
    wq[i] = 0.2f * std::cos(float(i) * 0.17f);
    wk[i] = 0.2f * std::sin(float(i) * 0.11f + 0.5f);
    wv[i] = 0.2f * std::cos(float(i) * 0.23f + 1.f);
  }
  for (std::size_t i = 0; i < bq.size(); ++i) bq[i] = bk[i] = 0.05f * float(i % 5) - 0.1f;
  const auto build = [&](bool v_also_output) {
    graph g;
    const tensor_id gx = g.input("x", {B, S, E});
    const auto head = [&](const char* name, const std::vector<float>& w,
                          const std::vector<float>* b) {
      const tensor_id lin = g.linear(
          std::string(name) + "_proj", gx, g.constant(std::string(name) + "_w", {E, E}, w.data()),
          b ? g.constant(std::string(name) + "_b", {E}, b->data()) : tensor_id{});
      return std::pair{lin, g.reshape(name, lin, {B, S, H, d})};
    };
    const auto [lq, q] = head("q", wq, &bq);
    const auto [lk, k] = head("k", wk, &bk);
    const auto [lv, v] = head("v", wv, nullptr);  // no bias: zeros in the merged one
    g.output(g.attention("att", q, k, v));
    if (v_also_output) g.output(lv);
    g.set_quant(gx, {2.f / 255, 128});
    return g;
  };
  const graph g = build(false);
  for (precision prec : {precision::f32, precision::bf16, precision::int8}) {
    INFO("precision " << int(prec));
    const plan unfused =
        compile(g, {.threads = 1, .prec = prec, .fuse = false, .emulated_bf16 = true});
    std::vector<float> want(x.size());
    unfused.run({bind(x)}, {bind(want)});
    for (int threads : {1, 2}) {
      const plan p =
          compile(g, {.threads = threads, .prec = prec, .fork_join_ns = 0, .emulated_bf16 = true});
      CHECK(
          p.report().text().find("merged q_proj, k_proj, v_proj (linear) into one linear of 72") !=
          std::string::npos);
      CHECK(p.steps().size() == 2);  // the merged linear and the attention
      std::vector<float> got(x.size(), std::nanf(""));
      p.run({bind(x)}, {bind(got)});
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("threads " << threads << " element " << i);
        REQUIRE(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-5 * std::fabs(want[i]));
      }
    }
  }
  // A projection also returned stays its own linear.
  const plan kept = compile(build(true), {.threads = 1});
  CHECK(kept.report().text().find("merged") == std::string::npos);
  CHECK(kept.steps().size() == 7);  // three linears, their three reshapes (views), the attention
}

// cached_attention: a prefill of 5 tokens, then single-token steps through one replay buffer
// (only the position and the new token's rows change between replays), equal the causal
// attention over the whole sequence; the caches hold every row written and nothing past them is
// read (poisoned with NaN); a position past the cache fails before any write; a const or
// overlapping cache binding, a cache that is not an input or is read elsewhere, and a float
// position are errors naming the problem.
TEST_CASE("graph: cached attention steps equal causal attention over the sequence",
          "[graph][threads]") {
  const index_t B = 2, T = 9, P = 5, H = 4, Hkv = 2, d = 16, Smax = 12;
  const index_t qrow = H * d, krow = Hkv * d;
  std::vector<float> q(std::size_t(B * T * qrow)), k(std::size_t(B * T * krow)), v(k.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(float(i) * 0.13f);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(float(i) * 0.07f);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i) * 0.29f + 1.f);
  graph ref;
  const tensor_id rq = ref.input("q", {B, T, H, d}), rk = ref.input("k", {B, T, Hkv, d}),
                  rv = ref.input("v", {B, T, Hkv, d});
  ref.output(ref.attention("att", rq, rk, rv, {}, {.scale = 0.25f, .causal = true}));
  std::vector<float> want(q.size());
  compile(ref, {.threads = 1}).run({bind(q), bind(k), bind(v)}, {bind(want)});
  // Rows [t0, t0 + n) of every batch of x ([B, T, row]) as a dense [B, n, row].
  const auto rows = [&](const std::vector<float>& x, index_t row, index_t t0, index_t n) {
    std::vector<float> r(std::size_t(B * n * row));
    for (index_t b = 0; b < B; ++b)
      std::copy_n(x.begin() + (b * T + t0) * row, n * row, r.begin() + b * n * row);
    return r;
  };
  const auto decoder = [&](index_t sq, dtype pos_type) {
    graph g;
    const tensor_id gq = g.input("q", {B, sq, H, d}), kn = g.input("k_new", {B, sq, Hkv, d}),
                    vn = g.input("v_new", {B, sq, Hkv, d}),
                    kc = g.input("k_cache", {B, Smax, Hkv, d}),
                    vc = g.input("v_cache", {B, Smax, Hkv, d}), pos = g.input("pos", {1}, pos_type);
    g.output(
        g.cached_attention(sq > 1 ? "prefill" : "step", gq, kn, vn, kc, vc, pos, {.scale = 0.25f}));
    return g;
  };
  const auto near = [&](const std::vector<float>& got, index_t t0, index_t n, const char* what) {
    const std::vector<float> w = rows(want, qrow, t0, n);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(what << " element " << i);
      REQUIRE(std::fabs(got[i] - w[i]) <= 2e-5);
    }
  };
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    std::vector<float> kc(std::size_t(B * Smax * krow), std::nanf("")), vc(kc);
    const plan prefill = compile(decoder(P, dtype::i32), {.threads = threads, .fork_join_ns = 0});
    CHECK(prefill.steps()[0].kernel.find("KV cache of 12 rows") != std::string::npos);
    const std::int32_t pos0[1] = {0};
    std::vector<float> out(std::size_t(B * P * qrow));
    const std::vector<float> qp = rows(q, qrow, 0, P), kp = rows(k, krow, 0, P),
                             vp = rows(v, krow, 0, P);
    prefill.run({bind(qp), bind(kp), bind(vp), bind(kc), bind(vc), bind(pos0, 1)}, {bind(out)});
    near(out, 0, P, "prefill");
    const plan step = compile(decoder(1, dtype::i64), {.threads = threads, .fork_join_ns = 0});
    std::vector<float> q1(std::size_t(B * qrow)), k1(std::size_t(B * krow)), v1(k1.size()),
        out1(q1.size());
    std::int64_t pos[1] = {0};
    replay_buffer r =
        step.record({bind(q1), bind(k1), bind(v1), bind(kc), bind(vc), bind(pos, 1)}, {bind(out1)});
    for (index_t t = P; t < T; ++t) {
      // (Copied into the bound buffers: assigning a new vector would move its storage in.)
      const std::vector<float> qt = rows(q, qrow, t, 1), kt = rows(k, krow, t, 1),
                               vt = rows(v, krow, t, 1);
      std::copy(qt.begin(), qt.end(), q1.begin());
      std::copy(kt.begin(), kt.end(), k1.begin());
      std::copy(vt.begin(), vt.end(), v1.begin());
      pos[0] = t;
      r.replay();
      near(out1, t, 1, "step");
    }
    // The caches hold every row written; a position past them changes nothing.
    CHECK(rows(k, krow, 0, T) == [&] {
      std::vector<float> c(std::size_t(B * T * krow));
      for (index_t b = 0; b < B; ++b)
        std::copy_n(kc.begin() + b * Smax * krow, T * krow, c.begin() + b * T * krow);
      return c;
    }());
    const std::vector<float> kc_before = kc;
    pos[0] = Smax;
    CHECK_THROWS_WITH(r.replay(), Catch::Matchers::Contains("node 'step' (cached_attention)") &&
                                      Catch::Matchers::Contains("position 12 with 1 new rows"));
    CHECK(std::memcmp(kc.data(), kc_before.data(), kc.size() * sizeof(float)) == 0);
    // Bindings: a const cache, two caches in one buffer.
    const std::vector<float>& const_cache = kc;
    CHECK_THROWS_WITH(
        step.record({bind(q1), bind(k1), bind(v1), bind(const_cache), bind(vc), bind(pos, 1)},
                    {bind(out1)}),
        Catch::Matchers::Contains("written by the plan (a KV cache)"));
    CHECK_THROWS_WITH(
        step.record({bind(q1), bind(k1), bind(v1), bind(kc), bind(kc), bind(pos, 1)}, {bind(out1)}),
        Catch::Matchers::Contains("is written by the plan and overlaps input"));
  }
  // Graph errors: a cache that is a constant, a cache another node reads, a float position.
  const std::vector<float> zeros(std::size_t(B * Smax * krow));
  graph g1;
  {
    const tensor_id a = g1.input("q", {B, 1, H, d}), b = g1.input("k_new", {B, 1, Hkv, d}),
                    c = g1.input("v_new", {B, 1, Hkv, d}),
                    kc = g1.constant("k_cache", {B, Smax, Hkv, d}, zeros.data()),
                    vc = g1.input("v_cache", {B, Smax, Hkv, d}),
                    p = g1.input("pos", {1}, dtype::i32);
    g1.output(g1.cached_attention("att", a, b, c, kc, vc, p));
  }
  CHECK_THROWS_WITH(compile(g1), Catch::Matchers::Contains("node 'att' (cached_attention)") &&
                                     Catch::Matchers::Contains("must be a graph input"));
  graph g2;
  const tensor_id kc2 = g2.input("k_cache", {B, Smax, Hkv, d});
  {
    const tensor_id a = g2.input("q", {B, 1, H, d}), b = g2.input("k_new", {B, 1, Hkv, d}),
                    c = g2.input("v_new", {B, 1, Hkv, d}),
                    vc = g2.input("v_cache", {B, Smax, Hkv, d}),
                    p = g2.input("pos", {1}, dtype::f32);
    g2.output(g2.cached_attention("att", a, b, c, kc2, vc, p));
  }
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("must be one i32 or i64 value"));
  g2.output(g2.relu("r", kc2));
  CHECK_THROWS_WITH(compile(g2), Catch::Matchers::Contains("is also read by node 'r'"));
}

// A reshape may label its 4-D result nchw (the same memory order as plain): a [N, C, L]
// sequence becomes an [N, C, 1, L] image for conv2d without a copy.
TEST_CASE("graph: reshape into an nchw view feeds conv2d", "[graph]") {
  graph g;
  const tensor_id x = g.input("x", {1, 2, 5});
  const std::vector<float> w = {1, 0, -1, 2, 0.5f, 0.25f};  // [1, 2, 1, 3]
  const tensor_id img = g.reshape("img", x, {1, 2, 1, 5}, tensor_layout::nchw);
  g.output(g.conv2d("c", img, g.constant("w", {1, 2, 1, 3}, w.data())));
  plan p = compile(g, {.threads = 1});
  std::vector<float> in = {1, 2, 3, 4, 5, -1, -2, -3, -4, -5}, out(3, std::nanf(""));
  replay_buffer r = p.record({bind(in)}, {bind(out)});
  r.replay();
  for (index_t j = 0; j < 3; ++j) {
    double ref = 0;
    for (index_t c = 0; c < 2; ++c)
      for (index_t t = 0; t < 3; ++t)
        ref += w[std::size_t(c * 3 + t)] * in[std::size_t(c * 5 + j + t)];
    CHECK(out[std::size_t(j)] == Approx(ref));
  }
  graph bad;
  const tensor_id y = bad.input("y", {2, 6});
  bad.output(bad.reshape("r", y, {3, 4}, tensor_layout::nchw));
  CHECK_THROWS_WITH(compile(bad), Catch::Matchers::Contains("node 'r' (reshape)"));
}

// strided_view: transposes, reversed slices and repeats read what they should; a view that
// would read outside its input is refused at compile time, naming the node.
TEST_CASE("graph: strided_view reads through strides and offsets, inside its input", "[graph]") {
  graph g;
  const tensor_id x = g.input("x", {2, 3});
  g.output(g.strided_view("t", x, {3, 2}, 0, {1, 3}));          // transpose
  g.output(g.strided_view("r", x, {2, 3}, 5, {-3, -1}));        // both axes reversed
  g.output(g.strided_view("rep", x, {2, 2, 3}, 0, {0, 3, 1}));  // tiled twice
  plan p = compile(g, {.threads = 1});
  std::vector<float> in = {0, 1, 2, 3, 4, 5}, t(6, -1), r(6, -1), rep(12, -1);
  replay_buffer rb = p.record({bind(in)}, {bind(t), bind(r), bind(rep)});
  rb.replay();
  CHECK(t == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(r == std::vector<float>{5, 4, 3, 2, 1, 0});
  CHECK(rep == std::vector<float>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  graph bad;
  const tensor_id y = bad.input("y", {2, 3});
  bad.output(bad.strided_view("v", y, {3}, 4, {1}));  // reads elements 4..6 of 6
  CHECK_THROWS_WITH(compile(bad), Catch::Matchers::Contains("node 'v' (strided_view)") &&
                                      Catch::Matchers::Contains("reads elements 4 to 6"));
  graph neg;
  const tensor_id z = neg.input("z", {2, 3});
  neg.output(neg.strided_view("w", z, {2}, 0, {-1}));  // reads element -1
  CHECK_THROWS_WITH(compile(neg), Catch::Matchers::Contains("reads elements -1 to 0"));
}

TEST_CASE("graph: a squeeze-excite gate fused into the pointwise conv's weights",
          "[graph][threads]") {
  // x -> global average pool -> 1x1 conv -> hardsigmoid = gate; x * gate -> 1x1 conv with bias
  // and a residual add. At batch 1 the multiply is per channel; at batch 3 the gate is
  // broadcast to the map first (as the importer writes it). Fused (channel gate) against the
  // same plan without fusion, 1 and 2 threads; the conv in f32, in bf16 (its scaled weights
  // rounded once: within bf16 roundings of the unfused plan) and in int8 (x * gate quantized as
  // the conv loads it: the unfused plan's bytes, so the same integer sums).
  // K 41 > H x W: the conv gates its input rows as it loads them instead of scaling weights.
  const index_t C = 19, H = 5, W = 6;
  const auto w1 = gt::kaiming(C, C, 1);
  for (const auto& [N, prec, K] : {std::tuple{index_t(1), precision::f32, index_t(13)},
                                   std::tuple{index_t(3), precision::f32, index_t(13)},
                                   std::tuple{index_t(3), precision::f32, index_t(41)},
                                   std::tuple{index_t(1), precision::bf16, index_t(13)},
                                   std::tuple{index_t(3), precision::bf16, index_t(13)},
                                   std::tuple{index_t(3), precision::bf16, index_t(41)},
                                   std::tuple{index_t(1), precision::int8, index_t(13)},
                                   std::tuple{index_t(3), precision::int8, index_t(13)}}) {
    const auto w2 = gt::kaiming(K, C, 2);
    const auto b2 = gt::random_vec(std::size_t(K), 3);
    conv2d_params cp;
    cp.prec = prec;
    graph g;
    auto x = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nhwc);
    auto skip = g.input("skip", {N, K, H, W}, dtype::f32, tensor_layout::nhwc);
    pool2d_params gp;
    gp.kind = kfuse::pool_kind::avg;
    gp.global = true;
    auto gate = g.hardsigmoid(
        "gate", g.conv2d("fc", g.pool2d("gap", x, gp), g.constant("w1", {C, C, 1, 1}, w1.data())));
    tensor_id gated;
    if (N == 1) {
      eltwise_stage m{stage_kind::mul, 0, 0, gate};
      m.per_channel = true;
      gated = g.eltwise("scale", x, {m});
    } else {
      gated = g.mul("scale", x, g.broadcast("expand", gate, {N, C, H, W}, tensor_layout::nhwc));
    }
    g.set_quant(gated, {3.f / 255, 120});  // read by the int8 conv only
    auto y = g.add("res",
                   g.conv2d("proj", gated, g.constant("w2", {K, C, 1, 1}, w2.data()),
                            g.constant("b2", {K}, b2.data()), cp),
                   skip);
    g.output(y);
    const auto xv = gt::random_vec(std::size_t(N * C * H * W), 4, -2, 2);
    const auto sv = gt::random_vec(std::size_t(N * K * H * W), 5);
    const plan q = compile(g, {.threads = 1, .fuse = false});
    std::vector<float> want(sv.size(), std::nanf(""));
    q.record({bind(xv), bind(sv)}, {bind(want)}).replay();
    for (const int threads : {1, 2}) {
      const plan p = compile(g, {.threads = threads});
      INFO("N " << N << " K " << K
                << (prec == precision::bf16   ? ", bf16, "
                    : prec == precision::int8 ? ", int8, "
                                              : ", f32, ")
                << threads << " threads\n"
                << p.report().text());
      CHECK(p.report().text().find("fused scale (channel gate) into proj (conv2d)") !=
            std::string::npos);
      bool gated_step = false;
      for (const auto& st : p.steps()) gated_step |= st.kernel.find("gated") != std::string::npos;
      CHECK(gated_step);
      std::vector<float> got(sv.size(), std::nanf(""));
      p.record({bind(xv), bind(sv)}, {bind(got)}).replay();
      const float tol = prec == precision::bf16 ? 2e-2f : 1e-5f;
      for (std::size_t i = 0; i < got.size(); ++i)
        REQUIRE(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])));
    }
  }
}

TEST_CASE("graph: an nchw CNN runs its image ops in nhwc, the caller's layouts and names kept",
          "[graph]") {
  // conv -> relu -> max pool -> conv + residual -> global pool -> SE gate broadcast at batch 2 ->
  // gated map (returned, nchw) and a flatten -> linear head (not an image op: the map goes back
  // to nchw before it). Every value against the plan in the declared layouts.
  const index_t N = 2, C = 3, H = 13, W = 11, K = 8;
  const auto w1 = gt::random_vec(std::size_t(K * C * 9), 61, -0.5f, 0.5f);
  const auto w2 = gt::random_vec(std::size_t(K * K * 9), 62, -0.3f, 0.3f);
  const auto wg = gt::random_vec(std::size_t(K * K), 63, -0.5f, 0.5f);
  const auto wl = gt::random_vec(std::size_t(5 * K * 6 * 5), 64, -0.2f, 0.2f);
  const auto b1 = gt::random_vec(std::size_t(K), 65, -0.1f, 0.1f);
  graph g;
  auto x = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
  conv2d_params cp;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  auto c1 = g.relu("r1", g.conv2d("c1", x, g.constant("w1", {K, C, 3, 3}, w1.data()),
                                  g.constant("b1", {K}, b1.data()), cp));
  pool2d_params mp;
  mp.kind = kfuse::pool_kind::max;
  mp.r = mp.s = mp.stride_h = mp.stride_w = 2;
  auto p1 = g.pool2d("p1", c1, mp);  // [2, 8, 6, 5]
  auto s = g.add("s", g.conv2d("c2", p1, g.constant("w2", {K, K, 3, 3}, w2.data()), {}, cp), p1);
  pool2d_params gp;
  gp.kind = kfuse::pool_kind::avg;
  gp.global = true;
  auto gate = g.sigmoid(
      "gate", g.conv2d("fc", g.pool2d("gap", s, gp), g.constant("wg", {K, K, 1, 1}, wg.data())));
  auto full = g.broadcast("expand", gate, {N, K, 6, 5}, tensor_layout::nchw);
  auto gated = g.mul("gated", s, full);
  auto head =
      g.linear("head", g.flatten("f", gated, 1), g.constant("wl", {5, K * 6 * 5}, wl.data()));
  g.output(head);
  g.output(gated);
  const auto xv = gt::random_vec(std::size_t(N * C * H * W), 66, -1, 1);
  for (int threads : {1, 2}) {
    const plan declared = compile(g, {.threads = threads, .choose_layout = false});
    const plan chosen = compile(g, {.threads = threads});
    const std::string rep = chosen.report().text();
    INFO(rep);
    CHECK(rep.find("layout: 10 image nodes of the nchw graph run in nhwc") != std::string::npos);
    CHECK(declared.report().text().find("layout:") == std::string::npos);
    // The caller's view: the same inputs and outputs, by name and layout.
    REQUIRE(chosen.output_count() == 2);
    CHECK(chosen.output(0).name == "head");
    CHECK(chosen.output(1).name == "gated");
    CHECK(chosen.output(1).layout == tensor_layout::nchw);
    bool nhwc_conv = false, stem = false;
    for (const auto& st : chosen.steps()) {
      nhwc_conv |= st.kernel.find("nhwc") != std::string::npos;
      stem |= st.kernel == "few_channel_conv2d f32 nchw->nhwc [bias, relu]";
    }
    CHECK(nhwc_conv);
    // The entry conversion is read by the 3-channel conv itself (passes/entry_layout.hpp).
    CHECK(stem);
    CHECK(rep.find("(convert_layout) into c1 (conv2d): reads its NCHW input, writes NHWC") !=
          std::string::npos);
    std::vector<float> hd(std::size_t(N * 5), std::nanf("")),
        gd(std::size_t(N * K * 30), std::nanf(""));
    std::vector<float> hc = hd, gc = gd;
    declared.run({bind(xv)}, {bind(hd), bind(gd)});
    chosen.run({bind(xv)}, {bind(hc), bind(gc)});
    // Same arithmetic in another order (the nhwc kernels sum the taps differently).
    for (std::size_t i = 0; i < hd.size(); ++i)
      REQUIRE(std::fabs(hc[i] - hd[i]) <= 1e-4f * (1 + std::fabs(hd[i])));
    for (std::size_t i = 0; i < gd.size(); ++i)
      REQUIRE(std::fabs(gc[i] - gd[i]) <= 1e-4f * (1 + std::fabs(gd[i])));
  }
  // A bf16 plan runs the 8-channel stem in f32 too, and says so.
  const plan low = compile(g, {.threads = 1, .prec = precision::bf16, .emulated_bf16 = true});
  CHECK(low.report().text().find("low precision: a stem conv") != std::string::npos);
  bool f32_stem = false;
  for (const auto& st : low.steps())
    f32_stem |= st.kernel == "few_channel_conv2d f32 nchw->nhwc [bias, relu]";
  CHECK(f32_stem);
  // Without a conv2d the graph stays as declared; a bad graph reports its own nodes' errors.
  graph pool_only;
  pool_only.output(pool_only.pool2d(
      "mp", pool_only.input("x", {1, 2, 4, 4}, dtype::f32, tensor_layout::nchw), mp));
  CHECK(compile(pool_only, {.threads = 1}).report().text().find("layout:") == std::string::npos);
  graph bad;
  auto bx = bad.input("x", {1, 3, 8, 8}, dtype::f32, tensor_layout::nchw);
  bad.output(bad.conv2d("conv", bx, bad.constant("w", {4, 2, 3, 3}, w1.data()), {}, cp));
  CHECK_THROWS_WITH(compile(bad, {.threads = 1}),
                    Catch::Matchers::Contains("node 'conv' (conv2d)"));
}

// A bf16 plan passes bf16 activations between its convs (the producer's epilogue rounds, as the
// consumer's conversion did): the same bits as the unfused plan, which converts f32 tensors;
// within bf16's error of the f32 plan. Depthwise 3x3 stride 1 and 5x5 stride 2 (row tiles),
// channels off the vector width, batch 2.
TEST_CASE("graph: bf16 convs pass bf16 activations, bitwise as converting", "[graph]") {
  for (const int k : {3, 5}) {
    graph g;
    const index_t N = 2, C = 24, H = 13, W = 11, E = 40, O = 16;
    auto x = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nhwc);
    const auto w1 = gt::random_vec(std::size_t(E * C), 3, -0.3f, 0.3f);
    const auto wd = gt::random_vec(std::size_t(E * k * k), 4, -0.3f, 0.3f);
    const auto w2 = gt::random_vec(std::size_t(O * E), 5, -0.3f, 0.3f);
    auto h = g.relu("act", g.conv2d("pw", x, g.constant("w1", {E, C, 1, 1}, w1.data())));
    conv2d_params dp;
    dp.groups = E;
    dp.stride_h = dp.stride_w = k == 5 ? 2 : 1;
    dp.pad_top = dp.pad_left = dp.pad_bottom = dp.pad_right = k / 2;
    auto d = g.conv2d("dw", h, g.constant("wd", {E, 1, k, k}, wd.data()), {}, dp);
    g.output(g.conv2d("proj", d, g.constant("w2", {O, E, 1, 1}, w2.data())));
    const auto xs = gt::random_vec(std::size_t(N * C * H * W), 6, -1, 1);
    const index_t oh = (H - 1) / dp.stride_h + 1, ow = (W - 1) / dp.stride_w + 1;
    const std::size_t n_out = std::size_t(N * O * oh * ow);
    const plan fused = compile(
        g, {.threads = 1, .prec = precision::bf16, .choose_layout = false, .emulated_bf16 = true});
    const auto& f = fused.report().fused;
    CHECK(std::count(f.begin(), f.end(), "bf16 output of pw (read as bf16 by dw)") == 1);
    CHECK(std::count(f.begin(), f.end(), "bf16 output of dw (read as bf16 by proj)") == 1);
    const auto yb = replay_once(fused, xs, n_out);
    const auto yu = replay_once(compile(g, {.threads = 2,
                                            .prec = precision::bf16,
                                            .fuse = false,
                                            .choose_layout = false,
                                            .emulated_bf16 = true}),
                                xs, n_out);
    CHECK(gt::bitwise_equal(yb, yu));
    const auto y32 = replay_once(compile(g, {.threads = 1, .choose_layout = false}), xs, n_out);
    double scale = 0, err = 0;
    for (std::size_t i = 0; i < n_out; ++i) {
      scale = std::max(scale, std::fabs(double(y32[i])));
      err = std::max(err, std::fabs(double(yb[i]) - y32[i]));
    }
    CHECK(err <= 0.03 * scale);  // three bf16 roundings of sums of ~10-50 terms
  }
}

// An nchw MobileNet entry in a bf16 plan: the 3-channel stem runs as few_channel_conv2d (f32
// arithmetic, reading the nchw input) and writes bf16 for the depthwise after it, which then
// converts nothing (the layout choice's entry conversion is absorbed first); within bf16's
// error of the f32 plan.
TEST_CASE("graph: a bf16 plan's few-channel stem writes bf16 for its depthwise reader", "[graph]") {
  const index_t N = 2, C = 3, H = 17, W = 15, K = 16, O = 24;
  const auto w1 = gt::random_vec(std::size_t(K * C * 9), 71, -0.5f, 0.5f);
  const auto wd = gt::random_vec(std::size_t(K * 9), 72, -0.4f, 0.4f);
  const auto w2 = gt::random_vec(std::size_t(O * K), 73, -0.3f, 0.3f);
  graph g;
  auto x = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
  conv2d_params cp;
  cp.stride_h = cp.stride_w = 2;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  auto h = g.hardswish("act", g.conv2d("c1", x, g.constant("w1", {K, C, 3, 3}, w1.data()), {}, cp));
  conv2d_params dp;
  dp.groups = K;
  dp.pad_top = dp.pad_left = dp.pad_bottom = dp.pad_right = 1;
  auto d = g.relu("r", g.conv2d("dw", h, g.constant("wd", {K, 1, 3, 3}, wd.data()), {}, dp));
  g.output(g.conv2d("proj", d, g.constant("w2", {O, K, 1, 1}, w2.data())));
  const auto xs = gt::random_vec(std::size_t(N * C * H * W), 74, -1, 1);
  const std::size_t n_out = std::size_t(N * O * 9 * 8);
  const plan low = compile(g, {.threads = 2, .prec = precision::bf16, .emulated_bf16 = true});
  const std::string rep = low.report().text();
  INFO(rep);
  CHECK(rep.find("bf16 output of c1 (read as bf16 by dw)") != std::string::npos);
  int stems = 0;
  for (const auto& st : low.steps())
    stems += st.kernel == "few_channel_conv2d f32 nchw->nhwc bf16 out [hardswish]";
  CHECK(stems == 1);
  const auto yb = replay_once(low, xs, n_out);
  const auto y32 = replay_once(compile(g, {.threads = 1}), xs, n_out);
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < n_out; ++i) {
    scale = std::max(scale, std::fabs(double(y32[i])));
    err = std::max(err, std::fabs(double(yb[i]) - y32[i]));
  }
  CHECK(err <= 0.03 * scale);  // the stem's and the depthwise's bf16 roundings, sums of 16 terms
}
