// Entry layout absorption (graph/passes/entry_layout.hpp): a convert_layout nchw -> nhwc read
// only by a conv of at most 4 input channels is absorbed (f32; bf16 / int8 stems of at most 32
// output channels too, with a note); not with more channels, a second reader, a 64-channel
// low-precision stem, or fusion off.
#include <catch2/catch.hpp>

#include "graph/passes/passes_common.hpp"

using namespace passes_test;

namespace {

/// x (nchw) -> convert_layout nhwc -> conv c (C -> K, 3x3 stride 2) -> relu, optionally a second
/// reader of the converted tensor.
graph entry(index_t C, index_t K, bool second_reader = false) {
  graph g;
  static const std::vector<float> w = filled(64 * 8 * 9);
  auto x = g.input("x", {1, C, 16, 16}, dtype::f32, tensor_layout::nchw);
  auto t = g.convert_layout("x/nhwc", x, tensor_layout::nhwc);
  conv2d_params cp;
  cp.stride_h = cp.stride_w = 2;
  cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = 1;
  g.output(g.relu("r", g.conv2d("c", t, g.constant("w", {K, C, 3, 3}, w.data()), {}, cp)));
  if (second_reader) g.output(g.relu("r2", t));
  return g;
}

bool absorbed(const analyzed& a) {
  return a.tensor(a.step_of("c").x).name == "x" &&
         a.tensor(a.step_of("c").out).layout == tensor_layout::nhwc;
}

}  // namespace

TEST_CASE("entry layout: a stem reads the NCHW input itself", "[graph][passes]") {
  const graph g = entry(3, 16);  // (analyzed keeps a reference to its graph)
  const analyzed a(g);
  CHECK(absorbed(a));
  CHECK(a.live().size() == 1);  // the conv (relu fused), no conversion
  const std::string rep = a.cx.d->report.text();
  CHECK(rep.find("fused x/nhwc (convert_layout) into c (conv2d): reads its NCHW input, writes "
                 "NHWC") != std::string::npos);
  CHECK(rep.find("low precision") == std::string::npos);
}

TEST_CASE("entry layout: bf16 / int8 stems of at most 32 channels run in f32, with a note",
          "[graph][passes]") {
  const graph g32 = entry(3, 32), g64 = entry(3, 64);
  for (precision pr : {precision::bf16, precision::int8}) {
    const analyzed a(g32, {.prec = pr, .emulated_bf16 = true});
    CHECK(absorbed(a));
    CHECK(a.cx.d->report.text().find("low precision: a stem conv") != std::string::npos);
    const analyzed b(g64,
                     {.prec = pr, .emulated_bf16 = true});  // ResNet's stem: stays low precision
    CHECK_FALSE(absorbed(b));
  }
}

TEST_CASE("entry layout: what stays a conversion", "[graph][passes]") {
  const graph five = entry(5, 16), twice = entry(3, 16, true), stem = entry(3, 16);
  CHECK_FALSE(absorbed(analyzed(five)));   // more than 4 input channels
  CHECK_FALSE(absorbed(analyzed(twice)));  // the converted tensor read twice
  CHECK_FALSE(absorbed(analyzed(stem, {.fuse = false})));
}
