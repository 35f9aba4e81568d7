#pragma once
// softmax: y = exp(x - max) / sum(exp(x - max)) over one axis of a dense tensor (log_softmax
// with softmax_options{.log = true}: y = x - max - log(sum)). f32 compute for every storage type.
//
//   kfuse::softmax(x, y, rows, cols);                                  // last axis of a matrix
//   const kfuse::index_t shape[] = {n, heads, len, len};
//   kfuse::softmax(x, y, shape, 1);                                    // any axis
//   kfuse::softmax(kfuse::view<kfuse::nchw>(x, d), kfuse::view<kfuse::nchw>(y, d), 1);  // over C
//
// Last axis (the row is contiguous), two methods:
//  - cached rows (rows up to softmax_cached_row_limit elements): pass 1 max, pass 2 exp(x - max)
//    stored into the f32 output while summing, pass 3 scales the output in place. One exp per
//    element; passes 2 and 3 hit the row in L1/L2, so memory sees one read and one write.
//    A non-f32 output cannot hold the unscaled exp without a second rounding: it goes to an L1
//    scratch row instead (rows up to softmax_scratch_row_limit; longer ones recompute the exp).
//    Large f32 outputs (a quarter of the L3 and more, aligned: simd/stream.hpp) use the scratch
//    row too and streaming stores.
//  - online (longer rows): pass 1 keeps a running max and a rescaled sum per lane (one rescale
//    per block of 4 vectors), pass 2 computes exp and scale and stores: two reads and one write
//    of memory whatever the row length, about 2.25 exps per element.
// Other axes (outer x axis x inner, inner contiguous): vectorized over inner, 4 vectors of
// columns at a time with their max and sum in registers, the same three passes down the axis.
//
// Every exp is exp(d) for d = x - max <= 0: 2^(d log2 e) by simd::exp2_bounded (relative error
// < 3e-7), with d log2 e clamped at -127 so that -inf entries give exactly 0. Subtracting before
// scaling keeps large values (1e4) exact. A row whose entries are all -inf (or contains +inf or
// NaN) gives NaN, as the formula does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/kernels/softmax_rows.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/simd/stream.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

