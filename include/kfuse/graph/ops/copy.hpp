#pragma once
// slice_copy: the plan's byte copy. A reshape that must be materialized, a same-type cast, and
// each input of a concat (a slice of every outer row of the output).
#include <cstring>

#include "kfuse/detail/copy_short.hpp"
#include "kfuse/graph/types.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// out[o][offset + j] = in[o][j] for o < outer, j < inner_in (bytes; out rows inner_out long).
struct slice_params {
  index_t outer = 0, inner_in = 0, inner_out = 0, offset = 0;
};

/// Rows [o0, o1) of a slice copy: short rows (an NHWC channel concat: a pixel's channels) without
/// a library call each.
inline void slice_rows(const slice_params& p, const unsigned char* in, unsigned char* out,
                       index_t o0, index_t o1) {
  const std::size_t n = std::size_t(p.inner_in);
  for (index_t o = o0; o < o1; ++o) {
    unsigned char* d = out + o * p.inner_out + p.offset;
    const unsigned char* s = in + o * p.inner_in;
    if (n <= 256)
      detail::copy_short(d, s, n);
    else
      std::memcpy(d, s, n);
  }
}

inline void slice_copy_cmd(const command& c) {
  const auto& p = *static_cast<const slice_params*>(c.params);
  const auto* in = static_cast<const unsigned char*>(c.in[0]);
  auto* out = static_cast<unsigned char*>(c.out);
  if (p.outer == 1 && p.inner_in == p.inner_out) {
    std::memcpy(out, in, std::size_t(p.inner_in));
    return;
  }
  if (c.threads <= 1) return slice_rows(p, in, out, 0, p.outer);
  parallel_for(
      0, p.outer, (p.outer + c.threads - 1) / c.threads,
      [&](range r, int) { slice_rows(p, in, out, r.begin, r.end); }, c.threads);
}

/// A whole-tensor copy of `bytes`.
inline slice_params whole_copy(std::size_t bytes) {
  slice_params p;
  p.outer = 1;
  p.inner_in = p.inner_out = index_t(bytes);
  return p;
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
