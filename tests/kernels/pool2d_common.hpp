#pragma once
// Shared by the pool2d tests: a double-precision reference (PyTorch's max_pool2d / avg_pool2d /
// adaptive-1x1 rules) and the check of one case with poisoned, guarded outputs.
#include <span>

#include "kfuse/kernels/pool2d.hpp"
#include "support/test_support.hpp"

namespace kt {

/// A value of storage type T as a double (integers as their integer value).
template <class T>
double conv_value_of(T v) {
  if constexpr (std::is_integral_v<T>)
    return double(v);
  else
    return double(kfuse::to_float(v));
}

struct pool_user_stage {  // y = 0.5 * x + 1, written once on simd::vec
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    return kfuse::simd::fma(x, V(0.5f), V(1.f));
  }
};
inline double ref_stage(const pool_user_stage&, double x, ref_ctx) { return 0.5 * x + 1; }

inline kfuse::pool_shape pool_case(kfuse::pool_kind kind, index_t c, index_t h, index_t w,
                                   index_t r, index_t s, index_t sh, index_t sw, index_t pt,
                                   index_t pl, index_t pb, index_t pr, bool ceil = false,
                                   bool include_pad = true, index_t n = 1) {
  kfuse::pool_shape p;
  p.n = n;
  p.c = c;
  p.h = h;
  p.w = w;
  p.kind = kind;
  p.r = r;
  p.s = s;
  p.stride_h = sh;
  p.stride_w = sw;
  p.pad_top = pt;
  p.pad_left = pl;
  p.pad_bottom = pb;
  p.pad_right = pr;
  p.ceil_mode = ceil;
  p.count_include_pad = include_pad;
  return p;
}

inline kfuse::pool_shape global_case(kfuse::pool_kind kind, index_t c, index_t h, index_t w,
                                     index_t n = 1) {
  kfuse::pool_shape p;
  p.n = n;
  p.c = c;
  p.h = h;
  p.w = w;
  p.kind = kind;
  p.global = true;
  return p;
}

/// Window geometries: odd channel counts, H/W 1, 7, 28, 33, strides 1-2 (and 3), asymmetric
/// pads, ceil mode, windows larger than the stride, a window over the whole plane.
inline std::vector<kfuse::pool_shape> pool_windows(kfuse::pool_kind kind, bool include_pad) {
  using kfuse::index_t;
  std::vector<kfuse::pool_shape> v;
  for (bool ceil : {false, true}) {
    v.push_back(pool_case(kind, 13, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, ceil, include_pad));
    v.push_back(pool_case(kind, 17, 7, 7, 2, 2, 2, 2, 0, 0, 0, 0, ceil, include_pad, 2));
    v.push_back(pool_case(kind, 35, 33, 28, 5, 3, 2, 3, 2, 1, 1, 0, ceil, include_pad));
    v.push_back(pool_case(kind, 3, 1, 33, 3, 3, 2, 2, 1, 1, 1, 1, ceil, include_pad));
    v.push_back(pool_case(kind, 64, 6, 6, 2, 2, 1, 1, 1, 1, 1, 1, ceil, include_pad));
    v.push_back(pool_case(kind, 20, 33, 1, 3, 1, 2, 1, 1, 0, 0, 0, ceil, include_pad));
  }
  // Stride-2 rows around the vector widths (4, 8, 16 lanes): whole vectors, a last vector
  // ending at the row's end (even or odd load), rows shorter than a vector.
  for (index_t w : {9, 16, 17, 31, 34, 65})
    v.push_back(pool_case(kind, 3, 5, w, 3, 3, 2, 2, 1, w % 2, 1, 0, false, include_pad));
  // Wide planes (ResNet's 112 x 112 stem output; 2x2 on 100-wide rows): the stride-2 rows path
  // runs blocks of output rows a column at a time (several blocks per plane).
  v.push_back(pool_case(kind, 2, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, false, include_pad));
  v.push_back(pool_case(kind, 2, 70, 100, 2, 2, 2, 2, 0, 0, 0, 0, false, include_pad));
  // Stride 1 and the other windows of NCHW's rows path (f32 masked loads: 3x3, 2x2, up to 8
  // taps a row looped) and past it (9 taps: the phase scratch).
  for (index_t w : {9, 16, 17, 34})
    v.push_back(pool_case(kind, 2, 6, w, 3, 3, 1, 1, 1, 1, 1, 1, false, include_pad));
  v.push_back(pool_case(kind, 3, 9, 31, 5, 5, 1, 1, 2, 2, 2, 2, false, include_pad));
  v.push_back(pool_case(kind, 2, 15, 40, 7, 7, 2, 2, 3, 3, 3, 3, true, include_pad));
  v.push_back(pool_case(kind, 2, 12, 20, 9, 9, 1, 1, 4, 4, 4, 4, false, include_pad));
  v.push_back(pool_case(kind, 4, 28, 28, 3, 3, 2, 2, 0, 0, 0, 0, true, include_pad));
  v.push_back(pool_case(kind, 3, 33, 33, 3, 3, 1, 1, 1, 1, 1, 1, false, include_pad));
  v.push_back(pool_case(kind, 40, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, false, include_pad));
  v.push_back(pool_case(kind, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, include_pad));
  return v;
}

