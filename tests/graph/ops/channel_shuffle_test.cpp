// channel_shuffle as a graph op: ShuffleNet's unit (concat, shuffle, the two halves) in NCHW and
// NHWC plans against a direct reference, bf16 and u8 tensors moved exactly, the layout choice
// keeping it in the NHWC region, an unread whole shuffle not run, and its errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"

using namespace kfuse;

namespace {

// The input channel of shuffled channel ch (reshape [g, C / g], transpose, reshape back).
index_t source(index_t ch, index_t c, int g) { return (ch % g) * (c / g) + ch / g; }

// x [N, C, H, W] (logical, NCHW order) -> channels [first, first + count) of its shuffle.
std::vector<float> reference(const std::vector<float>& x, index_t n, index_t c, index_t hw, int g,
                             index_t first, index_t count) {
  std::vector<float> y(std::size_t(n * count * hw));
  for (index_t b = 0; b < n; ++b)
    for (index_t j = 0; j < count; ++j)
      for (index_t p = 0; p < hw; ++p)
        y[std::size_t((b * count + j) * hw + p)] =
            x[std::size_t((b * c + source(first + j, c, g)) * hw + p)];
  return y;
}

}  // namespace

TEST_CASE("graph: channel_shuffle runs and slices of NCHW and NHWC images", "[graph][threads]") {
  const index_t N = 2, C = 12, H = 3, W = 5, HW = H * W;
  std::vector<float> x(std::size_t(N * C * HW));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - 7.f;
  for (tensor_layout l : {tensor_layout::nchw, tensor_layout::nhwc})
    for (int g : {1, 2, 3, 4})
      for (auto [first, count] : {std::pair<index_t, index_t>{0, -1}, {0, 6}, {6, 6}, {1, 7}})
        for (int threads : {1, 2}) {
          INFO("layout " << layout_name(l) << " groups " << g << " channels " << first << "+"
                         << count << " threads " << threads);
          graph gr;
          tensor_id in = gr.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
          if (l == tensor_layout::nhwc) in = gr.convert_layout("x/nhwc", in, l);
          tensor_id y = gr.channel_shuffle("shuffle", in, g, first, count);
          if (l == tensor_layout::nhwc) y = gr.convert_layout("y", y, tensor_layout::nchw);
          gr.output(y);
          plan p = compile(gr, {.threads = threads, .fork_join_ns = 0});
          const index_t cnt = count < 0 ? C - first : count;
          REQUIRE(p.output(0).shape == std::vector<index_t>{N, cnt, H, W});
          std::vector<float> out(std::size_t(N * cnt * HW), std::nanf(""));
          replay_buffer r = p.record({bind(x)}, {bind(out)});
          r.replay();
          REQUIRE(out == reference(x, N, C, HW, g, first, cnt));
        }
}

TEST_CASE("graph: a ShuffleNet unit in an NCHW graph runs in NHWC, its shuffle included",
          "[graph]") {
  // x -> 1x1 conv a, 1x1 conv b -> concat -> shuffle halves -> each half through a 1x1 conv.
  const index_t N = 1, C = 8, H = 4, W = 4;
  std::vector<float> x(std::size_t(N * C * H * W)), w(std::size_t(C * C));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.3f);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(float(i) * 0.7f) * 0.25f;
  graph gr;
  const tensor_id in = gr.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
  const tensor_id wt = gr.constant("w", {C, C, 1, 1}, w.data());
  const tensor_id a = gr.conv2d("a", in, wt), b = gr.conv2d("b", in, wt);
  const tensor_id cat = gr.concat("cat", {a, b}, 1);
  const tensor_id left = gr.channel_shuffle("left", cat, 2, 0, C);
  const tensor_id right = gr.channel_shuffle("right", cat, 2, C, C);
  gr.output(gr.concat("out", {gr.conv2d("l", left, wt), gr.conv2d("r", right, wt)}, 1));
  plan nhwc = compile(gr, {.threads = 1});
  plan nchw = compile(gr, {.threads = 1, .choose_layout = false});
  const auto kernels = [](const plan& p) {
    std::string all;
    for (const step_info& s : p.steps()) all += s.kernel + "\n";
    return all;
  };
  CHECK(kernels(nhwc).find("channel_shuffle nhwc groups 2 channels 8+8") != std::string::npos);
  CHECK(kernels(nchw).find("channel_shuffle nchw groups 2 channels 0+8") != std::string::npos);
  std::vector<float> y1(std::size_t(N * 2 * C * H * W)), y2(y1.size());
  replay_buffer r1 = nhwc.record({bind(x)}, {bind(y1)}), r2 = nchw.record({bind(x)}, {bind(y2)});
  r1.replay();
  r2.replay();
  for (std::size_t i = 0; i < y1.size(); ++i) REQUIRE(std::fabs(y1[i] - y2[i]) <= 1e-5f);
}

TEST_CASE("graph: channel_shuffle moves bf16 and u8 tensors exactly, an unread one does not run",
          "[graph]") {
  const index_t N = 1, C = 6, HW = 4;
  std::vector<float> x(std::size_t(N * C * HW));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) - 10.f;
  for (dtype t : {dtype::bf16, dtype::u8}) {
    INFO(dtype_name(t));
    graph gr;
    const tensor_id in = gr.input("x", {N, C, 2, 2});
    const tensor_id low = t == dtype::bf16 ? gr.cast("low", in, dtype::bf16)
                                           : gr.quantize("low", in, dtype::u8, {1.f, 128});
    gr.channel_shuffle("unread", low, 3);  // its output is neither read nor returned
    const tensor_id s = gr.channel_shuffle("shuffle", low, 2, 0, 4);
    gr.output(t == dtype::bf16 ? gr.cast("y", s, dtype::f32) : gr.dequantize("y", s));
    plan p = compile(gr, {.threads = 1});
    CHECK(p.report().text().find("1 node(s) whose outputs nothing reads do not run") !=
          std::string::npos);
    for (const step_info& st : p.steps()) CHECK(st.name != "unread");
    std::vector<float> out(std::size_t(N * 4 * HW));
    replay_buffer r = p.record({bind(x)}, {bind(out)});
    r.replay();
    CHECK(out == reference(x, N, C, HW, 2, 0, 4));  // integers: exact in bf16 and u8
  }
}

TEST_CASE("graph: channel_shuffle errors name the node", "[graph][errors]") {
  const auto fails = [](std::vector<index_t> shape, int g, index_t first, index_t count,
                        const std::string& what) {
    graph gr;
    gr.output(gr.channel_shuffle("cs", gr.input("x", std::move(shape)), g, first, count));
    REQUIRE_THROWS_WITH(compile(gr), Catch::Matchers::Contains("node 'cs' (channel_shuffle)") &&
                                         Catch::Matchers::Contains(what));
  };
  fails({1, 6, 2, 2}, 4, 0, -1, "groups 4 do not divide 6 channels");
  fails({1, 6, 2, 2}, 2, 4, 3, "channels 4 to 7 are not within the 6 channels");
  fails({1, 6, 2, 2}, 2, 0, 0, "channels 0 to 0");
  fails({1, 6, 2, 2}, 2, 0, -2, "count -2");
  fails({6, 4}, 2, 0, -1, "a channel shuffle reads a 4-D image");
}
