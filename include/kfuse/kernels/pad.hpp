#pragma once
// pad: a dense tensor grown (or, with negative pads, cropped) along any axes, the new positions
// filled with a constant, the mirror image without the edge (reflect) or the edge value repeated
// (edge), as ONNX Pad and torch.nn.functional.pad define them.
//
//   const kfuse::index_t shape[] = {1, 3, 224, 224}, before[] = {0, 0, 3, 3}, after[] = {0, 0, 3,
//   3}; kfuse::pad(x, y, shape, before, after, kfuse::pad_mode::reflect);   // y: [1, 3, 230, 230]
//
// The output is written row by row (its last axis): each row's source row is found once per
// axis (or the row is all fill), then the row is three runs: the mapped (or filled) positions
// before, one copy of the input's run, the positions after. Work is split over rows.
#include <algorithm>
#include <cstring>
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
#include "kfuse/types/pad_mode.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

struct pad_plan {
  static constexpr int max_rank = 8;
  int rank = 0;
  index_t in[max_rank] = {}, out[max_rank] = {}, before[max_rank] = {};
  pad_mode mode = pad_mode::constant;
  index_t in_count = 0, out_count = 0;
};

inline pad_plan make_pad_plan(std::string_view k, std::span<const index_t> shape,
                              std::span<const index_t> before, std::span<const index_t> after,
                              pad_mode mode) {
  const std::size_t r = shape.size();
  if (before.size() != r || after.size() != r)
    fail(k, std::to_string(before.size()) + " and " + std::to_string(after.size()) +
                " pads for a " + std::to_string(r) + "-D tensor");
  if (r == 0 || r > std::size_t(pad_plan::max_rank))
    fail(k, "rank " + std::to_string(r) + " (1 to 8)");
  if (int(mode) > int(pad_mode::edge)) fail(k, "unknown pad_mode " + std::to_string(int(mode)));
  pad_plan p;
  p.rank = int(r);
  p.mode = mode;
  p.in_count = checked_count(k, "the input", shape);
  for (std::size_t d = 0; d < r; ++d) {
    const index_t n = shape[d], b = before[d], a = after[d];
    if (n < 1) fail(k, "input extent " + std::to_string(n) + " on axis " + std::to_string(d));
    if (b > (index_t(1) << 40) || a > (index_t(1) << 40) || b < -n || a < -n || n + b + a < 1)
      fail(k, "pads " + std::to_string(b) + " / " + std::to_string(a) + " on axis " +
                  std::to_string(d) + " of extent " + std::to_string(n) +
                  " (the result must keep at least one position)");
    if (mode == pad_mode::reflect && (b >= n || a >= n))
      fail(k, "reflect pads " + std::to_string(b) + " / " + std::to_string(a) + " on axis " +
                  std::to_string(d) + " must be smaller than its extent " + std::to_string(n));
    p.in[d] = n;
    p.out[d] = n + b + a;
    p.before[d] = b;
  }
  p.out_count = checked_count(k, "the output", std::span<const index_t>(p.out, r));
  return p;
}

/// The input index of output position o on an axis (-1: a constant fill).
inline index_t pad_source(index_t o, index_t before, index_t n, pad_mode mode) {
  const index_t i = o - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case pad_mode::constant:
      return -1;
    case pad_mode::edge:
      return i < 0 ? 0 : n - 1;
    default:  // reflect: pads < n, so one reflection lands inside
      return n == 1 ? 0 : i < 0 ? -i : 2 * (n - 1) - i;
  }
}

