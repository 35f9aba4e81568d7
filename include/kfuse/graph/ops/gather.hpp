#pragma once
// gather as a graph op: ONNX Gather along one axis of a table (constant or run-time) with i32 or
// i64 indices (constant or run-time: token ids into an embedding). An index outside the table
// stops the replay with a kfuse::error naming the node, the index and its position.
#include <string>

#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/kernels/gather.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct gather_step_params {
  gather_shape shape;
  std::size_t elem_bytes = 4;
  std::string who;  // "graph: node 'emb' (gather)": the error's prefix
};

template <class I>
void gather_cmd(const command& c) {
  const auto& p = *static_cast<const gather_step_params*>(c.params);
  gather_rows(c.in[0], static_cast<const I*>(c.in[1]), c.out, p.shape, p.elem_bytes, c.threads,
              p.who);
}

struct gather_rule : op_rule {
  static constexpr op_kind kind = op_kind::gather;
  using attributes = gather_params;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const gather_params& attr = n.attr<gather_params>();
    const plan_tensor& t = cx.T(n.inputs[0]);
    const plan_tensor& i = cx.T(n.inputs[1]);
    if (t.layout == tensor_layout::nhwc && t.shape.size() == 4)
      cx.fail_node(n, "table '" + t.name + "' is nhwc; gather reads plain (or nchw) data");
    if (i.type != dtype::i32 && i.type != dtype::i64)
      cx.fail_node(n, "indices '" + i.name + "' are " + std::string(dtype_name(i.type)) +
                          "; gather takes i32 or i64 indices");
    if (i.layout == tensor_layout::nhwc && i.shape.size() == 4)
      cx.fail_node(n, "indices '" + i.name + "' are nhwc");
    const int r = int(t.shape.size());
    if (attr.axis < -r || attr.axis >= r)
      cx.fail_node(n, "axis " + std::to_string(attr.axis) +
                          " is out of range for the table's rank " + std::to_string(r));
    const std::size_t axis = std::size_t(attr.axis < 0 ? attr.axis + r : attr.axis);
    std::vector<index_t> shape(t.shape.begin(), t.shape.begin() + std::ptrdiff_t(axis));
    shape.insert(shape.end(), i.shape.begin(), i.shape.end());
    shape.insert(shape.end(), t.shape.begin() + std::ptrdiff_t(axis) + 1, t.shape.end());
    if (shape.empty()) shape = {1};
    // Constant indices are checked now: the error comes from compile(), not the first replay.
    if (i.where == plan_tensor::storage::constant && i.data != nullptr) {
      const index_t rows = t.shape[axis];
      for (index_t j = 0; j < shape_numel(i.shape); ++j) {
        const std::int64_t v = i.type == dtype::i64 ? static_cast<const std::int64_t*>(i.data)[j]
                                                    : static_cast<const std::int32_t*>(i.data)[j];
        if (v < -rows || v >= rows)
          cx.fail_node(n, "index " + std::to_string(v) + " at position " + std::to_string(j) +
                              " is out of range for " + std::to_string(rows) + " rows");
      }
    }
    cx.set_out(n, shape, t.type, tensor_layout::plain);
    cx.pass_quant(n, t);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const gather_params& attr = n.attr<gather_params>();
    const plan_tensor& t = cx.T(s.x);
    const plan_tensor& i = cx.T(s.others[0]);
    const int r = int(t.shape.size());
    const std::size_t axis = std::size_t(attr.axis < 0 ? attr.axis + r : attr.axis);
    auto p = std::make_shared<gather_step_params>();
    for (std::size_t d = 0; d < axis; ++d) p->shape.outer *= t.shape[d];
    for (std::size_t d = axis + 1; d < t.shape.size(); ++d) p->shape.inner *= t.shape[d];
    p->shape.rows = t.shape[axis];
    p->shape.count = shape_numel(i.shape);
    p->elem_bytes = dtype_size(t.type);
    p->who = "graph: node '" + n.name + "' (gather)";
    detail::plan_command c;
    c.in[0] = s.x;
    c.in[1] = s.others[0];
    c.out = s.out;
    c.fn = i.type == dtype::i64 ? &gather_cmd<std::int64_t> : &gather_cmd<std::int32_t>;
    c.begin = 0;
    c.end = 1;
    info.bytes = 2.0 * double(cx.T(s.out).bytes) + double(i.bytes);
    c.threads = cx.threads_for(info.bytes, 0);
    info.kernel = "gather " + std::string(dtype_name(i.type)) + " indices";
    c.params = cx.own(std::move(p));
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
