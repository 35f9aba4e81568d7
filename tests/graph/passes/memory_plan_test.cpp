// The memory plan (graph/passes/memory_plan.hpp) on hand-made plans: tensors live at the same
// time never share arena bytes, whatever the sizes and step order; in-place steps and views
// share their source's storage.
#include "kfuse/graph/passes/memory_plan.hpp"

#include <random>

#include "support/test_support.hpp"

using namespace kfuse;
using detail::plan_command;
using detail::plan_data;

namespace {

std::int32_t add_tensor(plan_data& d, std::size_t bytes, dtype t = dtype::f32) {
  plan_tensor p;
  p.name = "t" + std::to_string(d.tensors.size());
  p.type = t;
  p.shape = {index_t(bytes / dtype_size(t))};
  p.bytes = bytes;
  d.tensors.push_back(p);
  return std::int32_t(d.tensors.size() - 1);
}

void add_step(plan_data& d, op_kind op, std::vector<std::int32_t> in, std::int32_t out) {
  plan_command c;
  for (std::size_t i = 0; i < in.size(); ++i) c.in[i] = in[i];
  c.out = out;
  step_info s;
  s.op = op;
  d.steps.push_back(s);
  d.commands.push_back({c});
}

/// Every pair of arena tensors live in a common step occupies disjoint bytes.
void check_disjoint_when_live(const plan_data& d) {
  const int n = int(d.steps.size());
  std::vector<int> first(d.tensors.size(), n), last(d.tensors.size(), -1);
  for (int si = 0; si < n; ++si)
    for (const plan_command& c : d.commands[std::size_t(si)])
      for (std::int32_t t : {c.in[0], c.in[1], c.in[2], c.in[3], c.out}) {
        if (t < 0) continue;
        const auto r = std::size_t(detail::root_of(d, t));
        first[r] = std::min(first[r], si);
        last[r] = std::max(last[r], si);
      }
  for (std::size_t a = 0; a < d.tensors.size(); ++a)
    for (std::size_t b = a + 1; b < d.tensors.size(); ++b) {
      const plan_tensor &ta = d.tensors[a], &tb = d.tensors[b];
      if (ta.where != plan_tensor::storage::arena || tb.where != plan_tensor::storage::arena)
        continue;
      if (ta.root >= 0 || tb.root >= 0) continue;
      if (last[a] < first[b] || last[b] < first[a]) continue;
      CAPTURE(a, b, ta.offset, ta.bytes, tb.offset, tb.bytes);
      CHECK((ta.offset + ta.bytes <= tb.offset || tb.offset + tb.bytes <= ta.offset));
    }
  for (const plan_tensor& t : d.tensors)
    if (t.where == plan_tensor::storage::arena) CHECK(t.offset + t.bytes <= d.arena_bytes);
}

}  // namespace

TEST_CASE("memory plan: a chain reuses the arena, outputs go to the caller") {
  plan_data d;
  const auto x = add_tensor(d, 4000);
  d.tensors[std::size_t(x)].where = plan_tensor::storage::input;
  const auto t1 = add_tensor(d, 4000), t2 = add_tensor(d, 4000), t3 = add_tensor(d, 4000);
  const auto y = add_tensor(d, 4000);
  d.inputs = {x};
  d.outputs = {y};
  add_step(d, op_kind::linear, {x}, t1);
  add_step(d, op_kind::linear, {t1}, t2);
  add_step(d, op_kind::linear, {t2}, t3);
  add_step(d, op_kind::linear, {t3}, y);
  detail::plan_memory(d, {});
  CHECK(d.tensors[std::size_t(y)].where == plan_tensor::storage::output);
  CHECK(d.tensors[std::size_t(t1)].where == plan_tensor::storage::arena);
  // Two tensors live at a time: t3 reuses t1's bytes.
  CHECK(d.arena_bytes == 2 * 4032);
  CHECK(d.tensors[std::size_t(t3)].offset == d.tensors[std::size_t(t1)].offset);
  CHECK(d.intermediate_bytes == 3 * 4000);
  check_disjoint_when_live(d);
}

