// Compile-time probe: a user TU that builds a small CNN + MLP graph and compiles a plan, with the
// header-only plan compiler (kfuse/graph/compile.hpp) or, with -DKFUSE_CT_RUNTIME, with the
// prebuilt one (kfuse/runtime.hpp, linked from kfuse::runtime).
#include <vector>

#if KFUSE_CT_RUNTIME
#include "kfuse/runtime.hpp"
#else
#include "kfuse/graph/compile.hpp"
#endif

int main() {
  kfuse::graph g;
  auto x = g.input("x", {1, 3, 16, 16}, kfuse::dtype::f32, kfuse::tensor_layout::nhwc);
  const std::vector<float> w(8 * 3 * 9, 0.1f), b(8, 0.f), fc(10 * 8, 0.1f);
  kfuse::conv2d_params p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  auto c = g.relu("r", g.conv2d("c", x, g.constant("w", {8, 3, 3, 3}, w.data()),
                                g.constant("b", {8}, b.data()), p));
  auto pool = g.pool2d("gap", c, {kfuse::pool_mode::global_average});
  auto y = g.linear("fc", g.flatten("f", pool), g.constant("fc_w", {10, 8}, fc.data()));
  g.output(g.softmax("sm", y));
  const kfuse::plan plan = kfuse::compile(g);
  return int(plan.steps().size()) > 0 ? 0 : 1;
}
