#pragma once
// batch_norm_params: inference batch-norm statistics and affine, one value per channel, in the
// order of PyTorch's F.batch_norm(x, running_mean, running_var, weight, bias, eps). Used by the
// standalone batch_norm kernel and by fold_batch_norm (into a convolution's weights).
#include <cmath>
#include <cstddef>
#include <span>

namespace kfuse {

/// gamma and beta may be empty (1 and 0).
struct batch_norm_params {
  std::span<const float> mean{};
  std::span<const float> var{};
  std::span<const float> gamma{};
  std::span<const float> beta{};
  float eps = 1e-5f;
};

/// Inference batch norm as a per-channel affine map y = scale[c] * x + shift[c]:
/// scale = gamma / sqrt(var + eps), shift = beta - mean * scale (in double, rounded once). The
/// caller checked the sizes: mean, var, scale and shift hold C values; gamma and beta C or none.
inline void batch_norm_affine(const batch_norm_params& p, std::span<float> scale,
                              std::span<float> shift) {
  for (std::size_t c = 0; c < scale.size(); ++c) {
    const double g = p.gamma.empty() ? 1.0 : double(p.gamma[c]);
    const double s = g / std::sqrt(double(p.var[c]) + double(p.eps));
    scale[c] = float(s);
    shift[c] = float((p.beta.empty() ? 0.0 : double(p.beta[c])) - double(p.mean[c]) * s);
  }
}

}  // namespace kfuse
