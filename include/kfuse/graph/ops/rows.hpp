#pragma once
// rows_shape: how the plan's element-wise commands (eltwise chains, casts, quantize) walk a
// dense tensor: runs of elements that share a channel, split over threads in chunks of rows.
#include <algorithm>

#include "kfuse/graph/types.hpp"
#include "kfuse/kernels/eltwise.hpp"
#include "kfuse/kernels/register_tile.hpp"

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

// Not inlined: the two call sites below share one copy (the vector loop with the whole stage
// chain inlined is the bulk of the plan compiler's element-wise code).
template <class V, class In, class Out, class Ep>
KFUSE_NOINLINE void run_rows(const In* in, Out* out, const rows_shape& s, index_t r0, index_t r1,
                             const Ep& ep) {
  for (index_t row = r0; row < r1; ++row) {
    const index_t i0 = row * s.row_len;
    if constexpr (epilogue_traits<Ep>::may_use_channel) {
      if (s.channels_last) {
        detail::eltwise_run<V, true>(in + i0, out + i0, s.row_len, i0, 0, ep);
        continue;
      }
    }
    // Flat (the last run may be shorter) or channels-first.
    detail::eltwise_run<V, false>(in + i0, out + i0, std::min(s.row_len, s.numel - i0), i0,
                                  s.channels ? row % s.channels : 0, ep);
  }
}

/// A chain of the common form whose activation is a clamp (relu, relu6, clip or none), as one
/// inline stage: a batch norm and its ReLU are a scale, a bias and a clamp. Through the chain
/// itself each vector is a call with a switch per stage: DenseNet's 62 standalone batch norms
/// took 3.9x longer that way (5.0 against 1.3 ms at batch 1, AVX-512), far below memory speed.
struct common_clamp {
  static constexpr std::string_view name{"chain"};
  static constexpr bool may_use_channel = true;
  common_form f;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx& ctx) const {
    return detail::common_value<kfuse::clamp, detail::no_tail>{f, {f.lo, f.hi}, {}}(x, 0, 0, ctx);
  }
};

/// ep with its chain replaced by common_clamp{f} (a quantize<E> after it stays).
template <class S>
KFUSE_INLINE epilogue<common_clamp> with_common_clamp(const epilogue<S>&, const common_form& f) {
  return {common_clamp{f}};
}
template <class S, class E>
KFUSE_INLINE epilogue<common_clamp, quantize<E>> with_common_clamp(
    const epilogue<S, quantize<E>>& ep, const common_form& f) {
  return {common_clamp{f}, detail::stage_at<1>(ep.stages)};
}

/// Rows [c.begin, c.end), split over c.threads threads when more than one.
template <class V, class In, class Out, class Ep>
KFUSE_INLINE void run_rows_split(const command& c, const rows_shape& s, const Ep& ep) {
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

/// Rows [c.begin, c.end) through ep; a run-time chain of the common form with a clamp runs
/// inline (common_clamp).
template <class V, class In, class Out, class Ep>
KFUSE_INLINE void run_rows_cmd(const command& c, const rows_shape& s, const Ep& ep) {
  if constexpr (detail::has_common_form<Ep>) {
    const common_form f = detail::stage_at<0>(ep.stages).common();
    if (f.kind == common_form::act::clamp)
      return run_rows_split<V, In, Out>(c, s, with_common_clamp(ep, f));
  }
  run_rows_split<V, In, Out>(c, s, ep);
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
