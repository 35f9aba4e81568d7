#pragma once
// Shared helpers of the pass tests: a graph run through the arch-independent passes only
// (detail::analyze: checks, inference, steps, fusion, quantize absorption), so the tests see the
// steps without instantiating any kernel.
#include <string>
#include <vector>

#include "kfuse/graph/compile.hpp"

namespace passes_test {

using namespace kfuse;

inline std::vector<float> filled(std::size_t n, float v = 0.25f) {
  return std::vector<float>(n, v);
}

/// The analyzed graph: its live steps and fusion report.
struct analyzed {
  detail::compile_context cx;
  analyzed(const graph& g, compile_options opt = {}, bool int8_gemm = true) : cx(g, opt) {
    cx.int8_gemm = int8_gemm;
    detail::analyze(cx);
  }
  std::vector<const detail::step*> live() const {
    std::vector<const detail::step*> r;
    for (const detail::step& s : cx.steps)
      if (s.alive) r.push_back(&s);
    return r;
  }
  const detail::step& step_of(const std::string& node) const {
    for (const detail::step& s : cx.steps)
      if (s.alive && cx.node_of(s).name == node) return s;
    throw std::runtime_error("no live step for node " + node);
  }
  std::vector<stage_kind> chain(const std::string& node) const {
    std::vector<stage_kind> r;
    for (const detail::op_stage& s : step_of(node).chain) r.push_back(s.kind);
    return r;
  }
  const plan_tensor& tensor(std::int32_t id) const { return cx.T(id); }
};

}  // namespace passes_test
