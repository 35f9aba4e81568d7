#pragma once
// resize: 2-D nearest, bilinear or bicubic resampling of an image (N, C kept), NCHW or NHWC. The
// source coordinate of every output row and column is computed once (resize_axis), so the inner
// loop is a gather (nearest), a two-tap blend (linear) along W, or along C in NHWC (contiguous),
// or a 4 x 4 tap sum (cubic).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/types/resize_modes.hpp"

KFUSE_BEGIN_NAMESPACE

/// One output axis: taps i0 / i1 and the weight of i1 per output index; cubic: four taps and
/// weights per output index in `taps` / `weights` (4 * out each); `outside`: per output index,
/// whether it samples outside the input (tf_crop_and_resize; empty when none does).
struct resize_axis {
  std::vector<index_t> i0, i1;
  std::vector<float> w1;
  std::vector<index_t> taps;
  std::vector<float> weights;
  std::vector<std::uint8_t> outside;

  /// Keys' cubic convolution kernel at distance d (a: -0.75 in ONNX, -0.5 in some libraries).
  static double cubic_weight(double d, double a) {
    d = std::fabs(d);
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0;
  }

  static resize_axis make(index_t in, index_t out, double scale, resize_mode mode,
                          resize_coords coords, resize_rounding rounding, double cubic_a = -0.75,
                          bool exclude_outside = false, double roi0 = 0, double roi1 = 1) {
    resize_axis a;
    a.i0.resize(std::size_t(out));
    a.i1.resize(std::size_t(out));
    a.w1.assign(std::size_t(out), 0.f);
    if (mode == resize_mode::cubic) {
      a.taps.resize(4 * std::size_t(out));
      a.weights.resize(4 * std::size_t(out));
    }
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
        case resize_coords::tf_crop_and_resize:
          x = out > 1 ? roi0 * double(in - 1) +
                            double(o) * (roi1 - roi0) * double(in - 1) / double(out - 1)
                      : 0.5 * (roi0 + roi1) * double(in - 1);
          if (x < 0 || x > double(in - 1)) {
            a.outside.resize(std::size_t(out), 0);
            a.outside[std::size_t(o)] = 1;
          }
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
      } else if (mode == resize_mode::cubic) {
        // Taps floor(x) - 1 .. floor(x) + 2 of the edge-replicated input (ONNX's reference).
        const double f = std::floor(x);
        double w[4], sum = 0;
        for (int t = 0; t < 4; ++t) {
          const index_t i = index_t(f) - 1 + t;
          w[t] = cubic_weight(x - double(i), cubic_a);
          if (exclude_outside && (i < 0 || i >= in)) w[t] = 0;
          sum += w[t];
          a.taps[4 * std::size_t(o) + std::size_t(t)] = std::clamp<index_t>(i, 0, in - 1);
        }
        for (int t = 0; t < 4; ++t)
          a.weights[4 * std::size_t(o) + std::size_t(t)] =
              float(exclude_outside && sum != 0 ? w[t] / sum : w[t]);
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
  bool linear = false;        // else nearest: a pure gather (no blend, so inf stays inf)
  bool cubic = false;         // 4 x 4 taps (rows.taps / cols.taps)
  float extrapolation = 0.f;  // the value of outputs outside the input (resize_axis::outside)
  resize_axis rows, cols;
};

/// Sets the outputs of rows [r0, r1) that sample outside the input to the extrapolation value.
inline void resize_fill_outside(float* out, const resize_shape& s, index_t r0, index_t r1) {
  if (s.rows.outside.empty() && s.cols.outside.empty()) return;
  const index_t C = s.nhwc ? s.c : 1;
  for (index_t row = r0; row < r1; ++row) {
    float* o = out + row * s.out_w * C;
    const index_t oh = row % s.out_h;
    if (!s.rows.outside.empty() && s.rows.outside[std::size_t(oh)]) {
      std::fill(o, o + s.out_w * C, s.extrapolation);
      continue;
    }
    for (std::size_t ow = 0; ow < s.cols.outside.size(); ++ow)
      if (s.cols.outside[ow])
        std::fill(o + index_t(ow) * C, o + index_t(ow + 1) * C, s.extrapolation);
  }
}

/// Cubic rows: each output value is the 4 x 4 weighted sum of its taps (double accumulation: the
/// weights alternate in sign, and the 16 products must not cancel in float).
inline void resize_rows_cubic(const float* in, float* out, const resize_shape& s, index_t r0,
                              index_t r1) {
  const index_t C = s.nhwc ? s.c : 1;
  for (index_t row = r0; row < r1; ++row) {
    const index_t oh = row % s.out_h;
    const index_t plane = row / s.out_h;  // NCHW: (n, c); NHWC: n
    const float* base = in + plane * s.h * s.w * C;
    float* o = out + row * s.out_w * C;
    const index_t* th = &s.rows.taps[4 * std::size_t(oh)];
    const float* wh = &s.rows.weights[4 * std::size_t(oh)];
    for (index_t ow = 0; ow < s.out_w; ++ow) {
      const index_t* tw = &s.cols.taps[4 * std::size_t(ow)];
      const float* ww = &s.cols.weights[4 * std::size_t(ow)];
      for (index_t ch = 0; ch < C; ++ch) {
        double acc = 0;
        for (int r = 0; r < 4; ++r) {
          const float* line = base + th[r] * s.w * C + ch;
          double v = 0;
          for (int t = 0; t < 4; ++t) v += double(ww[t]) * double(line[tw[t] * C]);
          acc += double(wh[r]) * v;
        }
        o[ow * C + ch] = float(acc);
      }
    }
  }
}

/// Output rows [r0, r1) of (n, [c,] oh) rows: NCHW rows are (n, c, oh), NHWC rows (n, oh).
inline void resize_rows_taps(const float* in, float* out, const resize_shape& s, index_t r0,
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

/// Output rows [r0, r1) of (n, [c,] oh) rows (see resize_rows_taps), with the outputs outside the
/// input (tf_crop_and_resize) set to the extrapolation value.
inline void resize_rows(const float* in, float* out, const resize_shape& s, index_t r0,
                        index_t r1) {
  if (s.cubic)
    resize_rows_cubic(in, out, s, r0, r1);
  else
    resize_rows_taps(in, out, s, r0, r1);
  resize_fill_outside(out, s, r0, r1);
}

/// Rows of the output as resize_rows counts them.
inline index_t resize_row_count(const resize_shape& s) {
  return s.nhwc ? s.n * s.out_h : s.n * s.c * s.out_h;
}

KFUSE_END_NAMESPACE
