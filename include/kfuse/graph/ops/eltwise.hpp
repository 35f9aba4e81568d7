#pragma once
// eltwise: a chain of stages (activations, scale, bias, add / mul of a tensor) as a graph op.
// Its commands call the eltwise kernel's inner loop (the checks ran once, at compile time): any
// chain, the single-relu fast path, and a chain whose f32 output the plan quantizes.
#include <algorithm>

#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/graph/ops/op_rule.hpp"
#include "kfuse/graph/ops/rows.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

struct eltwise_step_params {
  rows_shape shape;
  chain_list stages;
  quant_params out_q{};  // eltwise_chain_quantize_cmd: the int8 output's scale and zero point
};

/// out = chain(in): any fused stage chain; operands in c.in[1..3].
template <class A, class B, class T>
void eltwise_chain_cmd(const command& c) {
  const auto& p = *static_cast<const eltwise_step_params*>(c.params);
  chain ch{&p.stages,
           {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
            static_cast<const float*>(c.in[3])}};
  run_rows_cmd<simd::vec_for<A, B>, T, T>(c, p.shape, epilogue<chain>{ch});
}

/// out = quantize(chain(in)): an f32 chain whose output the plan quantizes (Out = uint8_t or
/// int8_t), in one pass.
template <class A, class B, class Out>
void eltwise_chain_quantize_cmd(const command& c) {
  const auto& p = *static_cast<const eltwise_step_params*>(c.params);
  chain ch{&p.stages,
           {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
            static_cast<const float*>(c.in[3])}};
  run_rows_cmd<simd::vec_for<A, B>, float, Out>(c, p.shape, chain_epilogue<Out>::make(ch, p.out_q));
}

/// out = relu(in): the most common single stage, without the chain's switch.
template <class A, class B, class T>
void eltwise_relu_cmd(const command& c) {
  const auto& p = *static_cast<const eltwise_step_params*>(c.params);
  run_rows_cmd<simd::vec_for<A, B>, T, T>(c, p.shape, epilogue<relu>{});
}

/// What a stage's p0 is, where it must be finite (nullptr: no such parameter).
inline const char* stage_p0_name(stage_kind k) {
  switch (k) {
    case stage_kind::scale:
      return "scale factor";
    case stage_kind::leaky_relu:
      return "leaky_relu slope";
    case stage_kind::elu:
      return "elu alpha";
    case stage_kind::celu:
      return "celu alpha";
    case stage_kind::selu:
      return "selu alpha";
    case stage_kind::power:
      return "power exponent";
    default:
      return nullptr;
  }
}

struct eltwise_rule : op_rule {
  static constexpr op_kind kind = op_kind::eltwise;
  using attributes = eltwise_params;
  static constexpr bool absorbs_chain = true;
  // bf16 tensors (bf16 and int8 plans) and quantized outputs (int8) have kernels of their own.
  static constexpr bool by_precision = true;