template <class T>
void pad_rows(const T* in, T* out, const pad_plan& p, T fill, index_t begin, index_t end) {
  const int r = p.rank;
  const index_t W = p.out[r - 1], n = p.in[r - 1], b = p.before[r - 1];
  // The run of the last axis that copies the input: output [lo, hi) from input lo - b.
  const index_t lo = std::clamp<index_t>(b, 0, W), hi = std::clamp<index_t>(b + n, 0, W);
  for (index_t row = begin; row < end; ++row) {
    T* y = out + row * W;
    // The source row: the mapped index on every outer axis (or none: all fill).
    index_t rem = row, src = 0, stride = n;
    bool filled = false;
    for (int d = r - 2; d >= 0; --d) {
      const index_t o = rem % p.out[d];
      rem /= p.out[d];
      const index_t i = pad_source(o, p.before[d], p.in[d], p.mode);
      if (i < 0) filled = true;
      src += i * stride;
      stride *= p.in[d];
    }
    if (filled) {
      std::fill(y, y + W, fill);
      continue;
    }
    const T* x = in + src;
    for (index_t j = 0; j < lo; ++j) {
      const index_t i = pad_source(j, b, n, p.mode);
      y[j] = i < 0 ? fill : x[i];
    }
    if (hi > lo) std::memcpy(y + lo, x + (lo - b), sizeof(T) * std::size_t(hi - lo));
    for (index_t j = std::max(hi, lo); j < W; ++j) {
      const index_t i = pad_source(j, b, n, p.mode);
      y[j] = i < 0 ? fill : x[i];
    }
  }
}

template <class T>
run_info pad_impl(const T* in, T* out, const pad_plan& p, T fill, const run_options& opt) {
  constexpr std::string_view k = "pad";
  check_buffer(k, "input", in, p.in_count);
  check_buffer(k, "output", out, p.out_count);
  check_overlap(k, in, p.in_count, out, p.out_count);
  const index_t W = p.out[p.rank - 1];
  const index_t rows = p.out_count / W;
  const index_t grain = std::max<index_t>(1, (index_t(1) << 14) / W);
  parallel_for(
      0, rows, grain, [&](range rg, int) { pad_rows(in, out, p, fill, rg.begin, rg.end); },
      opt.threads);
  const int used =
      int(std::min<index_t>(pool_threads(opt.threads, "pad"), (rows + grain - 1) / grain));
  return run_info{k, "any", "scalar", "rows", used};
}

}  // namespace detail

/// y = x padded by before[d] / after[d] positions on each axis d (negative: cropped), the new
/// positions filled per `mode` (`value` for pad_mode::constant). T: any trivially copyable
/// element (float, bf16_t, int8...); the value is converted to T.
template <class T>
run_info pad(const T* in, T* out, std::span<const index_t> shape, std::span<const index_t> before,
             std::span<const index_t> after, pad_mode mode, float value = 0.f,
             const run_options& opt = {}) {
  return detail::pad_impl(in, out, detail::make_pad_plan("pad", shape, before, after, mode),
                          from_float<T>(value), opt);
}

/// The kernel contract (kernels/kernel_contract.hpp) for the graph.
struct pad_kernel {
  static constexpr std::string_view name = "pad";
  struct problem {
    index_t shape[8] = {}, before[8] = {}, after[8] = {};
    int rank = 0;
    pad_mode mode = pad_mode::constant;
    float value = 0.f;
  };
  struct packed {
    detail::pad_plan plan{};
    float value = 0.f;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;
  using extents = index_t;
  template <class T>
  using view = flat_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] { plan_of(p); });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<pad_kernel>(p);
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return {plan_of(p), p.value, true};
  }
  template <class In, class Out>
  static run_info run(flat_view<const In> in, const packed& k, flat_view<Out> out,
                      const epilogue<>&, workspace, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    static_assert(std::is_same_v<In, Out>, "kfuse: pad keeps the element type");
    if (k.empty()) detail::fail(name, "the pad is not initialized (initialize(problem))");
    if (zero_point != 0) detail::fail(name, "a zero point is not meaningful for pad");
    if (in.count != k.plan.in_count || out.count != k.plan.out_count)
      detail::fail(name, "views of " + std::to_string(in.count) + " and " +
                             std::to_string(out.count) + " elements, the pad takes " +
                             std::to_string(k.plan.in_count) + " and gives " +
                             std::to_string(k.plan.out_count));
    return detail::pad_impl(in.data, out.data, k.plan, from_float<Out>(k.value), opt);
  }

 private:
  static detail::pad_plan plan_of(const problem& p) {
    if (p.rank < 1 || p.rank > 8)
      detail::fail(name, "rank " + std::to_string(p.rank) + " (1 to 8)");
    const std::size_t r = std::size_t(p.rank);
    return detail::make_pad_plan(name, std::span<const index_t>(p.shape, r),
                                 std::span<const index_t>(p.before, r),
                                 std::span<const index_t>(p.after, r), p.mode);
  }
};

KFUSE_END_NAMESPACE
