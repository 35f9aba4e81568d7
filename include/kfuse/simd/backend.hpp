#pragma once
// Backend tags. A kernel is written once against kfuse::simd::vec<impl>; each backend supplies
// the impl for each arch. The generic arch always uses the scalar impl (one lane, plain C++).
#include <string_view>

namespace kfuse::backend {

/// xsimd 8: sse4_2, fma3<avx2>, avx512bw, neon64 batches.
struct xsimd {
  static constexpr std::string_view name{"xsimd"};
};
/// Highway 1.0 with static dispatch: the target this TU's flags select (HWY_STATIC_TARGET).
struct hwy {
  static constexpr std::string_view name{"hwy"};
};

}  // namespace kfuse::backend
