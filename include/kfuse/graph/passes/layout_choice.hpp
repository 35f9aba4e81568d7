#pragma once
// Layout choice: an NCHW graph's image region runs in NHWC, where kfuse's convolutions,
// depthwise and pooling kernels are fastest (NCHW plans of real CNNs replay 3-4x slower), with
// one conversion where an NCHW graph input enters the region and one where a tensor leaves it
// (a graph output, or a reader that is not an image op). The caller's tensors keep their declared
// layouts and names, so bindings do not change; the rewrite happens on a copy of the graph
// before compile() sees it, and compile() falls back to the graph as declared when the rewritten
// one does not compile (errors then name the user's nodes, as without the pass).
//
// The region: the 4-D f32 NCHW graph inputs, and the outputs of the ops whose NHWC form computes
// the same logical (N, C, H, W) result from region inputs: conv2d, pool2d, batch_norm, resize,
// concat, broadcast into an nchw target (a squeeze-excite gate at batch > 1) and eltwise (a
// same-shape operand must be in the region too; a per-channel one must not). Nothing changes
// unless the region holds a conv2d.
#include <string>
#include <unordered_set>
#include <vector>

#include "kfuse/graph/graph.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Which input slots of node n carry image data (in the region or not): -1 for "every slot".
/// Returns false for the ops that stay in the declared layout.
inline bool nhwc_capable(const node_desc& n, int& data_slots) {
  switch (n.op) {
    case op_kind::conv2d:
    case op_kind::pool2d:
    case op_kind::batch_norm:
    case op_kind::resize:
      data_slots = 1;
      return true;
    case op_kind::broadcast:  // into an nchw target: its output layout becomes nhwc
      data_slots = 1;
      return n.to_layout == tensor_layout::nchw && n.shape.size() == 4;
    case op_kind::concat:
    case op_kind::eltwise:
      data_slots = -1;
      return true;
    default:
      return false;
  }
}

struct layout_rewrite {
  graph g;
  int region_nodes = 0, conversions = 0;
};

class layout_chooser {
 public:
  explicit layout_chooser(const graph& g) : g_(g), in_(g.tensors().size(), false) {}

