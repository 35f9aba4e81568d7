// A user's TU on kfuse::runtime, built without any -march flag: it builds a graph and compiles a
// plan without including kfuse/graph/compile.hpp (no kernel is instantiated here), checks the
// plan's result and that the runtime ran the best of its tiers this CPU supports.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kfuse/runtime.hpp"

int main() {
  kfuse::graph g;
  auto x = g.input("x", {2, 3});
  const std::vector<float> w = {1, 0, -1, 0.5f, 0.5f, 0.5f}, b = {0.25f, -10.f};
  auto y = g.relu(
      "act", g.linear("fc", x, g.constant("w", {2, 3}, w.data()), g.constant("b", {2}, b.data())));
  g.output(y);
  const kfuse::plan p = kfuse::compile(g);
  const std::vector<float> in = {1, 2, 3, -1, -2, -3};
  std::vector<float> out(4, -1.f);
  p.record({kfuse::bind(in)}, {kfuse::bind(out)}).replay();
  // row 0: [1 - 3 + 0.25, 3 - 10] -> relu; row 1: [-1 + 3 + 0.25, -3 - 10] -> relu
  const float want[4] = {0.f, 0.f, 2.25f, 0.f};
  for (int i = 0; i < 4; ++i)
    if (std::fabs(out[std::size_t(i)] - want[i]) > 1e-6f) {
      std::printf("runtime_plan: out[%d] = %g, expected %g\n", i, double(out[std::size_t(i)]),
                  double(want[i]));
      return 1;
    }
  const kfuse::runtime_tier_choice& t = kfuse::runtime_tier();
  if (kfuse::compiled_arch() != "generic" || t.runnable.empty() || t.name != t.runnable.front() ||
      p.report().target.arch != t.name || p.report().target.dispatch.find(t.name) != 0) {
    std::printf(
        "runtime_plan: this TU is %s, the runtime chose %s (runs: %zu tiers), the plan "
        "is for %s (dispatch: '%s')\n",
        std::string(kfuse::compiled_arch()).c_str(), t.name.c_str(), t.runnable.size(),
        p.report().target.arch.c_str(), p.report().target.dispatch.c_str());
    return 1;
  }
  std::printf("runtime_plan: %s, plan compiled by kfuse::runtime (dispatch: %s), results match\n",
              p.report().target.text().c_str(), p.report().target.dispatch.c_str());
  return 0;
}
