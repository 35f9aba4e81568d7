#pragma once
// arg_reduce: the int64 index of the maximum (or minimum) along one axis of a dense tensor
// (ONNX ArgMax / ArgMin, torch.argmax / argmin).
//
//   kfuse::arg_reduce(logits, classes, shape, 1, kfuse::arg_kind::max);   // [N, C] -> [N]
//
// Ties go to the first position (to the last with `last`); a NaN counts as larger and smaller
// than every number (NumPy's rule: the first NaN's index). The tensor is [outer, axis, inner]:
// with inner == 1 each output scans a contiguous row; otherwise blocks of 256 columns keep their
// best value and index while the axis is walked row by row (contiguous reads). Work is split
// over outputs.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/convert.hpp"
#include "kfuse/types/reduce_kind.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Whether v replaces the current best b (NaN first; ties per `last`).
template <bool Max, bool Last>
KFUSE_INLINE bool arg_better(float v, float b) {
  if (b != b) return false;  // a NaN is kept
  if (v != v) return true;
  if constexpr (Max)
    return Last ? v >= b : v > b;
  else
    return Last ? v <= b : v < b;
}

template <bool Max, bool Last, class In>
void arg_rows(const In* in, std::int64_t* out, index_t axis, index_t begin, index_t end) {
  for (index_t o = begin; o < end; ++o) {
    const In* x = in + o * axis;
    float best = to_float(x[0]);
    index_t at = 0;
    for (index_t j = 1; j < axis; ++j) {
      const float v = to_float(x[j]);
      if (arg_better<Max, Last>(v, best)) {
        best = v;
        at = j;
      }
    }
    out[o] = std::int64_t(at);
  }
}

template <bool Max, bool Last, class In>
void arg_columns(const In* in, std::int64_t* out, index_t axis, index_t inner, index_t begin,
                 index_t end) {
  constexpr index_t block = 256;
  float best[block];
  index_t at[block];
  const index_t blocks = (inner + block - 1) / block;
  for (index_t it = begin; it < end; ++it) {
    const index_t o = it / blocks, c0 = (it % blocks) * block;
    const index_t nc = std::min(block, inner - c0);
    const In* x = in + o * axis * inner + c0;
    for (index_t c = 0; c < nc; ++c) {
      best[c] = to_float(x[c]);
      at[c] = 0;
    }
    for (index_t j = 1; j < axis; ++j) {
      const In* row = x + j * inner;
      for (index_t c = 0; c < nc; ++c) {
        const float v = to_float(row[c]);
        if (arg_better<Max, Last>(v, best[c])) {
          best[c] = v;
          at[c] = j;
        }
      }
    }
    std::int64_t* y = out + o * inner + c0;
    for (index_t c = 0; c < nc; ++c) y[c] = std::int64_t(at[c]);
  }
}

template <class In>
run_info arg_reduce_impl(const In* in, std::int64_t* out, index_t outer, index_t axis,
                         index_t inner, arg_kind kind, bool last, const run_options& opt) {
  constexpr std::string_view k = "arg_reduce";
  const index_t n = checked_count(k, "the tensor", {outer, axis, inner});
  check_buffer(k, "input", in, n);
  check_buffer(k, "output", out, outer * inner);
  check_overlap(k, in, n, out, outer * inner);
  const index_t blocks = (inner + 255) / 256;
  const index_t items = inner == 1 ? outer : outer * blocks;
  const index_t grain = std::max<index_t>(1, (index_t(1) << 14) / std::max<index_t>(1, n / items));
  auto body = [&]<bool Max, bool Last>() {
    parallel_for(
        0, items, grain,
        [&](range r, int) {
          if (inner == 1)
            arg_rows<Max, Last>(in, out, axis, r.begin, r.end);
          else
            arg_columns<Max, Last>(in, out, axis, inner, r.begin, r.end);
        },
        opt.threads);
  };
  const bool mx = kind == arg_kind::max;
  if (mx && last)
    body.template operator()<true, true>();
  else if (mx)
    body.template operator()<true, false>();
  else if (last)
    body.template operator()<false, true>();
  else
    body.template operator()<false, false>();
  const int used =
      int(std::min<index_t>(pool_threads(opt.threads, "arg_reduce"), (items + grain - 1) / grain));
  return run_info{k, "any", "scalar", inner == 1 ? "rows" : "columns", used};
}

