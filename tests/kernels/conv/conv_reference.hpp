#pragma once
// Double-precision direct convolution over kfuse::conv_shape, for the conv2d and depthwise tests.
//
//   ref_conv2d<nhwc>(shape, x, w_oihw)   -> std::vector<double> in the output layout, the exact
//                                           sums sum_{c,r,s} x * w (inputs of any storage type,
//                                           read through kfuse::to_float, or as integers minus a
//                                           zero point)
//   random_weights_oihw(shape, rng, ...) -> [K, C / groups, R, S] weights of any storage type
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/layout/layout.hpp"
#include "kfuse/types/convert.hpp"

namespace kt {

/// A geometry with square stride and dilation; pads as {top, left, bottom, right}.
inline kfuse::conv_shape make(kfuse::index_t n, kfuse::index_t c, kfuse::index_t h,
                              kfuse::index_t w, kfuse::index_t k, kfuse::index_t r,
                              kfuse::index_t s, kfuse::index_t stride,
                              std::array<kfuse::index_t, 4> pad_tlbr = {0, 0, 0, 0},
                              kfuse::index_t dilation = 1, kfuse::index_t groups = 1) {
  kfuse::conv_shape g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  g.stride_h = g.stride_w = stride;
  g.pad_top = pad_tlbr[0], g.pad_left = pad_tlbr[1], g.pad_bottom = pad_tlbr[2],
  g.pad_right = pad_tlbr[3];
  g.dilation_h = g.dilation_w = dilation;
  g.groups = groups;
  return g;
}

/// The pointwise NHWC shapes of the channel-gate tests (conv2d::run_gated): three samples, a
/// 7x7 map with 64 channels, 1x1 images.
inline std::vector<kfuse::conv_shape> gated_shapes() {
  return {make(3, 19, 5, 3, 21, 1, 1, 1), make(1, 64, 7, 7, 40, 1, 1, 1),
          make(2, 8, 1, 1, 3, 1, 1, 1)};
}

/// x * gate[n * gate_stride + c] for every element of an NHWC x (the product in double, then
/// float): the reference conv's input for run_gated.
template <class T>
std::vector<float> gated_input(const kfuse::conv_shape& s, const T* x, const float* gate,
                               kfuse::index_t gate_stride) {
  std::vector<float> gx(std::size_t(kfuse::numel(s.in_dims())));
  for (kfuse::index_t i = 0; i < kfuse::index_t(gx.size()); ++i) {
    const kfuse::index_t n = i / (s.h * s.w * s.c), c = i % s.c;
    gx[std::size_t(i)] = float(double(kfuse::to_float(x[i])) * double(gate[n * gate_stride + c]));
  }
  return gx;
}

/// A value of storage type T as a double (integers as their integer value).
template <class T>
double conv_value(T v) {
  if constexpr (std::is_integral_v<T>)
    return double(v);
  else
    return double(kfuse::to_float(v));
}

/// out[n, k, oh, ow] = sum over the group's c, r, s of (x - x_zero) * (w - w_zero), with padded
/// taps zero. x in layout L (logical dims shape.in_dims()), w in OIHW [K, C/groups, R, S]; the
/// result is in layout L with dims shape.out_dims().
template <class L, class TX, class TW>
std::vector<double> ref_conv2d(const kfuse::conv_shape& s, const TX* x, const TW* w,
                               double x_zero = 0, double w_zero = 0) {
  const kfuse::dims4 id = s.in_dims(), od = s.out_dims();
  const kfuse::index_t cg = s.c / s.groups, kg = s.k / s.groups;
  std::vector<double> out(std::size_t(kfuse::numel(od)));
  for (kfuse::index_t n = 0; n < s.n; ++n)
    for (kfuse::index_t k = 0; k < s.k; ++k) {
      const kfuse::index_t g = k / kg;
      for (kfuse::index_t oh = 0; oh < od.h; ++oh)
        for (kfuse::index_t ow = 0; ow < od.w; ++ow) {
          double acc = 0;
          for (kfuse::index_t ci = 0; ci < cg; ++ci)
            for (kfuse::index_t r = 0; r < s.r; ++r) {
              const kfuse::index_t ih = oh * s.stride_h - s.pad_top + r * s.dilation_h;
              if (ih < 0 || ih >= s.h) continue;
              for (kfuse::index_t q = 0; q < s.s; ++q) {
                const kfuse::index_t iw = ow * s.stride_w - s.pad_left + q * s.dilation_w;
                if (iw < 0 || iw >= s.w) continue;
                const double xv =
                    conv_value(x[kfuse::offset_of<L>(id, n, g * cg + ci, ih, iw)]) - x_zero;
                const double wv = conv_value(w[((k * cg + ci) * s.r + r) * s.s + q]) - w_zero;
                acc += xv * wv;
              }
            }
          out[std::size_t(kfuse::offset_of<L>(od, n, k, oh, ow))] = acc;
        }
    }
  return out;
}

/// Sum of |x| * |w| over the taps of each output (same layout as ref_conv2d): the scale of the
/// f32 rounding error of one output, for tolerances.
template <class L, class TX, class TW>
std::vector<double> ref_conv2d_abs(const kfuse::conv_shape& s, const TX* x, const TW* w) {
  const kfuse::dims4 id = s.in_dims();
  std::vector<double> ax(std::size_t(kfuse::numel(id))), aw(std::size_t(s.weight_count()));
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::fabs(conv_value(x[i]));
  for (std::size_t i = 0; i < aw.size(); ++i) aw[i] = std::fabs(conv_value(w[i]));
  return ref_conv2d<L>(s, ax.data(), aw.data());
}

/// Random OIHW weights [K, C/groups, R, S]: floats uniform in [lo, hi] (rounded to T), integers
/// uniform over [lo, hi] clamped to T's range; zero outside the diagonal blocks of a shape with
/// conv_shape::diagonal > 1, and outside the groups of each block (conv_shape::block_groups).
template <class T>
std::vector<T> random_weights_oihw(const kfuse::conv_shape& s, std::mt19937& rng, float lo = -1.f,
                                   float hi = 1.f) {
  std::vector<T> w(std::size_t(s.weight_count()));
  if constexpr (std::is_integral_v<T>) {
    const int a = std::max<int>(int(lo), std::numeric_limits<T>::min());
    const int b = std::min<int>(int(hi), std::numeric_limits<T>::max());
    std::uniform_int_distribution<int> u(a, b);
    for (auto& v : w) v = T(u(rng));
  } else {
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& v : w) v = kfuse::from_float<T>(u(rng));
  }
  const kfuse::index_t cg = s.c / s.groups, kg = s.k / s.groups, rs = s.r * s.s;
  const kfuse::index_t cb = cg / s.diagonal, kb = kg / s.diagonal;
  const kfuse::index_t cw = cb / s.block_groups, kw = kb / s.block_groups;
  for (kfuse::index_t k = 0; k < s.k && (s.diagonal > 1 || s.block_groups > 1); ++k)
    for (kfuse::index_t c = 0; c < cg; ++c)
      if (c / cb != (k % kg) / kb || c % cb / cw != (k % kg) % kb / kw)
        std::fill_n(w.begin() + std::ptrdiff_t((k * cg + c) * rs), rs, T{});
  return w;
}

