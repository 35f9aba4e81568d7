#pragma once
// GGUF tensors -> the kernels' panels (panels.hpp), and single rows of GGUF tensors -> f32 (the
// token embedding lookup, the tests' reference).
#include <cstdint>
#include <string>

#include "kfuse/llm/gguf.hpp"
#include "panels.hpp"

namespace kfuse::llm::detail {

/// Repacks a 2-D weight [rows][cols] (ggml dims {cols, rows}); throws kfuse::error naming the
/// tensor for a type without a panel format. Panels are independent: `parallel_panels(n, fn)`
/// runs fn(p0, p1) over [0, n) (on the load's thread pool); `huge_pages`: allocate_aligned's.
template <class ParallelFor>
panel_matrix pack_matrix(const gguf_tensor& t, ParallelFor&& parallel_panels, bool huge_pages);

/// Row `row` of a 2-D tensor as f32 (every type the loader accepts).
void dequantize_row(const gguf_tensor& t, std::int64_t row, float* out);

/// Whether the loader reads this tensor type, and the panel format it becomes.
bool panel_format_of(std::uint32_t type, panel_format& out);

/// kfuse::error: "tensor 'NAME': type T is not supported (kfuse::llm reads ...)".
[[noreturn]] void throw_unsupported(const gguf_tensor& t);
void pack_panels(const gguf_tensor& t, const panel_matrix& m, std::int64_t p0, std::int64_t p1);
panel_matrix allocate_panels(const gguf_tensor& t, panel_format f, bool huge_pages);

template <class ParallelFor>
panel_matrix pack_matrix(const gguf_tensor& t, ParallelFor&& parallel_panels, bool huge_pages) {
  panel_format f{};
  if (!panel_format_of(t.type, f)) throw_unsupported(t);
  panel_matrix m = allocate_panels(t, f, huge_pages);
  parallel_panels(m.panels, [&](std::int64_t p0, std::int64_t p1) { pack_panels(t, m, p0, p1); });
  return m;
}

}  // namespace kfuse::llm::detail
