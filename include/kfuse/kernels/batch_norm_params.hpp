#pragma once
// batch_norm_params: inference batch-norm statistics and affine, one value per channel, in the
// order of PyTorch's F.batch_norm(x, running_mean, running_var, weight, bias, eps). Used by the
// standalone batch_norm kernel and by fold_batch_norm (into a convolution's weights).
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

}  // namespace kfuse
