// Grouped (not depthwise) conv2d nodes in NHWC and NCHW plans against a double-precision
// reference: groups of few channels (ResNeXt's 4, RegNet's 8, a channel multiplier of 2, groups
// of 6) run as merged groups with block-diagonal weights in NHWC, f32 groups of one vector as
// diagonal tiles (4 or 2 groups per tile, the zero blocks skipped; a count that neither divides
// padded with phantom blocks), merged groups of 4 and 8 as narrow tiles; wider groups stay as
// they are. f32 within 1e-4 of the output range
// (the same products summed in another order, K <= 9 * 24 terms); bf16 and int8 plans within 3e-2
// of it (bf16's 2^-9 rounding of inputs and weights, int8's quantization steps), as the ONNX tests'
// tolerances.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "graph/graph_common.hpp"

using namespace kfuse;

namespace {

struct grouped_case {
  index_t c, k, groups, kernel, stride;
  const char* f32_merge;   // how an AVX-512 NHWC plan runs the groups ("" : as declared)
  const char* lowp_merge;  // the same for bf16 and int8 plans (no diagonal tiles)
};

std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b, const grouped_case& t, index_t n,
                              index_t h, index_t wd) {
  const index_t pad = t.kernel / 2, oh = (h + 2 * pad - t.kernel) / t.stride + 1,
                ow = (wd + 2 * pad - t.kernel) / t.stride + 1;
  const index_t cg = t.c / t.groups, kg = t.k / t.groups;
  std::vector<double> y(std::size_t(n * t.k * oh * ow));
  for (index_t b0 = 0; b0 < n; ++b0)
    for (index_t k = 0; k < t.k; ++k)
      for (index_t i = 0; i < oh; ++i)
        for (index_t j = 0; j < ow; ++j) {
          double acc = b[std::size_t(k)];
          for (index_t ci = 0; ci < cg; ++ci)
            for (index_t r = 0; r < t.kernel; ++r)
              for (index_t s = 0; s < t.kernel; ++s) {
                const index_t yy = i * t.stride + r - pad, xx = j * t.stride + s - pad;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                const index_t c = (k / kg) * cg + ci;
                acc += double(x[std::size_t(((b0 * t.c + c) * h + yy) * wd + xx)]) *
                       w[std::size_t(((k * cg + ci) * t.kernel + r) * t.kernel + s)];
              }
          y[std::size_t(((b0 * t.k + k) * oh + i) * ow + j)] = acc;
        }
  return y;
}

}  // namespace

