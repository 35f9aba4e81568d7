#pragma once
// eltwise: out = epilogue(in), one pass over memory, any input and output storage types.
//
//   kfuse::eltwise(in, out, n, kfuse::epilogue<kfuse::scale, kfuse::relu>{{2.f}, {}});
//   kfuse::eltwise<kfuse::arch::native, kfuse::backend::hwy>(x_nchw, y_nchw, ep_with_bias);
//
// Values are loaded and converted to f32, run through every stage in registers, converted and
// stored once. Integer inputs enter as their integer values (put dequantize first); an integer
// output needs an epilogue that ends in quantize<E> or requantize<E>.
#include <span>

#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

template <class Ep, class Out>
constexpr void check_eltwise_output_type() {
  using produced = typename epilogue_traits<Ep>::output_elem;
  using out_elem = elem_of<Out>;
  if constexpr (std::is_void_v<produced> || std::is_same_v<produced, f32>) {
    static_assert(elem_traits<out_elem>::is_float,
                  "kfuse::eltwise: the output holds integers but the epilogue does not produce "
                  "them: end the epilogue with quantize<E> or requantize<E> of the output type");
  } else {
    static_assert(std::is_same_v<produced, out_elem>,
                  "kfuse::eltwise: the epilogue's last type-changing stage (cast / quantize / "
                  "requantize) produces a different element type than the output tensor holds");
  }
}

// One contiguous run [0, len) whose lane 0 sits at flat index i0 and channel c0.
template <class V, bool PerLane, class In, class Out, class Ep>
KFUSE_INLINE void eltwise_run(const In* KFUSE_RESTRICT in, Out* KFUSE_RESTRICT out, index_t len,
                              index_t i0, index_t c0, const Ep& ep) {
  constexpr int L = V::lanes;
  index_t j = 0;
  // Two vectors per iteration: independent chains keep both FMA pipes busy.
  for (; j + 2 * L <= len; j += 2 * L) {
    const lane_ctx<V, PerLane> c_a{i0 + j, c0 + (PerLane ? j : 0), L};
    const lane_ctx<V, PerLane> c_b{i0 + j + L, c0 + (PerLane ? j + L : 0), L};
    const V a = apply(ep, simd::load<V>(in + j), c_a);
    const V b = apply(ep, simd::load<V>(in + j + L), c_b);
    simd::store(out + j, a);
    simd::store(out + j + L, b);
  }
  for (; j + L <= len; j += L) {
    const lane_ctx<V, PerLane> c{i0 + j, c0 + (PerLane ? j : 0), L};
    simd::store(out + j, apply(ep, simd::load<V>(in + j), c));
  }
  if (j < len) {
    const int n = int(len - j);
    const lane_ctx<V, PerLane> c{i0 + j, c0 + (PerLane ? j : 0), n};
    simd::store_partial(out + j, apply(ep, simd::load_partial<V>(in + j, n), c), n);
  }
}

// Rows of a dense tensor: `rows` runs of `row_len` elements. With channels (!= 0) the channel
// of row r is r % channels (channels-first), or each lane's offset in the row (channels-last).
template <class A, class B, class In, class Out, class Ep>
run_info eltwise_rows(const In* in, Out* out, index_t rows, index_t row_len, index_t channels,
                      bool channels_last, const Ep& ep, const run_options& opt) {
  using V = simd::vec_for<A, B>;
  const index_t total = rows * row_len;
  // ~64 KiB of input per chunk: big enough to amortize the hand-off, small enough to balance.
  constexpr index_t target = index_t(1) << 14;
  // Flat: the one row is split into rows of `target` elements (the last one shorter), so that
  // one loop body serves both cases (one inlined copy of the vector loop per layout, not two).
  if (channels == 0 && rows == 1) {
    row_len = target;
    rows = (total + target - 1) / target;
  }
  const index_t rows_per_chunk = std::max<index_t>(1, target / std::max<index_t>(row_len, 1));
  const int pool = pool_threads(opt.threads, "eltwise");
  const int used = int(std::min<index_t>(pool, (rows + rows_per_chunk - 1) / rows_per_chunk));
  parallel_for(
      0, rows, rows_per_chunk,
      [&](range r, int) {
        for (index_t row = r.begin; row < r.end; ++row) {
          const index_t i0 = row * row_len, len = std::min(row_len, total - i0);
          if constexpr (epilogue_traits<Ep>::may_use_channel) {
            if (channels_last) {
              eltwise_run<V, true>(in + i0, out + i0, len, i0, 0, ep);
              continue;
            }
          }
          eltwise_run<V, false>(in + i0, out + i0, len, i0, channels ? row % channels : 0, ep);
        }
      },
      opt.threads);
  return run_info{"eltwise", A::name, simd::impl_name<A, B>(), "eltwise", used};
}

