#pragma once
// resize: 2-D nearest or bilinear resampling of an image (N, C kept), NCHW or NHWC. The source
// coordinate of every output row and column is computed once (resize_axis), so the inner loop
// is a gather (nearest) or a two-tap blend (linear) along W, or along C in NHWC (contiguous).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/types/resize_modes.hpp"

KFUSE_BEGIN_NAMESPACE

/// One output axis: taps i0 / i1 and the weight of i1 per output index.
struct resize_axis {
  std::vector<index_t> i0, i1;
  std::vector<float> w1;

  static resize_axis make(index_t in, index_t out, double scale, resize_mode mode,
                          resize_coords coords, resize_rounding rounding) {
    resize_axis a;
    a.i0.resize(std::size_t(out));
    a.i1.resize(std::size_t(out));
    a.w1.assign(std::size_t(out), 0.f);
    for (index_t o = 0; o < out; ++o) {
      double x = 0;
      switch (coords) {
        case resize_coords::half_pixel:
          x = (double(o) + 0.5) / scale - 0.5;
          break;
        case resize_coords::pytorch_half_pixel:
          x = out > 1 ? (double(o) + 0.5) / scale - 0.5 : 0.0;
          break;
        case resize_coords::align_corners:
          // ONNX divides by the unrounded output length in * scale (= out when given sizes).
          x = in * scale > 1 ? double(o) * double(in - 1) / (double(in) * scale - 1) : 0.0;
          break;
        case resize_coords::asymmetric:
          x = double(o) / scale;
          break;
        case resize_coords::tf_half_pixel_for_nn:
          x = (double(o) + 0.5) / scale;
          break;
      }
      if (mode == resize_mode::nearest) {
        double r = 0;
        switch (rounding) {
          case resize_rounding::round_prefer_floor:
            r = x == std::floor(x) + 0.5 ? std::floor(x) : std::round(x);
            break;
          case resize_rounding::round_prefer_ceil:
            r = std::round(x);
            break;
          case resize_rounding::floor:
            r = std::floor(x);
            break;
          case resize_rounding::ceil:
            r = std::ceil(x);
            break;
        }
        const index_t i = std::clamp<index_t>(index_t(r), 0, in - 1);
        a.i0[std::size_t(o)] = a.i1[std::size_t(o)] = i;
      } else {
        x = std::clamp(x, 0.0, double(in - 1));
        const index_t i = std::min<index_t>(index_t(x), in - 1);
        a.i0[std::size_t(o)] = i;
        a.i1[std::size_t(o)] = std::min<index_t>(i + 1, in - 1);
        a.w1[std::size_t(o)] = float(x - double(i));
      }
    }
    return a;
  }
};

struct resize_shape {
  index_t n = 1, c = 1, h = 1, w = 1, out_h = 1, out_w = 1;
  bool nhwc = false;
  bool linear = false;  // else nearest: a pure gather (no blend, so inf stays inf)
  resize_axis rows, cols;
};

/// Output rows [r0, r1) of (n, [c,] oh) rows: NCHW rows are (n, c, oh), NHWC rows (n, oh).
inline void resize_rows(const float* in, float* out, const resize_shape& s, index_t r0,
                        index_t r1) {
  const index_t ow_n = s.out_w;
  for (index_t row = r0; row < r1; ++row) {
    const index_t oh = row % s.out_h;
    const index_t h0 = s.rows.i0[std::size_t(oh)], h1 = s.rows.i1[std::size_t(oh)];
    const float wh = s.rows.w1[std::size_t(oh)];
    if (!s.nhwc) {  // plane (n, c): rows of w
      const index_t plane = row / s.out_h;
      const float* a = in + (plane * s.h + h0) * s.w;
      const float* b = in + (plane * s.h + h1) * s.w;
      float* o = out + row * ow_n;
      for (index_t ow = 0; ow < ow_n; ++ow) {
        const index_t w0 = s.cols.i0[std::size_t(ow)], w1 = s.cols.i1[std::size_t(ow)];
        if (!s.linear) {
          o[ow] = a[w0];
          continue;
        }
        const float ww = s.cols.w1[std::size_t(ow)];
        const float top = a[w0] + ww * (a[w1] - a[w0]);
        const float bot = b[w0] + ww * (b[w1] - b[w0]);
        o[ow] = top + wh * (bot - top);
      }
    } else {  // image n, output row oh: pixels of c contiguous values
      const index_t n = row / s.out_h;
      const float* a = in + (n * s.h + h0) * s.w * s.c;
      const float* b = in + (n * s.h + h1) * s.w * s.c;
      float* o = out + row * ow_n * s.c;
      for (index_t ow = 0; ow < ow_n; ++ow) {
        const index_t w0 = s.cols.i0[std::size_t(ow)] * s.c, w1 = s.cols.i1[std::size_t(ow)] * s.c;
        const float ww = s.cols.w1[std::size_t(ow)];
        float* op = o + ow * s.c;
        if (!s.linear) {
          std::copy(a + w0, a + w0 + s.c, op);
          continue;
        }
        for (index_t ch = 0; ch < s.c; ++ch) {
          const float top = a[w0 + ch] + ww * (a[w1 + ch] - a[w0 + ch]);
          const float bot = b[w0 + ch] + ww * (b[w1 + ch] - b[w0 + ch]);
          op[ch] = top + wh * (bot - top);
        }
      }
    }
  }
}

/// Rows of the output as resize_rows counts them.
inline index_t resize_row_count(const resize_shape& s) {
  return s.nhwc ? s.n * s.out_h : s.n * s.c * s.out_h;
}

KFUSE_END_NAMESPACE