inline std::string shape_string(std::span<const index_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <class A, class B, class In, class Out>
run_info softmax_impl(const In* in, Out* out, index_t outer, index_t axis, index_t inner,
                      const softmax_options& so, const run_options& opt) {
  static_assert(is_float_storage<In> && is_float_storage<Out>,
                "kfuse::softmax: input and output must be float storage types (float, bf16_t, "
                "f16_t)");
  using V = simd::vec_for<A, B>;
  constexpr int L = V::lanes;
  constexpr std::string_view k = "softmax";
  const index_t n = checked_count(k, "the tensor", {outer, axis, inner});
  check_buffer(k, "input", in, n);
  check_buffer(k, "output", out, n);
  check_overlap(k, in, n, out, n);
  if (n == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};
  // ~64 KiB of input per chunk of work: amortizes the hand-off, still balances.
  constexpr index_t target = index_t(1) << 14;
  const int pool = pool_threads(opt.threads, "softmax");
  if (inner == 1) {
    const bool online = so.method == softmax_method::online ||
                        (so.method == softmax_method::automatic && axis > softmax_cached_row_limit);
    const bool stream =
        use_streaming_stores<V>(out, outer, axis) && (online || axis <= softmax_scratch_row_limit);
    const index_t grain = streaming_grain(std::max<index_t>(1, target / axis), outer, pool, stream);
    auto rows_with = [&]<bool Stream>() {
      parallel_for(
          0, outer, grain,
          [&](range r, int) {
            constexpr bool f32_out = std::is_same_v<Out, float>;
            alignas(64) float scratch[Stream || !f32_out ? softmax_scratch_row_limit : 1];
            float* row_scratch =
                (Stream || !f32_out) && axis <= softmax_scratch_row_limit ? scratch : nullptr;
            if (online) {
              for (index_t row = r.begin; row < r.end; ++row)
                softmax_row_online<V, Stream>(in + row * axis, out + row * axis, axis, so.log);
            } else {
              float m = row_max<V>(in + r.begin * axis, axis);
              for (index_t row = r.begin; row < r.end; ++row) {
                const In* x = in + row * axis;
                m = softmax_row_cached<V, Stream>(x, out + row * axis, axis, so.log, row_scratch, m,
                                                  row + 1 < r.end ? x + axis : nullptr);
              }
            }
            if constexpr (Stream) stream_fence();
          },
          opt.threads);
    };
    if constexpr (std::is_same_v<Out, float> && stream_ops<typename V::impl>::available) {
      if (stream)
        rows_with.template operator()<true>();
      else
        rows_with.template operator()<false>();
    } else {
      rows_with.template operator()<false>();
    }
    const int used = int(std::min<index_t>(pool, (outer + grain - 1) / grain));
    const char* mk = online ? (stream ? "online rows, streaming stores" : "online rows")
                            : (stream ? "cached rows, streaming stores" : "cached rows");
    return run_info{k, A::name, simd::impl_name<A, B>(), mk, used};
  }
  const index_t group = 4 * L;
  const index_t groups = (inner + group - 1) / group;
  const index_t items = outer * groups;
  const index_t grain = std::max<index_t>(1, target / (axis * group));
  parallel_for(
      0, items, grain,
      [&](range r, int) {
        for (index_t it = r.begin; it < r.end; ++it) {
          const index_t o = it / groups, c0 = (it % groups) * group;
          const index_t off = o * axis * inner + c0;
          softmax_column_group<V>(in + off, out + off, axis, inner, std::min(group, inner - c0),
                                  so.log);
        }
      },
      opt.threads);
  const int used = int(std::min<index_t>(pool, (items + grain - 1) / grain));
  return run_info{k, A::name, simd::impl_name<A, B>(), "columns", used};
}

template <class A, class B, class In, class Out>
run_info softmax_shape(const In* in, Out* out, std::span<const index_t> shape, int axis,
                       const softmax_options& so, const run_options& opt) {
  constexpr std::string_view k = "softmax";
  const int rank = int(shape.size());
  if (axis < -rank || axis >= rank)
    fail(k, "axis " + std::to_string(axis) + " is out of range for a " + std::to_string(rank) +
                "-D tensor of shape " + shape_string(shape));
  if (axis < 0) axis += rank;
  checked_count(k, "the tensor", shape);  // then every partial product below fits
  index_t outer = 1, inner = 1;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < 0) fail(k, "negative extent in shape " + shape_string(shape));
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  return softmax_impl<A, B>(in, out, outer, shape[axis], inner, so, opt);
}

}  // namespace detail

/// Softmax over `axis` (negative counts from the end) of a dense tensor of extents `shape`
/// (row-major, last extent contiguous).
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info softmax(const In* in, Out* out, std::span<const index_t> shape, int axis,
                 const softmax_options& so = {}, const run_options& opt = {}) {
  return detail::softmax_shape<A, B>(in, out, shape, axis, so, opt);
}

/// Softmax over the last axis of a rows x cols matrix.
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info softmax(const In* in, Out* out, index_t rows, index_t cols, const softmax_options& so = {},
                 const run_options& opt = {}) {
  const index_t shape[2] = {rows, cols};
  return detail::softmax_shape<A, B>(in, out, shape, -1, so, opt);
}

/// Spans: their sizes must equal the product of the extents.
template <class A = arch::native, class B = backend::xsimd, class In, class Out>
run_info softmax(std::span<In> in, std::span<Out> out, std::span<const index_t> shape, int axis,
                 const softmax_options& so = {}, const run_options& opt = {}) {
  const index_t n = detail::checked_count("softmax", "the tensor", shape);
  if (index_t(in.size()) != n || index_t(out.size()) != n)
    detail::fail("softmax", "input has " + std::to_string(in.size()) + " elements and output " +
                                std::to_string(out.size()) + ", shape " +
                                detail::shape_string(shape) + " has " + std::to_string(n));
  return detail::softmax_shape<A, B>(static_cast<const std::remove_const_t<In>*>(in.data()),
                                     out.data(), shape, axis, so, opt);
}

