#pragma once
// conv_transpose2d<Arch>: the transposed (fractionally strided) 2-D convolution of NHWC f32
// images, as ONNX's ConvTranspose and PyTorch's ConvTranspose2d define it (weights
// [C, K / groups, R, S], output size given: ONNX's output_padding / output_shape decide it).
//
//   using ct = kfuse::conv_transpose2d<kfuse::arch::native>;
//   const auto p = ct::initialize(shape, weights_ckrs, bias);           // once (bias may be null)
//   kfuse::workspace_buffer ws(ct::workspace_size(shape, threads));
//   ct::run(kfuse::view<kfuse::nhwc>(x, shape.in_dims()), p,
//           kfuse::view<kfuse::nhwc>(y, shape.out_dims()), {}, ws, {threads});
//
// GEMM + col2im, as ONNX Runtime and oneDNN's reference do it, but banded: every input pixel's
// contribution to all R x S taps is one GEMM row, [pixels, C/g] x [C/g, R*S*K/g] on the gemm
// micro-kernels (columns ordered (r, s, k), so a tap's K channels are one contiguous run), into a
// per-thread scratch block that stays in L2; the block is then added into the output pixels its
// taps land on. A thread owns a band of output rows and computes the input rows that reach it
// (where windows overlap, R > stride, the rows at a band's edges are computed by both
// neighbours), so no two threads add into one pixel and the result does not depend on the
// thread count. The output starts as the bias: with output padding or R < stride, some pixels
// receive no tap at all.
#include <algorithm>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/kernels/window_checks.hpp"
#include "kfuse/kernels/workspace.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/conv_geometry.hpp"

namespace kfuse {  // plain data, shared by every arch's TUs

/// The extents and the window (conv_geometry, as conv2d's; pad_bottom / pad_right are unused:
/// out_h / out_w place the far edge).
struct conv_transpose_shape : conv_geometry {
  index_t n = 1, c = 1, h = 1, w = 1;  // input (logical N, C, H, W)
  index_t k = 1, r = 1, s = 1;         // output channels, window
  index_t out_h = 1, out_w = 1;        // given: ONNX's output_padding / output_shape decide them
  /// The output extent without output padding: (in - 1) * stride - pads + dil * (k - 1) + 1.
  static index_t natural(index_t in, index_t stride, index_t dil, index_t win, index_t pads) {
    return (in - 1) * stride - pads + dil * (win - 1) + 1;
  }
  constexpr dims4 in_dims() const noexcept { return {n, c, h, w}; }
  constexpr dims4 out_dims() const noexcept { return {n, k, out_h, out_w}; }
  /// Multiply-adds of the GEMM (every tap of every input pixel, landing or not), x 2.
  double flops() const noexcept {
    return 2.0 * double(n * h * w) * double(c / groups) * double(k * r * s);
  }
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {
inline void check_conv_transpose_shape(const conv_transpose_shape& s) {
  constexpr std::string_view k = "conv_transpose2d";
  auto num = [](index_t v) { return std::to_string(v); };
  for (index_t v : {s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dilation_h,
                    s.dilation_w, s.groups, s.out_h, s.out_w})
    if (v < 1) fail(k, "extents, strides, dilations and groups must be >= 1");
  if (s.n < 0) fail(k, "negative batch");
  if (s.pad_top < 0 || s.pad_left < 0) fail(k, "padding must not be negative");
  if (s.c % s.groups || s.k % s.groups)
    fail(k, "channels " + num(s.c) + " -> " + num(s.k) + " do not divide into " + num(s.groups) +
                " groups");
  const index_t cols = checked_mul(k, "the GEMM's columns K/groups x R x S",
                                   checked_mul(k, "R x S", s.r, s.s), s.k / s.groups);
  (void)checked_mul(k, "the weights", cols, s.c);
  (void)checked_mul(k, "the input", checked_mul(k, "the input", s.n, s.h * s.w), s.c);
  (void)checked_mul(k, "the output",
                    checked_mul(k, "the output", s.n, checked_mul(k, "OH x OW", s.out_h, s.out_w)),
                    s.k);
}
}  // namespace detail

template <class A = arch::native, class B = backend::xsimd>
struct conv_transpose2d : image_kernel_types<nhwc, epilogue<>> {
  using gemm_type = gemm<f32, A, epilogue<>, B>;

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  static constexpr std::string_view name = "conv_transpose2d";
  using problem = conv_transpose_shape;
  struct packed {
    conv_transpose_shape shape{};
    std::vector<typename gemm_type::weights> groups;  // per group: [C/g, R*S*K/g], cols (r, s, k)
    std::vector<float> bias;                          // K values, or empty
    bool empty() const noexcept { return groups.empty(); }
  };

