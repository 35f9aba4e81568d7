#pragma once
// fold_batch_norm: inference batch norm after a convolution, folded into its weights and bias.
//
//   bn(conv(x, w) + b) = conv(x, w * a) + (b - mean) * a + beta,   a = gamma / sqrt(var + eps)
//
// per output channel k. Run it once before pack(); the conv then takes a `bias` stage with the
// folded bias.
#include <cmath>
#include <span>
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/kernels/batch_norm_params.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"

KFUSE_BEGIN_NAMESPACE

/// Scales OIHW weights [K, C/groups, R, S] in place and writes the folded bias (K values). `bias`
/// holds the conv's own bias on entry (zeros if it had none).
inline void fold_batch_norm(const conv_shape& s, std::span<float> weights_oihw,
                            std::span<float> bias, const batch_norm_params& bn) {
  constexpr std::string_view k = "fold_batch_norm";
  detail::check_conv_shape(k, s);
  auto num = [](std::size_t v) { return std::to_string(v); };
  const std::size_t K = std::size_t(s.k);
  if (weights_oihw.size() != std::size_t(s.weight_count()))
    detail::fail(k, "wrong weight count: " + num(weights_oihw.size()) +
                        " values given, the shape needs K * C/groups * R * S = " +
                        num(std::size_t(s.weight_count())));
  if (bias.size() != K) detail::fail(k, num(bias.size()) + " bias values for K = " + num(K));
  const bool has_gamma = !bn.gamma.empty(), has_beta = !bn.beta.empty();
  if (bn.mean.size() != K || bn.var.size() != K || (has_gamma && bn.gamma.size() != K) ||
      (has_beta && bn.beta.size() != K))
    detail::fail(k, "mean and var (and gamma, beta when given) need K = " + num(K) +
                        " values each (got " + num(bn.mean.size()) + ", " + num(bn.var.size()) +
                        ", " + num(bn.gamma.size()) + ", " + num(bn.beta.size()) + ")");
  if (!(bn.eps >= 0.f)) detail::fail(k, "eps must not be negative");
  detail::check_buffer(k, "weights", weights_oihw.data(), index_t(weights_oihw.size()));
  detail::check_buffer(k, "bias", bias.data(), index_t(K));
  const std::size_t per_k = weights_oihw.size() / K;
  for (std::size_t c = 0; c < K; ++c) {
    if (!(bn.var[c] + bn.eps > 0.f))
      detail::fail(k, "var + eps must be positive (channel " + num(c) + ")");
    const double gamma = has_gamma ? double(bn.gamma[c]) : 1.0;
    const double beta = has_beta ? double(bn.beta[c]) : 0.0;
    const double a = gamma / std::sqrt(double(bn.var[c]) + double(bn.eps));
    for (std::size_t i = 0; i < per_k; ++i)
      weights_oihw[c * per_k + i] = float(double(weights_oihw[c * per_k + i]) * a);
    bias[c] = float((double(bias[c]) - double(bn.mean[c])) * a + beta);
  }
}

KFUSE_END_NAMESPACE