template <class A, class B, class In, class Out, class... S>
run_info eltwise_impl(const In* in, Out* out, index_t n, const dims4* dims, bool channels_last,
                      const epilogue<S...>& ep, const run_options& opt) {
  using Ep = epilogue<S...>;
  check_eltwise_output_type<Ep, Out>();
  constexpr std::string_view k = "eltwise";
  check_buffer(k, "input", in, n);
  check_buffer(k, "output", out, n);
  check_overlap(k, in, n, out, n);
  const index_t channels = dims ? dims->c : 0;
  validate(ep, k, n, channels, out, sizeof(Out) * std::size_t(n), sizeof(Out));
  if (n == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "eltwise", 0};
  if (!dims || !uses_channel(ep)) return eltwise_rows<A, B>(in, out, 1, n, 0, false, ep, opt);
  if (channels_last)
    return eltwise_rows<A, B>(in, out, n / dims->c, dims->c, dims->c, true, ep, opt);
  return eltwise_rows<A, B>(in, out, dims->n * dims->c, dims->h * dims->w, dims->c, false, ep, opt);
}

}  // namespace detail

/// Flat: n elements, no channel axis (a stage needing channels is a compile error).
template <class A = arch::native, class B = backend::xsimd, class In, class Out, class... S>
run_info eltwise(const In* in, Out* out, index_t n, const epilogue<S...>& ep,
                 const run_options& opt = {}) {
  static_assert(!epilogue_traits<epilogue<S...>>::needs_channel,
                "kfuse::eltwise: a stage needs a channel axis (e.g. bias): pass tensor_views with "
                "a layout instead of flat pointers");
  return detail::eltwise_impl<A, B>(in, out, n, nullptr, false, ep, opt);
}

template <class A = arch::native, class B = backend::xsimd, class In, class Out, class... S>
run_info eltwise(std::span<In> in, std::span<Out> out, const epilogue<S...>& ep,
                 const run_options& opt = {}) {
  if (in.size() != out.size())
    detail::fail("eltwise", "input has " + std::to_string(in.size()) + " elements, the output " +
                                std::to_string(out.size()));
  return eltwise<A, B>(static_cast<const In*>(in.data()), out.data(), index_t(in.size()), ep, opt);
}

/// A dense 4-D tensor in layout L; per-channel stages use its channel axis.
template <class A = arch::native, class B = backend::xsimd, class In, class Out, layout_tag L,
          class... S>
run_info eltwise(tensor_view<In, L> in, tensor_view<Out, L> out, const epilogue<S...>& ep,
                 const run_options& opt = {}) {
  if (!(in.dims == out.dims)) detail::fail("eltwise", "input and output shapes differ");
  const dims4& d = in.dims;
  const index_t n = detail::checked_count("eltwise", "the tensor", {d.n, d.c, d.h, d.w});
  return detail::eltwise_impl<A, B>(static_cast<const std::remove_const_t<In>*>(in.data), out.data,
                                    n, &d, std::is_same_v<L, nhwc>, ep, opt);
}

KFUSE_END_NAMESPACE