  static kernel_status can_implement(const conv_transpose_shape& s) {
    return detail::status_of(name, [&] { detail::check_conv_transpose_shape(s); });
  }
  /// One scratch block of GEMM rows per thread.
  static std::size_t workspace_size(const conv_transpose_shape& s, int threads) {
    detail::require(name, can_implement(s));
    return workspace_slots_bytes(threads, slot_bytes(s));
  }
  /// Packs weights [C, K / groups, R, S] (and copies the bias, K values, when given).
  static packed initialize(const conv_transpose_shape& s, const float* w, const float* bias) {
    detail::require(name, can_implement(s));
    const index_t cg = s.c / s.groups, kg = s.k / s.groups, cols = s.r * s.s * kg;
    detail::check_buffer(name, "weights", w, s.c * kg * s.r * s.s);
    packed p;
    p.shape = s;
    std::vector<float> b(std::size_t(cg * cols));
    for (index_t g = 0; g < s.groups; ++g) {
      for (index_t ci = 0; ci < cg; ++ci)
        for (index_t ko = 0; ko < kg; ++ko)
          for (index_t t = 0; t < s.r * s.s; ++t)
            b[std::size_t(ci * cols + t * kg + ko)] =
                w[std::size_t(((g * cg + ci) * kg + ko) * s.r * s.s + t)];
      p.groups.push_back(gemm_type::pack(b.data(), cg, cols, b_layout::kn));
    }
    if (bias) {
      detail::check_buffer(name, "bias", bias, s.k);
      p.bias.assign(bias, bias + s.k);
    }
    return p;
  }

  /// y = conv_transpose(x) + bias. Scratch from `ws` (workspace_size() of the shape with x's
  /// batch); allocates nothing.
  static run_info run(tensor_view<const float, nhwc> x, const packed& p, tensor_view<float, nhwc> y,
                      const epilogue<>& = {}, workspace ws = {}, const run_options& opt = {},
                      std::int32_t x_zero_point = 0) {
    if (p.empty()) detail::fail(name, "packed weights are empty");
    if (x_zero_point != 0) detail::fail(name, "a zero point is only meaningful for int8 kernels");
    conv_transpose_shape s = p.shape;
    s.n = x.dims.n;
    detail::check_conv_transpose_shape(s);
    if (!(x.dims == s.in_dims()))
      detail::fail(name, "the input is not N x C x H x W = " + std::to_string(s.n) + " x " +
                             std::to_string(s.c) + " x " + std::to_string(s.h) + " x " +
                             std::to_string(s.w) + " (the packed weights' shape)");
    if (!(y.dims == s.out_dims()))
      detail::fail(name, "the output is not N x K x OH x OW = " + std::to_string(s.n) + " x " +
                             std::to_string(s.k) + " x " + std::to_string(s.out_h) + " x " +
                             std::to_string(s.out_w));
    const index_t n_in = numel(x.dims), n_out = numel(y.dims);
    detail::check_buffer(name, "input", x.data, n_in);
    detail::check_buffer(name, "output", y.data, n_out);
    detail::check_disjoint(name, "input", x.data, n_in, y.data, n_out);
    run_info info{name, A::name, simd::impl_name<A, B>(), gemm_type::micro_kernel(), 1};
    if (n_out == 0) return info;
    const std::size_t slot = slot_bytes(s);
    const index_t rows = s.n * s.out_h;
    const int threads = int(std::min<index_t>(
        detail::workspace_threads(name, ws, slot, pool_threads(opt.threads, "conv_transpose2d")),
        rows));
    info.threads = threads;
    auto band = [&](range r, int worker) {
      float* scratch = ws.slot<float>(worker, slot);
      // A band never crosses an image: split it at image boundaries.
      for (index_t r0 = r.begin; r0 < r.end;) {
        const index_t img = r0 / s.out_h, r1 = std::min(r.end, (img + 1) * s.out_h);
        rows_of_image(x.data, p, y.data, s, img, r0 - img * s.out_h, r1 - img * s.out_h, scratch);
        r0 = r1;
      }
    };
    if (threads <= 1)
      band(range{0, rows}, 0);
    else
      parallel_for(0, rows, (rows + threads - 1) / threads, band, threads);
    return info;
  }

