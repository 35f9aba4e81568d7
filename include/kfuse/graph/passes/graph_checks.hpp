#pragma once
// The first passes of compile(): the graph's tensors copied into the plan (which owns its
// constants), names and quant params checked, node inputs resolved, nodes put in topological
// order (a cycle is an error naming a node on it), and the graph's inputs and outputs checked.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "kfuse/graph/compiler/context.hpp"
#include "kfuse/graph/ops/registry.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Names identify nodes and tensors in every error, report and profile: they must be unique
/// (a node's output tensor carries the node's name). Quant params must be usable: a positive
/// finite scale and a zero point inside the tensor's integer range.
inline void check_names_and_quant(const graph& g) {
  std::unordered_map<std::string_view, const char*> seen;
  for (const tensor_desc& td : g.tensors()) {
    const char* what = td.is_input ? "an input" : td.is_constant ? "a constant" : "a node";
    if (td.name.empty()) fail("graph", std::string(what) + " has an empty name");
    const auto [it, fresh] = seen.emplace(td.name, what);
    if (!fresh)
      fail("graph", "duplicate name '" + td.name + "': " + it->second + " and " + what +
                        " (names must be unique)");
    if (!td.has_quant) continue;
    const tensor_quant& q = td.quant;
    const std::int32_t lo = td.type == dtype::u8 ? 0 : -128;
    const std::int32_t hi = td.type == dtype::i8 ? 127 : 255;
    if (!(q.scale > 0.f) || !std::isfinite(q.scale))
      fail("graph", "tensor '" + td.name + "': quant scale must be positive and finite, not " +
                        std::to_string(q.scale));
    if (q.zero_point < lo || q.zero_point > hi)
      fail("graph", "tensor '" + td.name + "': quant zero point " + std::to_string(q.zero_point) +
                        " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                        (td.type == dtype::i8 || td.type == dtype::u8
                             ? " (" + std::string(dtype_name(td.type)) + ")"
                             : ""));
  }
}

/// The plan's tensors: a copy of the graph's, constants owned by the plan.
inline void copy_tensors(compile_context& cx) {
  const auto& ts = cx.g.tensors();
  // Lowering adds tensors (converted inputs, folded constants) while it holds references.
  cx.d->tensors.reserve(ts.size() * 2);
  for (const tensor_desc& td : ts) {
    plan_tensor t;
    t.name = td.name;
    t.shape = td.shape;
    t.type = td.type;
    t.layout = td.layout;
    t.has_quant = td.has_quant;
    t.quant = td.quant;
    if (td.is_constant) t.where = plan_tensor::storage::constant;
    t.bytes = cx.tensor_bytes(t.name, t.shape, t.type);
    cx.d->tensors.push_back(std::move(t));
    cx.producer.push_back(-1);
  }
  // The plan owns its constants: one shared copy of the graph's bytes.
  auto store = std::make_shared<std::vector<std::vector<unsigned char>>>();
  for (const tensor_desc& td : ts)
    store->push_back(td.is_constant ? td.data : std::vector<unsigned char>{});
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].is_constant && ts[i].has_data) cx.d->tensors[i].data = (*store)[i].data();
  cx.d->owned.push_back(store);
  for (const tensor_desc& td : ts)
    if (td.is_input && td.layout != tensor_layout::plain && td.shape.size() != 4)
      fail("graph", "input '" + td.name + "' has layout " + std::string(layout_name(td.layout)) +
                        " but " + std::to_string(td.shape.size()) + " dimensions (4 needed)");
  // Inputs and constants may be empty (an extent of 0: ONNX's empty tensors); no node reads
  // one, so an empty tensor is only ever bound or returned, never computed on.
  for (const tensor_desc& td : ts)
    for (index_t e : td.shape)
      if (e < 0 || (e == 0 && !td.is_input && !td.is_constant))
        fail("graph", "tensor '" + td.name + "' has a " + (e < 0 ? "negative" : "zero") +
                          " extent in " + cx.shape_str(td.shape));
  check_names_and_quant(cx.g);
  // No node reads an empty tensor, nor a weight declared without data (graph::weight), whatever
  // slot it is used in (operands of add / mul / concat included).
  for (const node_desc& n : cx.g.nodes())
    for (tensor_id in : n.inputs) {
      if (in.index < 0 || std::size_t(in.index) >= ts.size()) continue;
      const tensor_desc& t = ts[std::size_t(in.index)];
      if (shape_numel(t.shape) == 0)
        cx.fail_node(n, "input '" + t.name + "' is empty (" + cx.shape_str(t.shape) +
                            "): kfuse nodes compute on tensors with elements");
      if (t.is_constant && !t.has_data)
        cx.fail_node(n, "weight '" + t.name + "' has no data (graph::set_data)");
    }
}