/// Random activations of storage type T (floats in [lo, hi], integers over [lo, hi]).
template <class T>
std::vector<T> random_activations(kfuse::index_t count, std::mt19937& rng, float lo = -1.f,
                                  float hi = 1.f) {
  std::vector<T> x(static_cast<std::size_t>(count));
  if constexpr (std::is_integral_v<T>) {
    const int a = std::max<int>(int(lo), std::numeric_limits<T>::min());
    const int b = std::min<int>(int(hi), std::numeric_limits<T>::max());
    std::uniform_int_distribution<int> u(a, b);
    for (auto& v : x) v = T(u(rng));
  } else {
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& v : x) v = kfuse::from_float<T>(u(rng));
  }
  return x;
}

/// One problem in layout L: random input, weights, bias, residual; the exact sums and their
/// error scale (sum |x w|), both in L.
template <class L>
struct conv_problem {
  kfuse::conv_shape s;
  std::vector<float> x, w, bias, residual;
  std::vector<double> exact, scale;
  conv_problem(const kfuse::conv_shape& shape, std::mt19937& rng)
      : s(shape),
        x(random_activations<float>(kfuse::numel(shape.in_dims()), rng)),
        w(random_weights_oihw<float>(shape, rng)),
        bias(random_activations<float>(shape.k, rng)),
        residual(random_activations<float>(kfuse::numel(shape.out_dims()), rng)) {
    exact = ref_conv2d<L>(s, x.data(), w.data());
    scale = ref_conv2d_abs<L>(s, x.data(), w.data());
  }
  /// The output channel of flat output index i.
  kfuse::index_t channel_of(kfuse::index_t i) const {
    const kfuse::dims4 d = s.out_dims();
    return std::is_same_v<L, kfuse::nhwc> ? i % d.c : (i / (d.h * d.w)) % d.c;
  }
};

}  // namespace kt
