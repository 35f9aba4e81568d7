#pragma once
// Shared by the depthwise_conv2d tests: the shape set, running one case against the double
// reference of tests/kernels/conv/conv_reference.hpp with poisoned, guarded outputs.
#include <span>

#include "kernels/conv/conv_reference.hpp"
#include "kfuse/kernels/conv/depthwise.hpp"
#include "support/test_support.hpp"

namespace kt {

/// Depthwise shape: C, H, W, R, S, stride (h, w), pads (t, l, b, r), dilation, N.
inline kfuse::conv_shape dw_shape(index_t c, index_t h, index_t w, index_t r, index_t s, index_t sh,
                                  index_t sw, index_t pt, index_t pl, index_t pb, index_t pr,
                                  index_t dil = 1, index_t n = 1) {
  kfuse::conv_shape cs;
  cs.n = n;
  cs.c = cs.k = cs.groups = c;
  cs.h = h;
  cs.w = w;
  cs.r = r;
  cs.s = s;
  cs.stride_h = sh;
  cs.stride_w = sw;
  cs.pad_top = pt;
  cs.pad_left = pl;
  cs.pad_bottom = pb;
  cs.pad_right = pr;
  cs.dilation_h = cs.dilation_w = dil;
  return cs;
}

/// The depthwise test shapes: odd channel counts, H/W 1, 7, 28, 33, strides 1-2, dilation 2,
/// asymmetric pads, kernels 1x1 / 3x3 / 5x5, batch 2.
inline std::vector<kfuse::conv_shape> dw_shapes() {
  return {
      dw_shape(3, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1),          // 3x3 s1 pad 1 (fast NCHW path)
      dw_shape(13, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1),       // the benchmark's geometry, odd C
      dw_shape(17, 33, 33, 3, 3, 2, 2, 1, 0, 0, 1),       // stride 2, asymmetric pads
      dw_shape(40, 7, 33, 5, 5, 1, 1, 2, 1, 2, 3),        // 5x5, asymmetric pads, C > 2 vectors
      dw_shape(13, 28, 7, 3, 3, 1, 2, 2, 2, 2, 2, 2),     // dilation 2, mixed strides
      dw_shape(3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),          // 1x1 on a 1x1 image
      dw_shape(17, 1, 33, 3, 3, 1, 1, 1, 1, 1, 1),        // H = 1: two padded tap rows
      dw_shape(35, 33, 1, 3, 1, 2, 1, 0, 0, 1, 0, 1, 2),  // W = 1, 3x1 kernel, batch 2
      dw_shape(64, 9, 9, 3, 3, 1, 1, 0, 0, 0, 0, 1, 2),   // no padding, batch 2, C = 4 vectors
      dw_shape(5, 6, 6, 3, 3, 1, 1, 3, 3, 0, 0),          // pad 3 > kernel: zero-tap outputs
      dw_shape(19, 30, 31, 5, 5, 2, 1, 2, 2, 2, 2),       // 5x5 stride (2, 1)
      dw_shape(33, 12, 40, 3, 3, 1, 1, 1, 1, 1, 1),       // wide rows: several NCHW tiles
      dw_shape(70, 7, 7, 5, 5, 1, 1, 2, 2, 2, 2),         // 5x5 on 7x7: two overlapping edge tiles
      dw_shape(24, 13, 13, 5, 5, 2, 2, 2, 2, 2, 2),       // 5x5 stride 2 on 13x13 -> 7x7
      dw_shape(20, 9, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2),   // dilated 3x3 on 9x9: whole-row edge tiles
      dw_shape(16, 9, 20, 3, 3, 1, 1, 2, 2, 2, 2, 2),  // dilated 3x3, 20 wide: border pixels
      dw_shape(9, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1),       // narrower than a tile: single pixels
      // The NHWC row tiles (7 pixels on AVX-512): exact fits, overlapping last tiles, partial
      // channel vectors, asymmetric pads at both ends.
      dw_shape(24, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2),      // 5x5 s1: two tiles per row
      dw_shape(33, 6, 16, 5, 5, 1, 1, 2, 2, 2, 2),       // 5x5 s1: the last tile overlaps
      dw_shape(5, 29, 29, 3, 3, 2, 2, 1, 1, 1, 1),       // 3x3 s2, C below a vector
      dw_shape(33, 28, 28, 5, 5, 2, 2, 2, 2, 2, 2),      // 5x5 s2: vector + tail channels
      dw_shape(18, 11, 30, 5, 5, 2, 2, 1, 1, 2, 2),      // 5x5 s2, asymmetric pads
      dw_shape(40, 9, 23, 3, 3, 2, 2, 0, 0, 1, 1),       // 3x3 s2, TF "SAME" pads (bottom / right)
      dw_shape(16, 8, 8, 5, 5, 2, 2, 2, 2, 2, 2, 1, 2),  // 5x5 s2 on 8x8: narrower than a tile
  };
}

template <class L>
index_t dw_channel_of(const kfuse::dims4& d, index_t i) {
  if constexpr (std::is_same_v<L, kfuse::nchw>)
    return (i / (d.h * d.w)) % d.c;
  else
    return i % d.c;
}

/// Runs depthwise_conv2d<Recipe, L, test_arch, Ep, B> on one shape and checks every output
/// against the double reference. `lsb` is the size of one unit of the input's last place used
/// by the f32 error bound (2^-24 relative to the sum of |x||w|).
template <class Recipe, class L, class B, class T, class Out, class WT, class Ep>
void dw_check(const kfuse::conv_shape& s, const std::vector<T>& x, const std::vector<WT>& w,
              const Ep& ep, std::string_view what, std::int32_t zp = 0, int threads = 0) {
  using DW = kfuse::depthwise_conv2d<Recipe, L, test_arch, Ep, B>;
  const auto packed = DW::pack(w.data(), s);
  const kfuse::dims4 od = s.out_dims();
  const index_t n_out = kfuse::numel(od);
  guarded<Out> y(n_out, 0xFF);  // all-ones bytes: NaN floats, -1 integers
  const auto info = DW::run(kfuse::view<L>(x.data(), s.in_dims()), packed,
                            kfuse::view<L>(y.data, od), ep, kfuse::run_options{threads}, zp);
  CHECK(info.kernel == "depthwise_conv2d");
  CHECK(info.arch == test_arch::name);
  const std::string_view mk = info.micro_kernel;
  const bool unit = s.dilation_h == 1 && s.dilation_w == 1 && s.r == s.s;
  const bool fast = unit && s.r == 3 && s.stride_h == 1 && s.stride_w == 1;
  // NHWC row tiles (at least one vector of channels): 3x3 stride 1; with AVX-512 3x3 and 5x5 at
  // stride 1 or 2 (both ways).
  const bool wide = DW::vec::lanes >= 16, s12 = s.stride_h == 1 || s.stride_h == 2;
  const bool k = wide ? (s.r == 3 || s.r == 5) && s12 : s.r == 3 && s.stride_h == 1;
  const bool rows = unit && k && s.stride_h == s.stride_w && s.c >= DW::vec::lanes;
  if constexpr (std::is_same_v<L, kfuse::nhwc>)
    CHECK(mk.substr(0, 11) == (rows ? "nhwc " + std::to_string(s.r) + "x" + std::to_string(s.r) +
                                          "s" + std::to_string(s.stride_h) + " "
                                    : std::string("nhwc direct")));
  else
    CHECK(mk.substr(0, 11) == (fast ? "nchw 3x3s1 " : "nchw direct"));
  REQUIRE(y.guards_intact());
  const auto ref = ref_conv2d<L>(s, x.data(), w.data(), double(zp));
  std::vector<double> mag;
  if constexpr (std::is_integral_v<T>) {
    mag.assign(ref.size(), 0.0);  // integer sums are exact
  } else {
    mag = ref_conv2d_abs<L>(s, x.data(), w.data());
  }
  int failures = 0;
  for (index_t i = 0; i < n_out && failures < 5; ++i) {
    const ref_ctx rc{i, dw_channel_of<L>(od, i)};
    const double exact = ref_epilogue(ep, ref[std::size_t(i)], rc);
    // f32 sums: ~taps ulps of the magnitude; the stages here have |slope| <= ~1.2.
    const double sum_err = 2.0 * double(s.r * s.s) * 0x1p-24 * mag[std::size_t(i)];
    const double tol = tolerance<Out>(exact) + 1.5 * sum_err;
    const double got = double(kfuse::to_float(y.data[i]));
    if (!(std::fabs(got - representable<Out>(exact)) <= tol) && failures++ < 5)
      UNSCOPED_INFO(what << " " << L::name << " C=" << s.c << " H=" << s.h << " W=" << s.w << " R="
                         << s.r << " S=" << s.s << " stride " << s.stride_h << "," << s.stride_w
                         << " dil " << s.dilation_h << " at " << i << " got " << got << " want "
                         << exact << " (" << info.micro_kernel << ", " << info.impl << ")");
  }
  CHECK(failures == 0);
}

}  // namespace kt
