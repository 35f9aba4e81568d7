#pragma once
// quantize_weights_per_row: symmetric int8 weights, one scale per output channel, for the int8
// GEMM and convolution (their weights as rows: PyTorch [N, K] or OIHW [K, C/groups * R * S]).
//
//   q[r][i] = clamp(round(w[r][i] / s[r]), -L, L),   s[r] = max_i |w[r][i]| / L
//
// L = 127 (not 128: symmetric, so that -w quantizes to -q), or 63 for the vpmaddubsw kernels of
// archs without vpdpbusd (gemm<i8>::int8_weight_limit). An all-zero row gets s = 1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kfuse/detail/checks.hpp"

KFUSE_BEGIN_NAMESPACE

struct int8_weights {
  std::vector<std::int8_t> values;  // same order as the f32 weights
  std::vector<float> scales;        // one per row: w ~ scales[r] * values[r][i]
};

inline int8_weights quantize_weights_per_row(std::span<const float> w, index_t rows,
                                             int limit = 127) {
  constexpr std::string_view k = "quantize_weights_per_row";
  if (rows <= 0 || w.size() % std::size_t(rows) != 0)
    detail::fail(k, std::to_string(w.size()) + " weights do not split into " +
                        std::to_string(rows) + " rows");
  if (limit < 1 || limit > 127)
    detail::fail(k, "the limit " + std::to_string(limit) + " is outside [1, 127]");
  const float L = float(limit);
  const std::size_t per = w.size() / std::size_t(rows);
  int8_weights q;
  q.values.resize(w.size());
  q.scales.resize(std::size_t(rows));
  for (std::size_t r = 0; r < std::size_t(rows); ++r) {
    const float* row = w.data() + r * per;
    float m = 0.f;
    for (std::size_t i = 0; i < per; ++i) {
      if (!std::isfinite(row[i]))
        detail::fail(k, "row " + std::to_string(r) + " has a NaN or infinite weight");
      m = std::max(m, std::fabs(row[i]));
    }
    const float s = m > 0.f ? m / L : 1.f;
    for (std::size_t i = 0; i < per; ++i)
      q.values[r * per + i] = std::int8_t(std::clamp(std::nearbyint(row[i] / s), -L, L));
    q.scales[r] = s;
  }
  return q;
}

KFUSE_END_NAMESPACE
