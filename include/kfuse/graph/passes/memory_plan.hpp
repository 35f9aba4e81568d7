#pragma once
// Memory planning, the last pass: where every tensor of a lowered plan lives (caller's input /
// output buffers, constants, views of another tensor, the one activation arena) and the arena's
// size. Arena tensors are placed by liveness with greedy best fit; the kernels' workspaces follow
// them, one slice per command.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kfuse/detail/checks.hpp"
#include "kfuse/graph/plan.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The tensor whose storage t shares (t itself when it has its own).
inline std::int32_t root_of(const plan_data& d, std::int32_t t) {
  while (d.tensors[std::size_t(t)].root >= 0 && d.tensors[std::size_t(t)].root != t)
    t = d.tensors[std::size_t(t)].root;
  return t;
}

/// The memory plan of a lowered plan: graph outputs in the caller's buffers, views aliasing
/// their source (`views`: the steps that are views), eltwise steps in place over an input that
/// dies there, and every other intermediate in one arena, placed by liveness.
inline void plan_memory(plan_data& d, const std::vector<std::int32_t>& views) {
  auto& ts = d.tensors;
  const int n_steps = int(d.steps.size());
  // Graph outputs live in the caller's buffers.
  for (std::size_t k = 0; k < d.outputs.size(); ++k) {
    plan_tensor& o = ts[std::size_t(d.outputs[k])];
    o.where = plan_tensor::storage::output;
    o.index = std::int32_t(k);
  }
  // Views alias their source. A view that is a graph output moves its source into the
  // output buffer when the source is a plain intermediate; otherwise its copy command stays.
  for (std::int32_t si : views) {
    plan_command& c = d.commands[std::size_t(si)][0];
    plan_tensor& v = ts[std::size_t(c.out)];
    plan_tensor& src = ts[std::size_t(c.in[0])];
    bool copy = false;
    if (v.where == plan_tensor::storage::output) {
      if (src.where == plan_tensor::storage::none && src.root < 0) {
        src.where = plan_tensor::storage::output;
        src.index = v.index;
        src.offset = 0;
      } else {
        copy = true;
        v.root = -1;
      }
    }
    if (!copy) d.commands[std::size_t(si)].clear();
    d.steps[std::size_t(si)].kernel = copy ? "copy (reshape into an output)" : "view";
  }
  // Liveness over roots: the first step writing a root, the last step touching it.
  std::vector<int> last_use(ts.size()), first_def(ts.size());
  auto mark = [&] {
    std::fill(last_use.begin(), last_use.end(), -1);
    std::fill(first_def.begin(), first_def.end(), n_steps);
    for (int si = 0; si < n_steps; ++si)
      for (const plan_command& c : d.commands[std::size_t(si)]) {
        for (std::int32_t i : c.in)
          if (i >= 0) last_use[std::size_t(root_of(d, i))] = si;
        if (c.out >= 0) {
          const auto r = std::size_t(root_of(d, c.out));
          first_def[r] = std::min(first_def[r], si);
          last_use[r] = std::max(last_use[r], si);
        }
      }
  };
  mark();
  // In place: an eltwise step whose input (an intermediate) dies there writes over it.
  std::vector<char> in_place(ts.size(), 0);
  for (int si = 0; si < n_steps; ++si) {
    if (d.commands[std::size_t(si)].size() != 1 || d.steps[std::size_t(si)].op != op_kind::eltwise)
      continue;
    const plan_command& c = d.commands[std::size_t(si)][0];
    const std::int32_t xr = root_of(d, c.in[0]);
    plan_tensor& o = ts[std::size_t(c.out)];
    const plan_tensor& x = ts[std::size_t(xr)];
    if (o.where != plan_tensor::storage::none || x.where != plan_tensor::storage::none) continue;
    if (ts[std::size_t(c.in[0])].bytes != o.bytes || x.type != o.type) continue;
    if (last_use[std::size_t(xr)] != si) continue;
    bool operand = false;
    for (int k = 1; k < 4; ++k) operand = operand || (c.in[k] >= 0 && root_of(d, c.in[k]) == xr);
    if (operand) continue;
    o.root = xr;
    in_place[std::size_t(c.out)] = 1;
    mark();
  }
  // The arena: every intermediate root, placed by liveness with greedy best fit (largest
  // first; the smallest gap between blocks live at the same time that fits, else the end).
  struct item {
    std::int32_t t;
    std::size_t size;
    int first, last;
  };
  std::vector<item> items;
  std::size_t sum = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].where != plan_tensor::storage::none || root_of(d, std::int32_t(i)) != std::int32_t(i))
      continue;
    if (last_use[i] < 0) continue;  // never touched by a command (fused away, unused)
    ts[i].where = plan_tensor::storage::arena;
    items.push_back({std::int32_t(i), (ts[i].bytes + 63) / 64 * 64, first_def[i], last_use[i]});
    sum += ts[i].bytes;
  }
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (in_place[i]) sum += ts[i].bytes;  // without reuse it would be a tensor of its own
  std::stable_sort(items.begin(), items.end(),
                   [](const item& a, const item& b) { return a.size > b.size; });
  struct placed {
    std::size_t off, size;
    int first, last;
  };
  std::vector<placed> done;
  std::size_t arena = 0;
  for (const item& it : items) {
    std::vector<std::pair<std::size_t, std::size_t>> busy;
    for (const placed& p : done)
      if (!(p.last < it.first || it.last < p.first)) busy.push_back({p.off, p.off + p.size});
    std::sort(busy.begin(), busy.end());
    std::size_t best = SIZE_MAX, best_gap = SIZE_MAX, at = 0;
    for (const auto& b : busy) {
      if (b.first > at && b.first - at >= it.size && b.first - at < best_gap) {
        best = at;
        best_gap = b.first - at;
      }
      at = std::max(at, b.second);
    }
    if (best == SIZE_MAX) best = at;
    // Each tensor's size was checked; their placement in one arena is checked here.
    detail::checked_add("graph", "the activation arena (bytes)", index_t(best), index_t(it.size));
    ts[std::size_t(it.t)].offset = best;
    done.push_back({best, it.size, it.first, it.last});
    arena = std::max(arena, best + it.size);
  }
  // Views and in-place outputs take their root's storage.
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const std::int32_t r = root_of(d, std::int32_t(i));
    if (r == std::int32_t(i)) {
      ts[i].root = -1;
      continue;
    }
    ts[i].where = ts[std::size_t(r)].where;
    ts[i].index = ts[std::size_t(r)].index;
    ts[i].offset = ts[std::size_t(r)].offset;
    ts[i].data = ts[std::size_t(r)].data;
    ts[i].root = r;
  }
  // Kernel workspaces (kernels/workspace.hpp) after the tensors, one slice per command: a
  // kernel may keep state in its slice between replays (depthwise's padded rows), so no two
  // commands share one.
  arena = (arena + 63) / 64 * 64;
  std::size_t scratch = 0;
  for (auto& cmds : d.commands)
    for (plan_command& c : cmds) {
      if (c.workspace_bytes == 0) continue;
      c.workspace_offset = arena + scratch;
      scratch += (c.workspace_bytes + 63) / 64 * 64;
      detail::checked_add("graph", "the activation arena (bytes)", index_t(arena),
                          index_t(scratch));
    }
  d.arena_bytes = arena + scratch;
  d.workspace_bytes = scratch;
  d.intermediate_bytes = sum;
}

}  // namespace detail

KFUSE_END_NAMESPACE
