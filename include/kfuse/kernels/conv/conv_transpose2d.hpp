#pragma once
// conv_transpose2d: the transposed (fractionally strided) 2-D convolution of NHWC images, as
// ONNX's ConvTranspose and PyTorch's ConvTranspose2d define it (weights [C, K / groups, R, S]).
// Output-stationary: each output pixel gathers the input pixels whose windows cover it, so it
// is written once (no scatter, no scratch) and its K channels are the contiguous, vectorizable
// inner loop over weights packed as [group][r][s][c][k].
#include <algorithm>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"

KFUSE_BEGIN_NAMESPACE

struct conv_transpose_shape {
  index_t n = 1, c = 1, h = 1, w = 1;  // input (logical N, C, H, W)
  index_t k = 1, r = 1, s = 1;         // output channels, window
  index_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  index_t pad_top = 0, pad_left = 0;
  index_t groups = 1;
  index_t out_h = 1, out_w = 1;  // given: ONNX's output_padding / output_shape decide them
  /// The output extent without output padding: (in - 1) * stride - pads + dil * (k - 1) + 1.
  static index_t natural(index_t in, index_t stride, index_t dil, index_t win, index_t pads) {
    return (in - 1) * stride - pads + dil * (win - 1) + 1;
  }
};

namespace detail {
inline void check_conv_transpose_shape(const conv_transpose_shape& s) {
  auto num = [](index_t v) { return std::to_string(v); };
  for (index_t v : {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dil_h, s.dil_w,
                    s.groups, s.out_h, s.out_w})
    if (v < 1) fail("conv_transpose2d", "extents, strides, dilations and groups must be >= 1");
  if (s.pad_top < 0 || s.pad_left < 0) fail("conv_transpose2d", "padding must not be negative");
  if (s.c % s.groups || s.k % s.groups)
    fail("conv_transpose2d", "channels " + num(s.c) + " -> " + num(s.k) + " do not divide into " +
                                 num(s.groups) + " groups");
}
}  // namespace detail

/// Weights [C, K / groups, R, S] -> [group][r][s][c of group][k of group].
inline std::vector<float> pack_conv_transpose_weights(const float* w,
                                                      const conv_transpose_shape& s) {
  const index_t cg = s.c / s.groups, kg = s.k / s.groups;
  std::vector<float> p(std::size_t(s.c * kg * s.r * s.s));
  for (index_t g = 0; g < s.groups; ++g)
    for (index_t ci = 0; ci < cg; ++ci)
      for (index_t ko = 0; ko < kg; ++ko)
        for (index_t rr = 0; rr < s.r; ++rr)
          for (index_t ss = 0; ss < s.s; ++ss)
            p[std::size_t((((g * s.r + rr) * s.s + ss) * cg + ci) * kg + ko)] =
                w[std::size_t((((g * cg + ci) * kg + ko) * s.r + rr) * s.s + ss)];
  return p;
}

/// Output rows [r0, r1) of (n, oh): out NHWC [N, out_h, out_w, K] = bias + the gathered taps.
inline void conv_transpose_rows(const float* x, const float* packed, const float* bias, float* out,
                                const conv_transpose_shape& s, index_t r0, index_t r1) {
  const index_t cg = s.c / s.groups, kg = s.k / s.groups;
  for (index_t row = r0; row < r1; ++row) {
    const index_t n = row / s.out_h, oh = row % s.out_h;
    for (index_t ow = 0; ow < s.out_w; ++ow) {
      float* o = out + ((n * s.out_h + oh) * s.out_w + ow) * s.k;
      for (index_t k = 0; k < s.k; ++k) o[k] = bias ? bias[k] : 0.f;
      for (index_t rr = 0; rr < s.r; ++rr) {
        const index_t hn = oh + s.pad_top - rr * s.dil_h;  // = ih * stride_h when it is a tap
        if (hn < 0 || hn % s.stride_h) continue;
        const index_t ih = hn / s.stride_h;
        if (ih >= s.h) continue;
        for (index_t ss = 0; ss < s.s; ++ss) {
          const index_t wn = ow + s.pad_left - ss * s.dil_w;
          if (wn < 0 || wn % s.stride_w) continue;
          const index_t iw = wn / s.stride_w;
          if (iw >= s.w) continue;
          const float* xp = x + ((n * s.h + ih) * s.w + iw) * s.c;
          for (index_t g = 0; g < s.groups; ++g) {
            const float* wp = packed + ((g * s.r + rr) * s.s + ss) * cg * kg;
            float* og = o + g * kg;
            for (index_t ci = 0; ci < cg; ++ci) {
              const float v = xp[g * cg + ci];
              const float* wr = wp + ci * kg;
              for (index_t k = 0; k < kg; ++k) og[k] += v * wr[k];
            }
          }
        }
      }
    }
  }
}

KFUSE_END_NAMESPACE