TEST_CASE("memory plan: an eltwise step writes over an input that dies there") {
  plan_data d;
  const auto x = add_tensor(d, 256);
  d.tensors[std::size_t(x)].where = plan_tensor::storage::input;
  const auto t1 = add_tensor(d, 256), t2 = add_tensor(d, 256), y = add_tensor(d, 256);
  d.inputs = {x};
  d.outputs = {y};
  add_step(d, op_kind::linear, {x}, t1);
  add_step(d, op_kind::eltwise, {t1}, t2);
  add_step(d, op_kind::linear, {t2}, y);
  detail::plan_memory(d, {});
  CHECK(d.tensors[std::size_t(t2)].root == t1);
  CHECK(d.tensors[std::size_t(t2)].offset == d.tensors[std::size_t(t1)].offset);
  CHECK(d.arena_bytes == 256);
}

TEST_CASE("memory plan: a view shares its source, a view that is an output moves the source") {
  plan_data d;
  const auto x = add_tensor(d, 512);
  d.tensors[std::size_t(x)].where = plan_tensor::storage::input;
  const auto t1 = add_tensor(d, 512), v = add_tensor(d, 512);
  d.inputs = {x};
  d.outputs = {v};
  add_step(d, op_kind::linear, {x}, t1);
  d.tensors[std::size_t(v)].root = t1;
  add_step(d, op_kind::reshape, {t1}, v);  // the copy command lowering keeps for a view
  detail::plan_memory(d, {1});
  CHECK(d.commands[1].empty());  // no copy: t1 is written straight into the output buffer
  CHECK(d.tensors[std::size_t(t1)].where == plan_tensor::storage::output);
  CHECK(d.steps[1].kernel == "view");
  CHECK(d.arena_bytes == 0);
}

TEST_CASE("memory plan: random DAGs never overlap live tensors") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    plan_data d;
    const auto x = add_tensor(d, 64);
    d.tensors[std::size_t(x)].where = plan_tensor::storage::input;
    d.inputs = {x};
    std::vector<std::int32_t> made = {x};
    const int steps = 2 + int(rng() % 12);
    for (int s = 0; s < steps; ++s) {
      const auto out = add_tensor(d, 4 * (1 + rng() % 300));
      std::vector<std::int32_t> in;
      const int k = 1 + int(rng() % 3);
      for (int i = 0; i < k; ++i) in.push_back(made[rng() % made.size()]);
      add_step(d, rng() % 2 ? op_kind::eltwise : op_kind::linear, in, out);
      made.push_back(out);
    }
    d.outputs = {made.back()};
    detail::plan_memory(d, {});
    CAPTURE(trial);
    check_disjoint_when_live(d);
    CHECK(d.arena_bytes <= (d.intermediate_bytes + 63 * d.tensors.size()));
  }
}

TEST_CASE("memory plan: kernel workspaces follow the tensors, one slice per command") {
  plan_data d;
  const auto x = add_tensor(d, 4000);
  d.tensors[std::size_t(x)].where = plan_tensor::storage::input;
  const auto t1 = add_tensor(d, 4000), t2 = add_tensor(d, 100), y = add_tensor(d, 4000);
  d.inputs = {x};
  d.outputs = {y};
  add_step(d, op_kind::conv2d, {x}, t1);
  add_step(d, op_kind::pool2d, {t1}, t2);
  add_step(d, op_kind::conv2d, {t2}, y);
  d.commands[0][0].workspace_bytes = 1000;  // rounded up to 1024
  d.commands[2][0].workspace_bytes = 64;
  detail::plan_memory(d, {});
  const std::size_t tensors_end = 4032 + 128;  // t1 and t2 live together at step 1
  CHECK(d.workspace_bytes == 1024 + 64);
  CHECK(d.arena_bytes == tensors_end + 1024 + 64);
  CHECK(d.commands[0][0].workspace_offset == tensors_end);
  CHECK(d.commands[2][0].workspace_offset == tensors_end + 1024);
  CHECK(d.commands[1][0].workspace_bytes == 0);
  for (const auto& cmds : d.commands)
    for (const plan_command& c : cmds) CHECK(c.workspace_offset % 64 == 0);
  check_disjoint_when_live(d);
}
