// strided_view as a graph op on images: every permutation of an nhwc image's axes and slices of
// it against a direct reference on its logical order (read in place, no conversion to nchw), the
// permutations that are its memory order run as views (no copy), an nhwc output, and the view
// that walks across an nhwc image's axes (an error naming the node).
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "graph/graph_common.hpp"

using namespace kfuse;

namespace {

// The view of x (logical row-major over its shape) as a graph's strided_view defines it.
std::vector<float> reference(const std::vector<float>& x, const std::vector<index_t>& shape,
                             index_t offset, const std::vector<index_t>& strides) {
  const index_t total = std::accumulate(shape.begin(), shape.end(), index_t(1),
                                        [](index_t a, index_t b) { return a * b; });
  std::vector<float> y(static_cast<std::size_t>(total));
  for (index_t i = 0; i < total; ++i) {
    index_t rem = i, src = offset;
    for (std::size_t d = shape.size(); d-- > 0;) {
      src += (rem % shape[d]) * strides[d];
      rem /= shape[d];
    }
    y[std::size_t(i)] = x[std::size_t(src)];
  }
  return y;
}

std::string kernel_of(const plan& p, const std::string& name) {
  const step_info* s = gt::step_named(p, name);
  return s ? s->kernel : "";
}

}  // namespace

TEST_CASE("graph: strided_view reads an nhwc image in place: every permutation and slices",
          "[graph]") {
  const index_t N = 2, C = 5, H = 3, W = 4;
  const std::array<index_t, 4> ext{N, C, H, W}, ls{C * H * W, H * W, W, 1};
  std::vector<float> x(std::size_t(N * C * H * W));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.25f - 9.f;
  std::array<int, 4> perm{0, 1, 2, 3};
  do {
    std::vector<index_t> shape, strides;
    for (int a : perm) {
      shape.push_back(ext[std::size_t(a)]);
      strides.push_back(ls[std::size_t(a)]);
    }
    for (int threads : {1, 2}) {
      INFO("perm " << perm[0] << perm[1] << perm[2] << perm[3] << " threads " << threads);
      graph g;
      const tensor_id in = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
      const tensor_id img = g.convert_layout("x/nhwc", in, tensor_layout::nhwc);
      g.output(g.strided_view("t", img, shape, 0, strides));
      plan p = compile(g, {.threads = threads, .fork_join_ns = 0});
      // [N, H, W, C] is the image's memory order: the same bytes.
      const bool in_order = perm == std::array<int, 4>{0, 2, 3, 1};
      CHECK(kernel_of(p, "t") == (in_order ? "view" : "strided_view"));
      std::vector<float> out(x.size(), std::nanf(""));
      replay_buffer r = p.record({bind(x)}, {bind(out)});
      r.replay();
      REQUIRE(out == reference(x, shape, 0, strides));
    }
  } while (std::next_permutation(perm.begin(), perm.end()));

  // Slices with steps, a flip and a repeat, each walking one axis of the image.
  struct slice_case {
    std::vector<index_t> shape;
    index_t offset;
    std::vector<index_t> strides;
  };
  for (const slice_case& v : std::vector<slice_case>{
           {{N, 2, H, W}, 1 * H * W, {C * H * W, 2 * H * W, W, 1}},     // channels 1 and 3
           {{N, C, 2, 2}, 1 * W + 1, {C * H * W, H * W, W, 2}},         // a window, every 2nd w
           {{1, H, W, C}, C * H * W + (H - 1) * W, {0, -W, 1, H * W}},  // image 1, h flipped
           {{N, 3, C}, 2 * W + 3, {C * H * W, 0, H * W}},               // one pixel, repeated
       }) {
    INFO("view " << v.shape.size() << "-D offset " << v.offset);
    graph g;
    const tensor_id in = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
    const tensor_id img = g.convert_layout("x/nhwc", in, tensor_layout::nhwc);
    g.output(g.strided_view("s", img, v.shape, v.offset, v.strides));
    plan p = compile(g, {.threads = 1});
    const std::vector<float> want = reference(x, v.shape, v.offset, v.strides);
    std::vector<float> out(want.size(), std::nanf(""));
    replay_buffer r = p.record({bind(x)}, {bind(out)});
    r.replay();
    REQUIRE(out == want);
  }
}

TEST_CASE("graph: ConvNeXt's permutes around an nhwc image are views", "[graph]") {
  // image (nhwc) -> [N, H, W, C] -> a per-channel scale over the last axis -> back to an nhwc
  // image -> the residual add: neither permute copies.
  const index_t N = 1, C = 6, H = 4, W = 3;
  std::vector<float> x(static_cast<std::size_t>(N * C * H * W)), gamma(static_cast<std::size_t>(C));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f);
  for (std::size_t i = 0; i < gamma.size(); ++i) gamma[i] = 0.5f + float(i);
  graph g;
  const tensor_id in = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nchw);
  const tensor_id img = g.convert_layout("x/nhwc", in, tensor_layout::nhwc);
  const tensor_id rows = g.strided_view("to_rows", img, {N, H, W, C}, 0, {C * H * W, W, 1, H * W});
  std::vector<float> scale(static_cast<std::size_t>(N * H * W * C));  // gamma on the last axis
  for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = gamma[i % std::size_t(C)];
  const tensor_id scaled =
      g.mul("scale", rows, g.constant("gamma", {N, H, W, C}, scale.data(), tensor_layout::plain));
  const tensor_id back = g.strided_view("to_image", scaled, {N, C, H, W}, 0,
                                        {H * W * C, 1, W * C, C}, tensor_layout::nhwc);
  const tensor_id sum = g.add("residual", back, img);
  g.output(g.convert_layout("y", sum, tensor_layout::nchw));
  plan p = compile(g, {.threads = 1});
  CHECK(kernel_of(p, "to_rows") == "view");
  CHECK(kernel_of(p, "to_image") == "view");
  std::vector<float> out(x.size(), std::nanf(""));
  replay_buffer r = p.record({bind(x)}, {bind(out)});
  r.replay();
  for (index_t c = 0; c < C; ++c)
    for (index_t i = 0; i < H * W; ++i) {
      const float v = x[std::size_t(c * H * W + i)];
      REQUIRE(out[std::size_t(c * H * W + i)] == v * gamma[std::size_t(c)] + v);
    }
}

TEST_CASE("graph: a strided_view that walks across an nhwc image's axes is an error", "[graph]") {
  graph g;
  const tensor_id in = g.input("x", {1, 4, 3, 3}, dtype::f32, tensor_layout::nchw);
  const tensor_id img = g.convert_layout("x/nhwc", in, tensor_layout::nhwc);
  g.output(g.strided_view("flat", img, {36}, 0, {1}));  // the logical order as one run
  CHECK_THROWS_WITH(
      compile(g, {.threads = 1}),
      Catch::Contains("flat") && Catch::Contains("is nhwc and the view walks across its axes"));
  graph h;
  const tensor_id hin = h.input("x", {4, 6}, dtype::f32, tensor_layout::plain);
  h.output(h.strided_view("v3", hin, {2, 3, 4}, 0, {12, 4, 1}, tensor_layout::nhwc));
  CHECK_THROWS_WITH(compile(h, {.threads = 1}),
                    Catch::Contains("v3") && Catch::Contains("nchw / nhwc when 4-D"));
}