inline std::vector<kfuse::pool_shape> pool_globals(kfuse::pool_kind kind) {
  return {global_case(kind, 13, 7, 7), global_case(kind, 40, 28, 28, 2), global_case(kind, 3, 1, 1),
          global_case(kind, 70, 33, 33), global_case(kind, 17, 1, 33)};
}

/// The exact pooled value of every output (layout L), in the input's units: max, or the mean
/// of (x - zp) over the window with padding as 0 and PyTorch's divisor, plus zp.
template <class L, class T>
std::vector<double> ref_pool(const kfuse::pool_shape& s, const T* x, double zp) {
  const kfuse::dims4 id = s.in_dims(), od = s.out_dims();
  std::vector<double> out(std::size_t(kfuse::numel(od)));
  const index_t R = s.global ? s.h : s.r, S = s.global ? s.w : s.s;
  for (index_t n = 0; n < s.n; ++n)
    for (index_t c = 0; c < s.c; ++c)
      for (index_t oh = 0; oh < od.h; ++oh)
        for (index_t ow = 0; ow < od.w; ++ow) {
          index_t hs = oh * s.stride_h - s.pad_top, ws = ow * s.stride_w - s.pad_left;
          if (s.global) hs = ws = 0;
          index_t he = std::min(hs + R, s.h + s.pad_bottom),
                  we = std::min(ws + S, s.w + s.pad_right);
          const double pool_size = double((he - hs) * (we - ws));
          hs = std::max<index_t>(hs, 0);
          ws = std::max<index_t>(ws, 0);
          he = std::min(he, s.h);
          we = std::min(we, s.w);
          double mx = -INFINITY, sum = 0;
          bool nan = false;
          for (index_t ih = hs; ih < he; ++ih)
            for (index_t iw = ws; iw < we; ++iw) {
              const double v = conv_value_of(x[kfuse::offset_of<L>(id, n, c, ih, iw)]);
              nan = nan || v != v;
              mx = std::max(mx, v);
              sum += v - zp;
            }
          const double div =
              s.count_include_pad || s.global ? pool_size : double((he - hs) * (we - ws));
          double r = s.kind == kfuse::pool_kind::max ? mx : sum / div + zp;
          if (nan) r = NAN;
          out[std::size_t(kfuse::offset_of<L>(od, n, c, oh, ow))] = r;
        }
  return out;
}

template <class L>
index_t pool_channel_of(const kfuse::dims4& d, index_t i) {
  if constexpr (std::is_same_v<L, kfuse::nchw>)
    return (i / (d.h * d.w)) % d.c;
  else
    return i % d.c;
}

/// Runs pool2d<E, L, test_arch, Ep, B> and checks every output: max exactly (after the
/// epilogue: f32 tolerance), averages within the f32 tolerance (floats) or exactly rounded half
/// to even (integers without an epilogue).
template <class E, class L, class B, class Out, class T, class Ep>
void pool_check(const kfuse::pool_shape& s, const std::vector<T>& x, const Ep& ep,
                std::string_view what, std::int32_t zp = 0) {
  using P = kfuse::pool2d<E, L, test_arch, Ep, B>;
  const kfuse::dims4 od = s.out_dims();
  const index_t n_out = kfuse::numel(od);
  guarded<Out> y(n_out, 0xFF);
  const auto info =
      P::run(kfuse::view<L>(x.data(), s.in_dims()), s, kfuse::view<L>(y.data, od), ep, {}, zp);
  CHECK(info.kernel == "pool2d");
  CHECK(info.arch == test_arch::name);
  REQUIRE(y.guards_intact());
  const auto ref = ref_pool<L>(s, x.data(), double(zp));
  double amax = 0;
  for (const T& v : x) amax = std::max(amax, std::fabs(conv_value_of(v)));
  const double window = double(s.global ? s.h * s.w : s.r * s.s);
  int failures = 0;
  for (index_t i = 0; i < n_out && failures < 5; ++i) {
    const ref_ctx rc{i, pool_channel_of<L>(od, i)};
    double exact = ref_epilogue(ep, ref[std::size_t(i)], rc);
    const double got = conv_value_of(y.data[i]);
    bool ok;
    if (std::isnan(exact)) {
      ok = std::isnan(got);
    } else if constexpr (std::is_integral_v<Out>) {
      exact =
          std::min<double>(std::max<double>(std::nearbyint(exact), std::numeric_limits<Out>::min()),
                           std::numeric_limits<Out>::max());
      ok = got == exact;
    } else {
      const double tol = tolerance<Out>(exact) + 4.0 * window * 0x1p-24 * (amax + std::fabs(zp));
      ok = std::fabs(got - representable<Out>(exact)) <= tol;
    }
    if (!ok && failures++ < 5)
      UNSCOPED_INFO(
          what << " " << L::name << (s.global ? " global" : "") << " C=" << s.c << " H=" << s.h
               << " W=" << s.w << " win " << s.r << "x" << s.s << " stride " << s.stride_h << ","
               << s.stride_w << " pads " << s.pad_top << "," << s.pad_left << "," << s.pad_bottom
               << "," << s.pad_right << (s.ceil_mode ? " ceil" : "")
               << (s.count_include_pad ? " incl" : " excl") << " at " << i << " got " << got
               << " want " << exact << " (" << info.micro_kernel << ", " << info.impl << ")");
  }
  CHECK(failures == 0);
}

}  // namespace kt
