#pragma once
// Graph adapters of the eltwise family: fused stage chains, the single-stage fast path, and
// element type conversions (cast, quantize, dequantize). Each is a command_fn: it reads its
// parameters and resolved pointers from the command and calls the eltwise kernel's inner loop
// (the checks ran once, at compile / record time).
#include <algorithm>

#include "kfuse/graph/ops/chain.hpp"
#include "kfuse/kernels/eltwise.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// A dense tensor walked as `rows` runs of `row_len` elements. channels == 0: flat (no channel
/// parameter; the last run may be shorter); channels_last: lane k of a run has channel k;
/// otherwise run r has channel r % channels.
struct rows_shape {
  index_t numel = 0;
  index_t rows = 0;
  index_t row_len = 0;
  index_t channels = 0;
  bool channels_last = false;
  index_t rows_per_chunk = 1;  // grain of the parallel split
};

/// Rows for a tensor of `numel` elements with `channels` channels (0: none).
inline rows_shape make_rows(index_t numel, index_t channels, bool channels_last, index_t hw) {
  rows_shape r;
  r.numel = numel;
  constexpr index_t target = index_t(1) << 14;  // ~64 KiB of f32 per chunk, as kfuse::eltwise
  if (channels == 0) {
    r.row_len = std::max<index_t>(1, std::min(numel, target));
    r.rows = numel == 0 ? 0 : (numel + r.row_len - 1) / r.row_len;
  } else if (channels_last) {
    r.channels = channels;
    r.channels_last = true;
    r.row_len = channels;
    r.rows = numel / std::max<index_t>(channels, 1);
  } else {
    r.channels = channels;
    r.row_len = hw;
    r.rows = numel / std::max<index_t>(hw, 1);
  }
  r.rows_per_chunk = std::max<index_t>(1, target / std::max<index_t>(r.row_len, 1));
  return r;
}

template <class V, class In, class Out, class Ep>
KFUSE_INLINE void run_rows(const In* in, Out* out, const rows_shape& s, index_t r0, index_t r1,
                           const Ep& ep) {
  for (index_t row = r0; row < r1; ++row) {
    const index_t i0 = row * s.row_len;
    if (s.channels == 0)
      detail::eltwise_run<V, false>(in + i0, out + i0, std::min(s.row_len, s.numel - i0), i0, 0,
                                    ep);
    else if (s.channels_last)
      detail::eltwise_run<V, true>(in + i0, out + i0, s.row_len, i0, 0, ep);
    else
      detail::eltwise_run<V, false>(in + i0, out + i0, s.row_len, i0, row % s.channels, ep);
  }
}

/// Rows [c.begin, c.end), split over c.threads threads when more than one.
template <class V, class In, class Out, class Ep>
KFUSE_INLINE void run_rows_cmd(const command& c, const rows_shape& s, const Ep& ep) {
  const In* in = static_cast<const In*>(c.in[0]);
  Out* out = static_cast<Out*>(c.out);
  if (c.threads <= 1) {
    run_rows<V>(in, out, s, c.begin, c.end, ep);
    return;
  }
  parallel_for(
      c.begin, c.end, s.rows_per_chunk,
      [&](range r, int) { run_rows<V>(in, out, s, r.begin, r.end, ep); }, c.threads);
}

struct eltwise_params {
  rows_shape shape;
  chain_list stages;
  quant_params out_q{};  // eltwise_chain_quantize_cmd: the int8 output's scale and zero point
};

/// out = chain(in): any fused stage chain; operands in c.in[1..3].
template <class A, class B, class T>
void eltwise_chain_cmd(const command& c) {
  const auto& p = *static_cast<const eltwise_params*>(c.params);
  chain ch{&p.stages,
           {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
            static_cast<const float*>(c.in[3])}};
  run_rows_cmd<simd::vec_for<A, B>, T, T>(c, p.shape, epilogue<chain>{ch});
}

/// out = quantize(chain(in)): an f32 chain whose output the plan quantizes (Out = uint8_t or
/// int8_t), in one pass.
template <class A, class B, class Out>
void eltwise_chain_quantize_cmd(const command& c) {
  const auto& p = *static_cast<const eltwise_params*>(c.params);
  chain ch{&p.stages,
           {static_cast<const float*>(c.in[1]), static_cast<const float*>(c.in[2]),
            static_cast<const float*>(c.in[3])}};
  run_rows_cmd<simd::vec_for<A, B>, float, Out>(c, p.shape, chain_epilogue<Out>::make(ch, p.out_q));
}

/// out = relu(in): the most common single stage, without the chain's switch.
template <class A, class B, class T>
void eltwise_relu_cmd(const command& c) {
  const auto& p = *static_cast<const eltwise_params*>(c.params);
  run_rows_cmd<simd::vec_for<A, B>, T, T>(c, p.shape, epilogue<relu>{});
}

struct convert_params {
  rows_shape shape;
  quant_params q;  // quantize / dequantize (per tensor)
};

/// Element type conversion In -> Out through epilogue Ep (cast, quantize, dequantize, none).
template <class A, class B, class In, class Out, class Ep>
void convert_cmd(const command& c) {
  const auto& p = *static_cast<const convert_params*>(c.params);
  Ep ep{};
  if constexpr (std::is_same_v<Ep, epilogue<quantize<elem_of<Out>>>>)
    ep = Ep{quantize<elem_of<Out>>{p.q}};
  else if constexpr (std::is_same_v<Ep, epilogue<dequantize>>)
    ep = Ep{dequantize{p.q}};
  run_rows_cmd<simd::vec_for<A, B>, In, Out>(c, p.shape, ep);
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
