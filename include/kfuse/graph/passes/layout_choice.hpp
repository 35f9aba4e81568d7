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
// the same logical (N, C, H, W) result from region inputs: conv2d, conv_transpose2d, pool2d,
// batch_norm, resize, concat, channel_shuffle, convert_layout (a copy in NHWC: the importer's
// conversions around an NHWC-only op keep the region whole), cast (quantize / dequantize:
// per-tensor, so an int8 chain keeps its fused quantize and its exit moves u8), broadcast into an
// nchw target (a squeeze-excite gate at batch > 1) and eltwise (a same-shape operand must be in the
// region too; a per-channel one may come from anywhere). Nothing changes unless the region holds a
// conv2d.
#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "kfuse/graph/graph.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Whether node n has an NHWC form computing the same logical result; every_slot: all its inputs
/// are image data (concat, eltwise), else only the first (the rest are weights).
inline bool nhwc_capable(const node_desc& n, bool& every_slot) {
  const nhwc_support s = nhwc_support_of(n.op);
  every_slot = s == nhwc_support::all;
  if (s == nhwc_support::target) {  // broadcast
    const broadcast_params& b = n.attr<broadcast_params>();
    return b.as == tensor_layout::nchw && b.shape.size() == 4;
  }
  return s != nhwc_support::no;
}

struct layout_rewrite {
  graph g;
  int region_nodes = 0, conversions = 0;
};