/// outer / axis / inner of `shape` around axis `axis` (checked).
inline void arg_split(std::string_view k, std::span<const index_t> shape, int axis, index_t& outer,
                      index_t& len, index_t& inner) {
  const int r = int(shape.size());
  if (r < 1 || r > 8) fail(k, "rank " + std::to_string(r) + " (1 to 8)");
  if (axis < -r || axis >= r)
    fail(k, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  checked_count(k, "the tensor", shape);
  outer = inner = 1;
  for (int d = 0; d < r; ++d) {
    if (shape[std::size_t(d)] < 1)
      fail(k, "extent " + std::to_string(shape[std::size_t(d)]) + " (must be positive)");
    if (d < axis) outer *= shape[std::size_t(d)];
    if (d > axis) inner *= shape[std::size_t(d)];
  }
  len = shape[std::size_t(axis)];
}

}  // namespace detail

/// out[o] = the index along `axis` of the maximum / minimum of `in` (dense, row-major, extents
/// `shape`); out holds one int64 per position of the other axes, in their order.
template <class In>
run_info arg_reduce(const In* in, std::int64_t* out, std::span<const index_t> shape, int axis,
                    arg_kind kind, bool last = false, const run_options& opt = {}) {
  index_t outer, len, inner;
  detail::arg_split("arg_reduce", shape, axis, outer, len, inner);
  return detail::arg_reduce_impl(in, out, outer, len, inner, kind, last, opt);
}

/// The kernel contract (kernels/kernel_contract.hpp) for the graph.
struct arg_reduce_kernel {
  static constexpr std::string_view name = "arg_reduce";
  struct problem {
    index_t shape[8] = {};
    int rank = 0;
    int axis = 0;
    arg_kind kind = arg_kind::max;
    bool last = false;
  };
  struct packed {
    index_t outer = 0, len = 0, inner = 0;
    arg_kind kind = arg_kind::max;
    bool last = false;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;
  using extents = index_t;
  template <class T>
  using view = flat_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      index_t o, l, i;
      split(p, o, l, i);
    });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<arg_reduce_kernel>(p);
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    packed k;
    split(p, k.outer, k.len, k.inner);
    k.kind = p.kind;
    k.last = p.last;
    k.ready = true;
    return k;
  }
  template <class In, class Out>
  static run_info run(flat_view<const In> in, const packed& k, flat_view<Out> out,
                      const epilogue<>&, workspace, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    static_assert(std::is_same_v<Out, std::int64_t>, "kfuse: arg_reduce writes int64 indices");
    if (k.empty()) detail::fail(name, "not initialized (initialize(problem))");
    if (zero_point != 0) detail::fail(name, "a zero point is not meaningful here");
    if (in.count != k.outer * k.len * k.inner || out.count != k.outer * k.inner)
      detail::fail(name, "views of " + std::to_string(in.count) + " and " +
                             std::to_string(out.count) + " elements, the problem takes " +
                             std::to_string(k.outer * k.len * k.inner) + " and gives " +
                             std::to_string(k.outer * k.inner));
    return detail::arg_reduce_impl(in.data, out.data, k.outer, k.len, k.inner, k.kind, k.last, opt);
  }

 private:
  static void split(const problem& p, index_t& o, index_t& l, index_t& i) {
    if (p.rank < 1 || p.rank > 8)
      detail::fail(name, "rank " + std::to_string(p.rank) + " (1 to 8)");
    if (int(p.kind) > int(arg_kind::min))
      detail::fail(name, "unknown arg_kind " + std::to_string(int(p.kind)));
    detail::arg_split(name, std::span<const index_t>(p.shape, std::size_t(p.rank)), p.axis, o, l,
                      i);
  }
};

KFUSE_END_NAMESPACE
