#pragma once
// Graph adapters that move bytes: copies (a reshape that must be materialized), concat slices,
// nchw <-> nhwc conversion, and custom nodes (a user's callable).
#include <cstring>

#include "kfuse/graph/graph.hpp"
#include "kfuse/layout/convert.hpp"

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

struct layout_params {
  dims4 dims;
};

template <class T, class LIn, class LOut>
void convert_layout_cmd(const command& c) {
  const auto& p = *static_cast<const layout_params*>(c.params);
  if constexpr (std::is_same_v<LIn, LOut>)
    std::memcpy(c.out, c.in[0], sizeof(T) * std::size_t(numel(p.dims)));
  else if constexpr (std::is_same_v<LIn, nchw>)
    nchw_to_nhwc(tensor_view<const T, nchw>{static_cast<const T*>(c.in[0]), p.dims},
                 tensor_view<T, nhwc>{static_cast<T*>(c.out), p.dims});
  else
    nhwc_to_nchw(tensor_view<const T, nhwc>{static_cast<const T*>(c.in[0]), p.dims},
                 tensor_view<T, nchw>{static_cast<T*>(c.out), p.dims});
}

struct custom_params {
  custom_op op;
  int n_inputs = 0;
};

inline void custom_cmd(const command& c) {
  const auto& p = *static_cast<const custom_params*>(c.params);
  p.op.run(custom_call{c.in, p.n_inputs, c.out, p.op.state.get()});
}

}  // namespace graph_ops

KFUSE_END_NAMESPACE
