#pragma once
// slice_copy: the plan's byte copy. A reshape that must be materialized, a same-type cast, and
// each input of a concat (a slice of every outer row of the output).
#include <cstring>

#include "kfuse/graph/types.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// out[o][offset + j] = in[o][j] for o < outer, j < inner_in (bytes; out rows inner_out long).
struct slice_params {
  index_t outer = 0, inner_in = 0, inner_out = 0, offset = 0;
};

inline void slice_copy_cmd(const command& c) {
  const auto& p = *static_cast<const slice_params*>(c.params);
  const auto* in = static_cast<const unsigned char*>(c.in[0]);
  auto* out = static_cast<unsigned char*>(c.out);
  if (p.outer == 1 && p.inner_in == p.inner_out) {
    std::memcpy(out, in, std::size_t(p.inner_in));
    return;
  }
  for (index_t o = 0; o < p.outer; ++o)
    std::memcpy(out + o * p.inner_out + p.offset, in + o * p.inner_in, std::size_t(p.inner_in));
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
