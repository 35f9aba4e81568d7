// kfuse.Attention, the pattern pass's fusion of an exported attention block (patterns.cpp):
// Q / K / V as [B, S, H, d] views of their linears, an optional additive mask that broadcasts to
// [B, H, Sq, Sk], the scale -> the graph's attention node, output [B, Sq, H, d].
#include "ops.hpp"

namespace kfuse::onnx::detail {

void import_attention(context& cx, const node_proto& n) {
  cx.only_attrs(n, {"scale"});
  const run_value q = cx.as_plain(cx.float_in(n, 0), n.output(0) + "/q");
  const run_value k = cx.as_plain(cx.float_in(n, 1), n.output(0) + "/k");
  const run_value v = cx.as_plain(cx.float_in(n, 2), n.output(0) + "/v");
  for (const run_value* t : {&q, &k, &v})
    if (t->shape.size() != 4)
      cx.fail(n,
              "Q, K and V must be [batch, sequence, heads, head_dim], not " + shape_str(t->shape));
  tensor_id mask{};
  if (cx.has_input(n, 3)) {
    const run_value m = cx.as_plain(cx.float_in(n, 3), n.output(0) + "/mask");
    std::vector<index_t> full = {q.shape[0], q.shape[2], q.shape[1], k.shape[1]}, out;
    if (m.shape.size() > 4 || !broadcast_shape(full, m.shape, out) || out != full)
      cx.fail(n, "the mask " + shape_str(m.shape) + " does not broadcast to the scores " +
                     shape_str(full));
    mask = m.id;
  }
  attention_params p;
  p.scale = cx.attr_float(n, "scale", 0.f);
  run_value y = q;
  y.id = cx.g.attention(cx.out_name(n), q.id, k.id, v.id, mask, p);
  y.layout = tensor_layout::plain;
  cx.set_run(n, 0, y);
}

}  // namespace kfuse::onnx::detail
