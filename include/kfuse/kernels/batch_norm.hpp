#pragma once
// batch_norm (inference): y = epilogue(gamma[c] * (x - mean[c]) / sqrt(var[c] + eps) + beta[c])
// over a 4-D tensor in nchw or nhwc, any float storage in, any output the epilogue allows.
//
//   kfuse::batch_norm(kfuse::view<kfuse::nchw>(x, d), kfuse::view<kfuse::nchw>(y, d),
//                     {mean, var, gamma, beta, 1e-5f}, kfuse::epilogue<kfuse::relu>{{}});
//
// Folded at the call into one multiply-add per element, scale[c] = gamma / sqrt(var + eps) and
// shift[c] = beta - mean * scale (in double, rounded once), and run by the eltwise machinery as
// its first stage, so the user's stages (relu, a residual add, quantize ...) fuse into the same
// single pass: per-channel broadcasts on NCHW rows, per-lane channel vectors on NHWC rows.
// (To fold batch norm into a preceding convolution's weights instead, use the conv helpers.)
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/batch_norm_params.hpp"
#include "kfuse/kernels/eltwise.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"

namespace kfuse {

namespace detail {
/// The folded batch norm as an epilogue stage: y = x * scale[c] + shift[c].
struct batch_norm_affine {
  static constexpr std::string_view name{"batch_norm"};
  static constexpr bool needs_channel = true;
  const float* scale = nullptr;
  const float* shift = nullptr;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return simd::fma(x, ctx.channel_param(scale), ctx.channel_param(shift));
  }
};
}  // namespace detail

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

inline void check_batch_norm_params(const batch_norm_params& p, index_t channels) {
  constexpr std::string_view k = "batch_norm";
  auto count = [&](std::span<const float> s, const char* what, bool optional) {
    if (optional && s.empty()) return;
    check_buffer(k, what, s.data(), index_t(s.size()));
    if (index_t(s.size()) != channels)
      fail(k, std::string(what) + " has " + std::to_string(s.size()) + " values for " +
                  std::to_string(channels) + " channels");
  };
  count(p.mean, "mean", false);
  count(p.var, "var", false);
  count(p.gamma, "gamma", true);
  count(p.beta, "beta", true);
  if (!(p.eps > 0.f) || !std::isfinite(p.eps))
    fail(k, "eps must be positive and finite, not " + std::to_string(p.eps));
  for (index_t c = 0; c < channels; ++c)
    if (!(p.var[std::size_t(c)] >= 0.f))
      fail(k, "variance of channel " + std::to_string(c) + " is negative or NaN (" +
                  std::to_string(p.var[std::size_t(c)]) + ")");
}

}  // namespace detail

template <class A = arch::native, class B = backend::xsimd, class In, class Out, layout_tag L,
          class... S>
run_info batch_norm(tensor_view<In, L> in, tensor_view<Out, L> out, const batch_norm_params& p,
                    const epilogue<S...>& ep = {}, const run_options& opt = {}) {
  using InT = std::remove_const_t<In>;
  static_assert(
      std::is_same_v<InT, float> || std::is_same_v<InT, bf16_t> || std::is_same_v<InT, f16_t>,
      "kfuse::batch_norm: the input must be a float storage type (float, bf16_t, f16_t)");
  using Full = epilogue<detail::batch_norm_affine, S...>;
  detail::check_eltwise_output_type<Full, Out>();
  constexpr std::string_view k = "batch_norm";
  if (!(in.dims == out.dims)) detail::fail(k, "input and output shapes differ");
  const dims4& d = in.dims;
  const index_t n = detail::checked_count(k, "the tensor", {d.n, d.c, d.h, d.w});
  const InT* x = in.data;
  detail::check_buffer(k, "input", x, n);
  detail::check_buffer(k, "output", out.data, n);
  detail::check_overlap(k, x, n, out.data, n);
  detail::check_batch_norm_params(p, d.c);
  validate(ep, k, n, d.c, out.data, sizeof(*out.data) * std::size_t(n), sizeof(*out.data));
  if (n == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};
  std::vector<float> folded(2 * std::size_t(d.c));
  float* scale = folded.data();
  float* shift = scale + d.c;
  batch_norm_affine(p, {scale, std::size_t(d.c)}, {shift, std::size_t(d.c)});
  const Full full = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return Full(detail::batch_norm_affine{scale, shift}, detail::stage_at<I>(ep.stages)...);
  }
  (std::index_sequence_for<S...>{});
  run_info r =
      std::is_same_v<L, nhwc>
          ? detail::eltwise_rows<A, B>(x, out.data, n / d.c, d.c, d.c, true, full, opt)
          : detail::eltwise_rows<A, B>(x, out.data, d.n * d.c, d.h * d.w, d.c, false, full, opt);
  r.kernel = k;
  r.micro_kernel = "eltwise, folded per-channel fma";
  return r;
}

KFUSE_END_NAMESPACE