class layout_chooser {
 public:
  explicit layout_chooser(const graph& g)
      : g_(g), in_(g.tensors().size(), false), was_nhwc_(g.tensors().size(), false) {}

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
          const node_desc& n = nodes[i];
          member[i] = true;
          in_[std::size_t(n.output.index)] = true;
          // Its output's layout in the declared graph: nhwc stays nhwc, needing no exit.
          was_nhwc_[std::size_t(n.output.index)] =
              n.op == op_kind::conv_transpose2d || is_conversion_to(n, tensor_layout::nhwc) ||
              (n.op != op_kind::convert_layout && n.op != op_kind::broadcast &&
               was_nhwc_[std::size_t(n.inputs[0].index)]);
          conv = conv || nodes[i].op == op_kind::conv2d;
          grew = true;
        }
    }
    if (!conv) return false;
    // A user's own conversion to nchw that only leaves the region (read outside, or returned)
    // stays what it is: the exit, reading the nhwc tensor directly.
    std::vector<bool> read_by_member(g_.tensors().size(), false);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (member[i])
        for (tensor_id t : nodes[i].inputs) read_by_member[std::size_t(t.index)] = true;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (member[i] && is_conversion_to(nodes[i], tensor_layout::nchw) &&
          !read_by_member[std::size_t(nodes[i].output.index)]) {
        member[i] = false;
        in_[std::size_t(nodes[i].output.index)] = false;
      }
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
  static bool is_conversion_to(const node_desc& n, tensor_layout l) {
    return n.op == op_kind::convert_layout && n.attr<convert_layout_params>().to == l;
  }

  /// Whether node n computes the same result in NHWC from the region (see the file comment).
  bool joins(const node_desc& n) const {
    bool every_slot = false;
    if (n.inputs.empty() || !nhwc_capable(n, every_slot) || !in(n.inputs[0])) return false;
    if (n.op == op_kind::eltwise) {
      std::size_t slot = 1;
      for (const eltwise_stage& s : n.attr<eltwise_params>().stages) {
        if (!stage_reads_operand(s.kind)) continue;
        if (slot >= n.inputs.size()) return false;
        // A per-channel operand holds C values whatever its layout (an SE gate [N=1, C, 1, 1]
        // from the region reads the same in both); a same-shape one must be in the region.
        const bool per_channel = s.kind == stage_kind::bias || s.per_channel;
        if (!per_channel && !same_region_layout(n.inputs[0], n.inputs[slot])) return false;
        ++slot;
      }
      return true;
    }
    for (std::size_t i = 1; i < n.inputs.size(); ++i)  // concat: all; the others: weights only
      if (every_slot ? !same_region_layout(n.inputs[0], n.inputs[i]) : in(n.inputs[i]))
        return false;
    return true;
  }
  /// b is in the region and was in a's layout in the declared graph (a mismatch stays the
  /// declared graph's error).
  bool same_region_layout(tensor_id a, tensor_id b) const {
    return in(b) && was_nhwc_[std::size_t(a.index)] == was_nhwc_[std::size_t(b.index)];
  }

  std::string unique(std::string name) {
    while (!names_.insert(name).second) name += "'";
    return name;
  }

  void rewrite(const std::vector<bool>& member, layout_rewrite& r) {
    r.g = g_;
    graph& h = r.g;
    for (const tensor_desc& t : h.tensors_) names_.insert(t.name);
    const std::size_t declared = h.nodes_.size(), tensors = h.tensors_.size();
    // A conversion reads either layout: a graph input read by a member conversion, or a region
    // tensor read by an outside one, needs no conversion of its own.
    const auto converts_input = [&](const node_desc& n) {
      return n.op == op_kind::convert_layout && g_.tensor(n.inputs[0]).is_input;
    };
    std::vector<bool> read_inside(tensors, false), read_outside(tensors, false);
    for (std::size_t i = 0; i < declared; ++i) {
      const node_desc& n = h.nodes_[i];
      if (member[i] ? converts_input(n) : n.op == op_kind::convert_layout) continue;
      for (tensor_id t : n.inputs)
        (member[i] ? read_inside : read_outside)[std::size_t(t.index)] = true;
    }
    for (tensor_id t : h.outputs_) read_outside[std::size_t(t.index)] = true;

    // Entry: each region graph input read by the region gets one conversion to NHWC.
    std::vector<tensor_id> entry(tensors), exit(tensors);
    for (tensor_id x : h.inputs_)
      if (in(x) && read_inside[std::size_t(x.index)]) {
        entry[std::size_t(x.index)] = h.convert_layout(
            unique(h.tensors_[std::size_t(x.index)].name + "/nhwc"), x, tensor_layout::nhwc);
        ++r.conversions;
      }
    // Exit: a region tensor that was nchw and is read outside the region or returned goes back
    // to NCHW. A returned tensor keeps its name on the conversion (the caller binds it); the
    // node producing it is renamed.
    for (std::size_t i = 0; i < declared; ++i) {
      if (!member[i]) continue;
      node_desc& n = h.nodes_[i];
      ++r.region_nodes;
      if (n.op == op_kind::broadcast) n.attr<broadcast_params>().as = tensor_layout::nhwc;
      if (n.op == op_kind::convert_layout) n.attr<convert_layout_params>().to = tensor_layout::nhwc;
      const std::size_t ti = std::size_t(n.output.index);
      if (was_nhwc_[ti] || !read_outside[ti]) continue;
      std::string back_name = h.tensors_[ti].name + "/nchw";
      if (std::any_of(h.outputs_.begin(), h.outputs_.end(),
                      [&](tensor_id o) { return o.index == n.output.index; })) {
        back_name = h.tensors_[ti].name;
        n.name = h.tensors_[ti].name = unique(back_name + "/nhwc");
      } else {
        back_name = unique(back_name);
      }
      exit[ti] = h.convert_layout(back_name, n.output, tensor_layout::nchw);
      ++r.conversions;
    }
    // Readers take the converted tensors: members the entries, the rest (and the caller) the
    // exits. The conversions just added (from `declared` on) keep their inputs.
    for (std::size_t i = 0; i < declared; ++i) {
      node_desc& n = h.nodes_[i];
      if (member[i] ? converts_input(n) : n.op == op_kind::convert_layout) continue;
      for (tensor_id& t : n.inputs) {
        const tensor_id to = (member[i] ? entry : exit)[std::size_t(t.index)];
        if (to.index >= 0) t = to;
      }
    }
    for (tensor_id& o : h.outputs_)
      if (exit[std::size_t(o.index)].index >= 0) o = exit[std::size_t(o.index)];
  }

  const graph& g_;
  std::vector<bool> in_;        // tensors of the region (NHWC after the rewrite)
  std::vector<bool> was_nhwc_;  // region tensors that were NHWC in the declared graph too
  std::unordered_set<std::string> names_;
};

/// g with its NCHW image region in NHWC (see the file comment), or false to keep g as declared.
inline bool choose_layout(const graph& g, layout_rewrite& r) { return layout_chooser(g).run(r); }

}  // namespace detail

KFUSE_END_NAMESPACE