/// A 4-D tensor in layout L; `axis` is logical: 0 = N, 1 = C, 2 = H, 3 = W.
template <class A = arch::native, class B = backend::xsimd, class In, class Out, layout_tag L>
run_info softmax(tensor_view<In, L> in, tensor_view<Out, L> out, int axis,
                 const softmax_options& so = {}, const run_options& opt = {}) {
  if (!(in.dims == out.dims)) detail::fail("softmax", "input and output shapes differ");
  if (axis < -4 || axis >= 4)
    detail::fail("softmax", "axis " + std::to_string(axis) + " is out of range for a 4-D tensor");
  if (axis < 0) axis += 4;
  const dims4& d = in.dims;
  index_t shape[4];
  int mem_axis = axis;
  if constexpr (std::is_same_v<L, nchw>) {
    shape[0] = d.n, shape[1] = d.c, shape[2] = d.h, shape[3] = d.w;
  } else {
    shape[0] = d.n, shape[1] = d.h, shape[2] = d.w, shape[3] = d.c;
    constexpr int to_mem[4] = {0, 3, 1, 2};
    mem_axis = to_mem[axis];
  }
  return detail::softmax_shape<A, B>(static_cast<const std::remove_const_t<In>*>(in.data), out.data,
                                     std::span<const index_t>(shape, 4), mem_axis, so, opt);
}

/// Softmax (or log-softmax) over one axis of a dense tensor as a kernel of the contract
/// (kernels/kernel_contract.hpp): the problem is the extents (memory order, rank <= 8) and the
/// axis; run() takes flat views of its element count. No workspace (a cached row lives on the
/// stack) and no epilogue.
template <class A = arch::native, class B = backend::xsimd>
struct softmax_kernel {
  static constexpr std::string_view name = "softmax";
  struct problem {
    index_t shape[8] = {};
    int rank = 0;
    int axis = -1;  // negative: from the end
    softmax_options options{};
  };
  struct packed {
    problem p{};
    index_t count = 0;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;
  using extents = index_t;
  template <class T>
  using view = flat_view<T>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      if (p.rank < 1 || p.rank > 8)
        detail::fail(name, "rank " + std::to_string(p.rank) + " (1 to 8)");
      if (p.axis < -p.rank || p.axis >= p.rank)
        detail::fail(name, "axis " + std::to_string(p.axis) + " is out of range for rank " +
                               std::to_string(p.rank));
      detail::checked_count(name, "the tensor",
                            std::span<const index_t>(p.shape, std::size_t(p.rank)));
    });
  }
  static std::size_t workspace_size(const problem& p, int) {
    return detail::no_workspace<softmax_kernel>(p);
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return {p,
            detail::checked_count(name, "the tensor",
                                  std::span<const index_t>(p.shape, std::size_t(p.rank))),
            true};
  }
  template <class In, class Out>
  static run_info run(flat_view<const In> in, const packed& k, flat_view<Out> out,
                      const epilogue<>&, workspace, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    if (k.empty()) detail::fail(name, "the softmax is not initialized (initialize(problem))");
    if (zero_point != 0) detail::fail(name, "a zero point is only meaningful for integer inputs");
    if (in.count != k.count || out.count != k.count)
      detail::fail(name, "views of " + std::to_string(in.count) + " and " +
                             std::to_string(out.count) + " elements, the tensor has " +
                             std::to_string(k.count));
    return detail::softmax_shape<A, B>(in.data, out.data,
                                       std::span<const index_t>(k.p.shape, std::size_t(k.p.rank)),
                                       k.p.axis, k.p.options, opt);
  }
};

KFUSE_END_NAMESPACE