  /// The rewritten graph, or false when the declared one stays (no conv2d in an NCHW region).
  bool run(layout_rewrite& r) {
    if (!valid_ids()) return false;  // compile() reports a malformed graph by itself
    for (tensor_id x : g_.inputs()) {
      const tensor_desc& t = g_.tensor(x);
      if (t.layout == tensor_layout::nchw && t.shape.size() == 4 && t.type == dtype::f32)
        in_[std::size_t(x.index)] = true;
    }
    const std::vector<node_desc>& nodes = g_.nodes();
    std::vector<bool> member(nodes.size(), false);
    bool conv = false;
    // Fixpoint over the nodes (their declared order need not be topological).
    for (bool grew = true; grew;) {
      grew = false;
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!member[i] && joins(nodes[i])) {
          member[i] = true;
          in_[std::size_t(nodes[i].output.index)] = true;
          conv = conv || nodes[i].op == op_kind::conv2d;
          grew = true;
        }
    }
    if (!conv) return false;
    rewrite(member, r);
    return true;
  }

 private:
  bool valid_ids() const {
    const auto ok = [&](tensor_id t) {
      return t.index >= 0 && std::size_t(t.index) < g_.tensors().size();
    };
    for (const node_desc& n : g_.nodes()) {
      if (!ok(n.output)) return false;
      for (tensor_id t : n.inputs)
        if (!ok(t)) return false;
    }
    for (tensor_id t : g_.inputs())
      if (!ok(t)) return false;
    for (tensor_id t : g_.outputs())
      if (!ok(t)) return false;
    return true;
  }
  bool in(tensor_id t) const { return in_[std::size_t(t.index)]; }

  /// Whether node n computes the same result in NHWC from the region (see the file comment).
  bool joins(const node_desc& n) const {
    int data_slots = 0;
    if (n.inputs.empty() || !nhwc_capable(n, data_slots) || !in(n.inputs[0])) return false;
    if (n.op == op_kind::eltwise) {
      std::size_t slot = 1;
      for (const eltwise_stage& s : n.stages) {
        if (!stage_reads_operand(s.kind)) continue;
        if (slot >= n.inputs.size()) return false;
        const bool per_channel = s.kind == stage_kind::bias || s.per_channel;
        if (in(n.inputs[slot++]) == per_channel) return false;
      }
      return true;
    }
    for (std::size_t i = 1; i < n.inputs.size(); ++i)  // concat: all; the others: weights only
      if (in(n.inputs[i]) != (data_slots < 0)) return false;
    return true;
  }

  std::string unique(std::string name) {
    while (!names_.insert(name).second) name += "'";
    return name;
  }

  void rewrite(const std::vector<bool>& member, layout_rewrite& r) {
    r.g = g_;
    graph& h = r.g;
    for (const tensor_desc& t : h.tensors_) names_.insert(t.name);
    const std::size_t declared = h.nodes_.size();
    std::vector<bool> is_output(h.tensors_.size(), false);
    for (tensor_id t : h.outputs_) is_output[std::size_t(t.index)] = true;
    // Readers of each region tensor outside the region (or in a non-data slot: none by joins).
    std::vector<bool> read_outside(h.tensors_.size(), false);
    for (std::size_t i = 0; i < declared; ++i)
      if (!member[i])
        for (tensor_id t : h.nodes_[i].inputs) read_outside[std::size_t(t.index)] = true;

    // Entry: each region graph input read by the region gets one conversion to NHWC.
    std::vector<tensor_id> entry(h.tensors_.size());
    for (tensor_id x : h.inputs_)
      if (in(x)) {
        bool read = false;
        for (std::size_t i = 0; i < declared; ++i)
          if (member[i])
            for (tensor_id t : h.nodes_[i].inputs) read = read || t.index == x.index;
        if (!read) continue;
        entry[std::size_t(x.index)] = h.convert_layout(
            unique(h.tensors_[std::size_t(x.index)].name + "/nhwc"), x, tensor_layout::nhwc);
        ++r.conversions;
      }
    for (std::size_t i = 0; i < declared; ++i)
      if (member[i]) {
        ++r.region_nodes;
        if (h.nodes_[i].op == op_kind::broadcast) h.nodes_[i].to_layout = tensor_layout::nhwc;
        for (tensor_id& t : h.nodes_[i].inputs)
          if (entry[std::size_t(t.index)].index >= 0) t = entry[std::size_t(t.index)];
      }

    // Exit: a region node's output read outside the region or returned goes back to NCHW. A
    // returned tensor keeps its name on the conversion (the caller binds it); the node producing
    // it is renamed.
    for (std::size_t i = 0; i < declared; ++i) {
      if (!member[i]) continue;
      const tensor_id t = h.nodes_[i].output;
      const std::size_t ti = std::size_t(t.index);
      if (!is_output[ti] && !read_outside[ti]) continue;
      std::string back_name;
      if (is_output[ti]) {
        back_name = h.tensors_[ti].name;
        h.nodes_[i].name = h.tensors_[ti].name = unique(back_name + "/nhwc");
      } else {
        back_name = unique(h.tensors_[ti].name + "/nchw");
      }
      const tensor_id back = h.convert_layout(back_name, t, tensor_layout::nchw);
      ++r.conversions;
      if (h.tensors_[ti].has_quant) {
        h.tensors_[std::size_t(back.index)].has_quant = true;
        h.tensors_[std::size_t(back.index)].quant = h.tensors_[ti].quant;
      }
      for (std::size_t j = 0; j < declared; ++j)
        if (!member[j])
          for (tensor_id& u : h.nodes_[j].inputs)
            if (u.index == t.index) u = back;
      for (tensor_id& o : h.outputs_)
        if (o.index == t.index) o = back;
    }
  }

  const graph& g_;
  std::vector<bool> in_;  // tensors of the region (NHWC after the rewrite)
  std::unordered_set<std::string> names_;
};

/// g with its NCHW image region in NHWC (see the file comment), or false to keep g as declared.
inline bool choose_layout(const graph& g, layout_rewrite& r) { return layout_chooser(g).run(r); }

}  // namespace detail

KFUSE_END_NAMESPACE