/// Every node input names a tensor (or is an optional slot left empty); the producers.
inline void check_ids(compile_context& cx) {
  const auto nt = std::int32_t(cx.g.tensors().size());
  for (const node_desc& n : cx.g.nodes()) {
    for (std::size_t s = 0; s < n.inputs.size(); ++s) {
      const std::int32_t id = n.inputs[s].index;
      if (id == -1 && graph_ops::optional_slot(n.op, s)) continue;
      if (id < 0 || id >= nt)
        cx.fail_node(n, "input " + std::to_string(s) + " is an unknown tensor (id " +
                            std::to_string(id) + ")");
    }
    if (n.output.index >= 0)
      cx.producer[std::size_t(n.output.index)] = int(&n - cx.g.nodes().data());
  }
  for (tensor_id o : cx.g.outputs())
    if (o.index < 0 || o.index >= nt)
      fail("graph", "an output is an unknown tensor (id " + std::to_string(o.index) + ")");
  if (cx.g.outputs().empty()) fail("graph", "no outputs (graph::output)");
}

/// Topological order, declaration order among ready nodes (stable and readable).
inline void topo_sort(compile_context& cx) {
  const auto& nodes = cx.g.nodes();
  const std::size_t N = nodes.size();
  std::vector<int> missing(N, 0);
  std::vector<std::vector<int>> users(N);
  for (std::size_t i = 0; i < N; ++i)
    for (tensor_id t : nodes[i].inputs) {
      if (t.index < 0) continue;
      const int p = cx.producer[std::size_t(t.index)];
      if (p >= 0) {
        ++missing[i];
        users[std::size_t(p)].push_back(int(i));
      }
    }
  std::vector<int> ready;
  for (std::size_t i = 0; i < N; ++i)
    if (missing[i] == 0) ready.push_back(int(i));
  std::size_t head = 0;
  while (head < ready.size()) {
    std::sort(ready.begin() + std::ptrdiff_t(head), ready.end());
    const int n = ready[head++];
    cx.order.push_back(n);
    for (int u : users[std::size_t(n)])
      if (--missing[std::size_t(u)] == 0) ready.push_back(u);
  }
  if (cx.order.size() == N) return;
  // A cycle: walk back through unfinished producers until a node repeats.
  int n = 0;
  while (missing[std::size_t(n)] == 0) ++n;
  std::vector<char> seen(N, 0);
  while (!seen[std::size_t(n)]) {
    seen[std::size_t(n)] = 1;
    for (tensor_id t : nodes[std::size_t(n)].inputs) {
      const int p = t.index >= 0 ? cx.producer[std::size_t(t.index)] : -1;
      if (p >= 0 && missing[std::size_t(p)] != 0) {
        n = p;
        break;
      }
    }
  }
  fail("graph", "cycle through node '" + nodes[std::size_t(n)].name + "' (" +
                    std::string(op_name(nodes[std::size_t(n)].op)) +
                    "): its inputs depend on its own output");
}

/// Outputs are computed by nodes and listed once; inputs and outputs get their plan slots.
inline void check_io(compile_context& cx) {
  std::vector<char> is_out(cx.d->tensors.size(), 0);
  for (const tensor_id o : cx.g.outputs()) {
    const tensor_desc& td = cx.g.tensor(o);
    // An empty constant is an output with nothing to compute (an ONNX model's empty result).
    const bool empty_constant = td.is_constant && shape_numel(td.shape) == 0;
    if ((td.is_input || td.is_constant) && !empty_constant)
      fail("graph", "output '" + td.name + "' is a graph " + (td.is_input ? "input" : "constant") +
                        ": no node computes it");
    if (is_out[std::size_t(o.index)]) fail("graph", "output '" + td.name + "' is listed twice");
    is_out[std::size_t(o.index)] = 1;
  }
  for (std::size_t i = 0; i < cx.g.inputs().size(); ++i) {
    plan_tensor& t = cx.T(cx.g.inputs()[i]);
    t.where = plan_tensor::storage::input;
    t.index = std::int32_t(i);
    cx.d->inputs.push_back(cx.g.inputs()[i].index);
  }
  for (const tensor_id o : cx.g.outputs()) cx.d->outputs.push_back(o.index);
}

}  // namespace detail

KFUSE_END_NAMESPACE
