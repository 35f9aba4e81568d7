// Compile-time probe: the README's executor snippet (an MLP 784-1024-10: linear, relu, softmax)
// compiled into a plan three ways: every op header-only (kfuse/graph/compile.hpp), only the
// MLP's ops in f32 (-DKFUSE_CT_SELECTIVE: compile<ops<linear, eltwise, softmax>::in<f32>>), or
// linked from kfuse::runtime (-DKFUSE_CT_RUNTIME: kfuse/runtime.hpp).
#include <vector>

#if KFUSE_CT_RUNTIME
#include "kfuse/runtime.hpp"
#else
#include "kfuse/graph/compile.hpp"
#endif

int main() {
  const std::vector<float> w1(1024 * 784, 0.01f), b1(1024, 0.f), w2(10 * 1024, 0.01f);
  kfuse::graph g;
  auto x = g.input("x", {1, 784});
  auto h = g.relu("relu1", g.linear("fc1", x, g.constant("w1", {1024, 784}, w1.data()),
                                    g.constant("b1", {1024}, b1.data())));
  g.output(g.softmax("prob", g.linear("fc2", h, g.constant("w2", {10, 1024}, w2.data()))));
#if KFUSE_CT_SELECTIVE
  using mlp = kfuse::ops<kfuse::op_kind::linear, kfuse::op_kind::eltwise,
                         kfuse::op_kind::softmax>::in<kfuse::precision::f32>;
  const kfuse::plan p = kfuse::compile<mlp>(g, {.threads = 1});
#else
  const kfuse::plan p = kfuse::compile(g, {.threads = 1});
#endif
  std::vector<float> in(784, 1.f), out(10);
  auto r = p.record({kfuse::bind(in)}, {kfuse::bind(out)});
  r.replay();
  float sum = 0;
  for (float v : out) sum += v;
  return sum > 0.99f && sum < 1.01f ? 0 : 1;
}