 private:
  static index_t columns(const conv_transpose_shape& s) { return s.r * s.s * (s.k / s.groups); }
  /// Input pixels per scratch block: about 128 KiB of GEMM rows (L2-resident), at least 8.
  static index_t block_pixels(const conv_transpose_shape& s) {
    const index_t want = std::max<index_t>(8, (index_t(128) << 10) / (columns(s) * 4));
    return std::min(want, s.h * s.w);
  }
  static std::size_t slot_bytes(const conv_transpose_shape& s) {
    return workspace_round(std::size_t(block_pixels(s) * columns(s)) * sizeof(float));
  }

  /// Output rows [oh0, oh1) of image n.
  static void rows_of_image(const float* x, const packed& p, float* y,
                            const conv_transpose_shape& s, index_t n, index_t oh0, index_t oh1,
                            float* scratch) {
    const index_t cg = s.c / s.groups, kg = s.k / s.groups, cols = columns(s);
    float* out = y + n * s.out_h * s.out_w * s.k;
    for (index_t oh = oh0; oh < oh1; ++oh)
      for (index_t ow = 0; ow < s.out_w; ++ow) {
        float* o = out + (oh * s.out_w + ow) * s.k;
        if (p.bias.empty())
          std::fill(o, o + s.k, 0.f);
        else
          std::copy(p.bias.begin(), p.bias.end(), o);
      }
    // Input rows whose taps reach [oh0, oh1): oh = ih * stride - pad + rr * dil, rr in [0, R).
    const index_t reach = (s.r - 1) * s.dilation_h;
    const index_t ih0 = std::max<index_t>(0, ceil_div(oh0 + s.pad_top - reach, s.stride_h));
    const index_t ih1 = std::min<index_t>(s.h, floor_div(oh1 - 1 + s.pad_top, s.stride_h) + 1);
    if (ih0 >= ih1) return;
    const index_t px0 = ih0 * s.w, px1 = ih1 * s.w, block = block_pixels(s);
    const float* xi = x + n * s.h * s.w * s.c;
    for (index_t b0 = px0; b0 < px1; b0 += block) {
      const index_t m = std::min(block, px1 - b0);
      for (index_t g = 0; g < s.groups; ++g) {
        gemm_type::run(xi + b0 * s.c + g * cg, m, s.c, p.groups[std::size_t(g)], scratch, cols, {},
                       run_options{1});
        for (index_t i = 0; i < m; ++i) {
          const index_t ih = (b0 + i) / s.w, iw = (b0 + i) % s.w;
          const float* src = scratch + i * cols;
          // The taps landing in rows [oh0, oh1) and columns [0, out_w).
          const index_t oh_base = ih * s.stride_h - s.pad_top,
                        ow_base = iw * s.stride_w - s.pad_left;
          index_t r0, r1, s0, s1;
          detail::valid_taps(oh_base - oh0, s.dilation_h, s.r, oh1 - oh0, r0, r1);
          detail::valid_taps(ow_base, s.dilation_w, s.s, s.out_w, s0, s1);
          for (index_t rr = r0; rr < r1; ++rr) {
            const index_t oh = oh_base + rr * s.dilation_h;
            for (index_t ss = s0; ss < s1; ++ss) {
              const index_t ow = ow_base + ss * s.dilation_w;
              add_run(out + (oh * s.out_w + ow) * s.k + g * kg, src + (rr * s.s + ss) * kg, kg);
            }
          }
        }
      }
    }
  }

  /// o[0, n) += v[0, n).
  static void add_run(float* KFUSE_RESTRICT o, const float* KFUSE_RESTRICT v, index_t n) {
    using vec = simd::vec_for<A, B>;
    constexpr index_t L = vec::lanes;
    index_t i = 0;
    for (; i + L <= n; i += L) simd::store(o + i, simd::load<vec>(o + i) + simd::load<vec>(v + i));
    for (; i < n; ++i) o[i] += v[i];
  }
  static index_t floor_div(index_t a, index_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
  static index_t ceil_div(index_t a, index_t b) { return -floor_div(-a, b); }
};

KFUSE_END_NAMESPACE
