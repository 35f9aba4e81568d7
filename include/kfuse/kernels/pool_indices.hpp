#pragma once
// max_pool_indices: for each output of a 2-D max pooling of an NCHW tensor, the flat index in
// the input of its window's maximum (ONNX MaxPool's Indices output, torch's return_indices):
// (n * C + c) * H * W + h * W + w, or with column-major storage (n * C + c) * H * W + w * H + h.
// Padding never wins; ties go to the first position in the window's row-major order and a NaN
// wins over numbers (the first NaN's index, as arg_reduce). Not a hot path: a scalar scan per
// output, split over planes.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/arg_reduce.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/pool_shape.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

/// The kernel contract (kernels/kernel_contract.hpp) for the graph. The problem is the pooling
/// geometry (pool_shape: max, not global; its ceil_mode sets the output size) plus the storage
/// order of the indices.
struct max_pool_indices_kernel {
  static constexpr std::string_view name = "max_pool_indices";
  struct problem {
    pool_shape shape;
    bool column_major = false;
  };
  struct packed {
    problem p;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;
  using extents = index_t;
  template <class T>
  using view = flat_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      if (p.shape.kind != pool_kind::max || p.shape.global)
        detail::fail(name, "indices exist for a windowed max pooling only");
      detail::check_pool_shape(name, p.shape);
    });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<max_pool_indices_kernel>(p);
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return packed{p, true};
  }

  template <class In, class Out>
  static run_info run(flat_view<const In> in, const packed& k, flat_view<Out> out,
                      const epilogue<>&, workspace, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    static_assert(std::is_same_v<Out, std::int64_t>, "kfuse: max_pool_indices writes int64");
    if (k.empty()) detail::fail(name, "not initialized (initialize(problem))");
    if (zero_point != 0) detail::fail(name, "a zero point is not meaningful here");
    const pool_shape& s = k.p.shape;
    const index_t OH = s.out_h(), OW = s.out_w(), planes = s.n * s.c;
    if (in.count != planes * s.h * s.w || out.count != planes * OH * OW)
      detail::fail(name, "views of " + std::to_string(in.count) + " and " +
                             std::to_string(out.count) + " elements, the problem takes " +
                             std::to_string(planes * s.h * s.w) + " and gives " +
                             std::to_string(planes * OH * OW));
    detail::check_overlap(name, in.data, in.count, out.data, out.count);
    const bool col = k.p.column_major;
    parallel_for(
        0, planes, 1,
        [&](range r, int) {
          for (index_t pl = r.begin; pl < r.end; ++pl) {
            const In* x = in.data + pl * s.h * s.w;
            std::int64_t* y = out.data + pl * OH * OW;
            for (index_t oh = 0; oh < OH; ++oh)
              for (index_t ow = 0; ow < OW; ++ow) {
                const index_t h0 = std::max<index_t>(0, oh * s.stride_h - s.pad_top);
                const index_t h1 = std::min(s.h, oh * s.stride_h - s.pad_top + s.r);
                const index_t w0 = std::max<index_t>(0, ow * s.stride_w - s.pad_left);
                const index_t w1 = std::min(s.w, ow * s.stride_w - s.pad_left + s.s);
                index_t bh = h0, bw = w0;  // a window always holds an input (check_pool_shape)
                float best = to_float(x[h0 * s.w + w0]);
                for (index_t h = h0; h < h1; ++h)
                  for (index_t w = w0; w < w1; ++w) {
                    const float v = to_float(x[h * s.w + w]);
                    if (detail::arg_better<true, false>(v, best)) {
                      best = v;
                      bh = h;
                      bw = w;
                    }
                  }
                y[oh * OW + ow] =
                    std::int64_t(pl * s.h * s.w + (col ? bw * s.h + bh : bh * s.w + bw));
              }
          }
        },
        opt.threads);
    return run_info{name, "any", "scalar", "windows", pool_threads(opt.threads, "pool2d")};
  }
};

KFUSE_END_NAMESPACE
