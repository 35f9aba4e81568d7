// A consumer of the onnx component: load an ONNX model, compile it with the prebuilt runtime,
// replay it once. Prints "onnx import ok" when the output is finite.
#include <cmath>
#include <cstdio>
#include <vector>

#include "kfuse/onnx/importer.hpp"
#include "kfuse/runtime.hpp"

int main() {
  kfuse::onnx::model m = kfuse::onnx::load(KFUSE_TEST_MODEL);
  kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
  std::vector<std::vector<float>> in, out;
  std::vector<kfuse::binding> ib, ob;
  for (const auto& v : m.inputs) in.emplace_back(std::size_t(kfuse::shape_numel(v.shape)), 0.5f);
  for (const auto& v : m.outputs) out.emplace_back(std::size_t(kfuse::shape_numel(v.shape)), NAN);
  for (auto& v : in) ib.push_back(kfuse::bind(v));
  for (auto& v : out) ob.push_back(kfuse::bind(v));
  kfuse::replay_buffer r = p.record(ib, ob);
  r.replay();
  for (const auto& v : out)
    for (float x : v)
      if (!std::isfinite(x)) return std::puts("onnx import: non-finite output"), 1;
  std::printf("onnx import ok: %zu inputs, %zu outputs\n", m.inputs.size(), m.outputs.size());
  return 0;
}