TEST_CASE("graph: grouped convs of few channels per group, merged in NHWC, match a reference",
          "[graph]") {
  const index_t N = 2, H = 9, W = 7;
  // Merged to fill a 16-lane vector, then (f32) up to 4 merged groups as one group's diagonal
  // blocks ("as 1x2": one group of two diagonal blocks).
  using K = conv2d<f32, nhwc>;
  const bool avx512 = K::L == 16 && K::NV == 4;
  const grouped_case cases[] = {{32, 32, 8, 3, 1, "groups 8 as 1x2x4", "groups 8 as 2"},
                                {16, 32, 4, 3, 2, "groups 4 as 1x2", "groups 4 as 2"},
                                {24, 24, 4, 3, 1, "groups 4 as 2", "groups 4 as 2"},
                                {12, 24, 12, 3, 1, "groups 12 as 2", "groups 12 as 2"},
                                {64, 64, 4, 3, 1, "groups 4 as 1x4", ""},
                                {96, 96, 6, 3, 1, "groups 6 as 3x2", ""},
                                {48, 96, 6, 3, 2, "groups 6 as 3x2", ""},
                                {40, 40, 10, 1, 1, "groups 10 as 5", "groups 10 as 5"},
                                {64, 64, 2, 3, 1, "", ""},
                                // Group counts of one vector each that 4 and 2 do not divide:
                                // padded with phantom blocks (RegNetX's 25 groups of 16).
                                {80, 80, 5, 3, 1, "groups 5 as 2x4", ""},
                                {48, 48, 3, 3, 2, "groups 3 as 1x4", ""},
                                {112, 112, 7, 1, 1, "groups 7 as 2x4", ""},
                                {80, 80, 10, 3, 1, "groups 10 as 2x4x2", "groups 10 as 5"},
                                // Merged groups of 4 and 8 channels as narrow tiles ("x4":
                                // each lane multiplies its own group's channels only), a
                                // phantom-padded count and an unpadded 1x1 among them.
                                {128, 128, 32, 3, 1, "groups 32 as 2x4x4", "groups 32 as 8"},
                                {64, 64, 8, 3, 2, "groups 8 as 1x4x2", "groups 8 as 4"},
                                {80, 80, 20, 3, 1, "groups 20 as 2x4x4", "groups 20 as 5"},
                                {64, 64, 16, 1, 1, "groups 16 as 1x4x4", "groups 16 as 4"}};
  for (const grouped_case& t : cases)
    for (precision prec : {precision::f32, precision::bf16, precision::int8}) {
      INFO("c " << t.c << " k " << t.k << " groups " << t.groups << " kernel " << t.kernel
                << " stride " << t.stride << " " << precision_name(prec));
      const index_t cg = t.c / t.groups;
      const auto x = gt::random_vec(std::size_t(N * t.c * H * W), 3, -1.f, 1.f);
      const auto w = gt::random_vec(std::size_t(t.k * cg * t.kernel * t.kernel), 4, -0.5f, 0.5f);
      const auto b = gt::random_vec(std::size_t(t.k), 5, -0.2f, 0.2f);
      graph g;
      conv2d_params cp;
      cp.groups = int(t.groups);
      cp.stride_h = cp.stride_w = int(t.stride);
      cp.pad_top = cp.pad_left = cp.pad_bottom = cp.pad_right = int(t.kernel / 2);
      const tensor_id in = g.input("x", {N, t.c, H, W}, dtype::f32, tensor_layout::nchw);
      g.set_quant(in, {2.f / 255.f, 128});  // x in [-1, 1] (int8 plans)
      g.output(g.conv2d("conv", in, g.constant("w", {t.k, cg, t.kernel, t.kernel}, w.data()),
                        g.constant("b", {t.k}, b.data()), cp));
      const std::vector<double> want = reference(x, w, b, t, N, H, W);
      double range = 0;
      for (double v : want) range = std::max(range, std::fabs(v));
      const double tol = (prec == precision::f32 ? 1e-4 : 3e-2) * range;
      for (bool nhwc : {true, false}) {
        const plan p =
            compile(g, {.threads = 2, .prec = prec, .fork_join_ns = 0, .choose_layout = nhwc});
        std::string kernel;
        double bytes = 0;
        for (const step_info& st : p.steps())
          if (st.op == op_kind::conv2d) kernel = st.kernel, bytes = st.bytes;
        INFO((nhwc ? "nhwc: " : "nchw: ") << kernel);
        if (prec == precision::f32) {
          // The profile's memory traffic counts the real weights, not a merged pack's zeros.
          const index_t pad = t.kernel / 2, oh = (H + 2 * pad - t.kernel) / t.stride + 1,
                        ow = (W + 2 * pad - t.kernel) / t.stride + 1;
          CHECK(bytes ==
                4.0 * double(N * t.c * H * W + N * t.k * oh * ow + t.k * cg * t.kernel * t.kernel));
        }
        if (avx512) {
          const std::string merge = prec == precision::f32 ? t.f32_merge : t.lowp_merge;
          if (!nhwc || merge.empty())
            CHECK(kernel.find(" as ") == std::string::npos);
          else
            CHECK(kernel.find(merge + " ") != std::string::npos);
        }
        std::vector<float> y(want.size(), std::nanf(""));
        replay_buffer r = p.record({bind(x)}, {bind(y)});
        r.replay();
        for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(std::fabs(y[i] - want[i]) <= tol);
      }
    }
}