  static void infer(detail::compile_context& cx, const node_desc& n) {
    const eltwise_params& attr = n.attr<eltwise_params>();
    const plan_tensor& x = cx.T(n.inputs[0]);
    if (x.type != dtype::f32 && x.type != dtype::bf16)
      cx.fail_node(n, "input '" + x.name + "' is " + std::string(dtype_name(x.type)) +
                          "; eltwise stages take f32 or bf16");
    std::size_t slot = 1;
    for (const eltwise_stage& s : attr.stages) {
      if (!stage_reads_operand(s.kind)) continue;
      const plan_tensor& o = cx.T(n.inputs[slot++]);
      if (o.type != dtype::f32)
        cx.fail_node(n, "operand '" + o.name + "' is " + std::string(dtype_name(o.type)) +
                            "; operands must be f32");
      const bool per_channel = s.kind == stage_kind::bias || s.per_channel;
      if (per_channel) {
        if (shape_numel(o.shape) != cx.channels_of(x))
          cx.fail_node(n, "per-channel operand '" + o.name + "' has " +
                              std::to_string(shape_numel(o.shape)) + " values, input '" + x.name +
                              "' has " + std::to_string(cx.channels_of(x)) + " channels");
      } else if (o.shape != x.shape || o.layout != x.layout) {
        cx.fail_node(n, "operand '" + o.name + "' has shape " + cx.shape_str(o.shape) + " (" +
                            std::string(layout_name(o.layout)) + "), input '" + x.name + "' " +
                            cx.shape_str(x.shape) + " (" + std::string(layout_name(x.layout)) +
                            "): shapes must match");
      }
    }
    if (n.inputs.size() - 1 > std::size_t(chain_max_operands))
      cx.fail_node(n, "more than " + std::to_string(chain_max_operands) +
                          " tensor operands in one eltwise node");
    if (attr.stages.size() > std::size_t(chain_max_stages))
      cx.fail_node(n, "more than " + std::to_string(chain_max_stages) + " stages");
    for (const eltwise_stage& s : attr.stages) {
      if (s.kind == stage_kind::clamp && !(s.p0 <= s.p1)) cx.fail_node(n, "clamp: lo exceeds hi");
      const char* p0_name = stage_p0_name(s.kind);
      if (p0_name != nullptr && !std::isfinite(s.p0))
        cx.fail_node(n, std::string(p0_name) + " must be finite, not " + std::to_string(s.p0));
      if (s.kind == stage_kind::selu && !std::isfinite(s.p1))
        cx.fail_node(n, "selu: gamma must be finite, not " + std::to_string(s.p1));
      if (s.kind == stage_kind::celu && s.p0 == 0.f) cx.fail_node(n, "celu: alpha must not be 0");
    }
    cx.set_out(n, x.shape, x.type, x.layout);
  }

  static void build_step(detail::compile_context&, const node_desc& n, detail::step& s) {
    std::size_t slot = 1;
    for (const eltwise_stage& e : n.attr<eltwise_params>().stages) {
      detail::op_stage o{e.kind, e.p0, e.p1, -1, e.per_channel};
      if (stage_reads_operand(e.kind)) o.operand = n.inputs[slot++].index;
      s.chain.push_back(o);
    }
  }

  /// An f32 chain can quantize its output (u8 or i8) in the same pass.
  static bool writes_quantized(const detail::compile_context& cx, const detail::step& p, dtype to) {
    return to != dtype::bf16 && cx.T(p.x).type == dtype::f32;
  }

  template <class A, class B, class Set = detail::all_ops>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    const plan_tensor& x = cx.T(s.x);
    auto p = std::make_shared<eltwise_step_params>();
    detail::plan_command c;
    c.in[0] = s.x;
    c.out = s.out;
    p->stages = cx.make_chain(s.chain, c, 1);
    p->shape = cx.rows_for(x, detail::chain_per_channel(s.chain));
    c.begin = 0;
    c.end = p->shape.rows;
    const bool just_relu = s.chain.size() == 1 && s.chain[0].kind == stage_kind::relu;
    const dtype to = cx.T(s.out).type;
    if (to == dtype::u8 || to == dtype::i8) {
      if constexpr (Set::runs_in(precision::int8)) {
        p->out_q = cx.out_quant_params(s);
        c.fn = to == dtype::u8 ? &eltwise_chain_quantize_cmd<A, B, std::uint8_t>
                               : &eltwise_chain_quantize_cmd<A, B, std::int8_t>;
      } else {
        fail_precision<Set>(cx, n, precision::int8);
      }
    } else if (x.type == dtype::bf16) {
      if constexpr (bf16_tensors<Set>())
        c.fn = just_relu ? &eltwise_relu_cmd<A, B, bf16_t> : &eltwise_chain_cmd<A, B, bf16_t>;
      else
        fail_precision<Set>(cx, n, precision::bf16);
    } else {
      c.fn = just_relu ? &eltwise_relu_cmd<A, B, float> : &eltwise_chain_cmd<A, B, float>;
    }
    const double count = double(shape_numel(x.shape));
    info.bytes = double(x.bytes) + double(cx.T(s.out).bytes) +
                 detail::operand_bytes(s.chain, shape_numel(x.shape), cx.channels_of(x));
    info.flops = count * double(s.chain.size());
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.params = cx.own(p);
    info.kernel = "eltwise" + cx.chain_suffix(s, s.chain);
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
