#pragma once
// A register tile of accumulators (Rows x NV vectors) on its way out of a kernel: zeroed or
// resumed from partial sums, saved as partial sums, or finished by the epilogue and stored once.
// Shared by the gemm, conv and depthwise tiles.
#include <algorithm>
#include <concepts>
#include <type_traits>

#include "kfuse/epilogue/activations.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/epilogue/quantize.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Starts a tile's accumulators at zero, or from the partial sums (Rows x NV x L floats) that an
/// earlier range of K saved with save_tile.
template <class V, int Rows, int NV>
KFUSE_INLINE void start_tile(V (&acc)[Rows][NV], const float* part, bool first) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j)
      acc[r][j] = first ? V(0.f) : simd::load<V>(part + (r * NV + j) * V::lanes);
}

/// Saves a tile's accumulators as partial sums for the next range of K.
template <class V, int Rows, int NV>
KFUSE_INLINE void save_tile(const V (&acc)[Rows][NV], float* part) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) simd::store(part + (r * NV + j) * V::lanes, acc[r][j]);
}

/// Vector (r, j) of a tile, x, stored as store_each describes (column j * lanes < valid).
template <bool PerLane, class V, class Out, class F>
KFUSE_INLINE void store_vector(V x, Out* KFUSE_RESTRICT out, index_t ld, index_t flat0,
                               index_t flat_ld, index_t ch0, index_t valid, index_t ch_step, int r,
                               int j, const F& value) {
  constexpr int L = V::lanes;
  const index_t col = j * L;
  const int n = int(std::min<index_t>(L, valid - col));
  const lane_ctx<V, PerLane> ctx{flat0 + r * flat_ld + col, PerLane ? ch0 + col : ch0 + r * ch_step,
                                 n};
  const V y = value(x, r, j, ctx);
  if (n == L)
    simd::store_dot(out + r * ld + col, y);
  else
    simd::store_partial(out + r * ld + col, y, n);
}

/// Stores a finished Rows x NV tile once: row r goes to out + r * ld (its first `valid`
/// columns), vector (r, j) being value(acc[r][j], r, j, ctx); ctx gets flat index
/// flat0 + r * flat_ld + col and channel ch0 + col (PerLane) or ch0 + r * ch_step (rows of
/// channels: 1; rows of one channel's plane, an NCHW tile's: 0). `value` must not capture acc:
/// a closure holding a reference to the tile made GCC keep every accumulator in memory.
/// Whole bf16 vectors are stored as simd::store_dot converts (hardware rounding where the arch
/// has it: bf16 activations feed the next layer's dot products, which flush denormals anyway;
/// the bit-exact rounding's ~6 instructions a vector were 15% of a 16 -> 64 1x1 conv on AMX);
/// partial vectors (channel tails) keep store's rounding, which differs only for denormals.
template <bool PerLane, class V, int Rows, int NV, class Out, class F>
KFUSE_INLINE void store_each(const V (&acc)[Rows][NV], Out* KFUSE_RESTRICT out, index_t ld,
                             index_t flat0, index_t flat_ld, index_t ch0, index_t valid,
                             index_t ch_step, const F& value) {
  constexpr int L = V::lanes;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if (j * L >= valid) break;
      store_vector<PerLane>(acc[r][j], out, ld, flat0, flat_ld, ch0, valid, ch_step, r, j, value);
    }
  }
}

/// An epilogue the kernels run inline: one stage that can state itself as a common_form (the
/// graph's chain), alone or followed by the quantize<E> of a plan's int8 output.
template <class S>
concept common_stage = requires(const S& s) {
  { s.common() } -> std::same_as<common_form>;
};
template <class Ep>
inline constexpr bool has_common_form = false;
template <common_stage S>
inline constexpr bool has_common_form<epilogue<S>> = true;
template <common_stage S, class E>
inline constexpr bool has_common_form<epilogue<S, quantize<E>>> = true;

/// What runs after the common form: nothing, or the output's quantize<E>.
struct no_tail {
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return x;
  }
};
template <class S>
KFUSE_INLINE no_tail common_tail(const epilogue<S>&) {
  return {};
}
template <class S, class E>
KFUSE_INLINE quantize<E> common_tail(const epilogue<S, quantize<E>>& ep) {
  return stage_at<1>(ep.stages);
}

/// A common_form's value of an accumulator: tail(act(x * scale + bias + addend)).
template <class Act, class Tail>
struct common_value {
  const common_form& f;
  Act act;
  Tail tail;
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, int, int, const Ctx& ctx) const {
    if (f.scale && f.bias)  // one FMA: the int8 dequantize and bias (the FMA pipes bind here)
      x = simd::fma(x, ctx.channel_param(f.scale), ctx.channel_param(f.bias));
    else if (f.scale)
      x = x * ctx.channel_param(f.scale);
    else if (f.bias)
      x = x + ctx.channel_param(f.bias);
    if (f.addend) x = x + ctx.load(f.addend);
    return tail(act(x, ctx), ctx);
  }
};

/// SiLU for outputs rounded to bf16 or int8, or computed from such inputs (LowpInput: bf16 or
/// int8 activations or weights): its exp's 8e-5 relative error is far below their rounding
/// (2^-9 relative; a quantization step).
struct silu_coarse {
  template <class V, class Ctx>
  KFUSE_INLINE V operator()(V x, const Ctx&) const {
    return fast_silu<true>(x);
  }
};

/// A saved tile stored through a common_form whose activation is not a clamp (see store_tile).
template <bool PerLane, bool Coarse, class V, int Rows, int NV, class Out, class Tail>
KFUSE_NOINLINE void store_saved_common(const float* saved, Out* KFUSE_RESTRICT out, index_t ld,
                                       index_t flat0, index_t flat_ld, index_t ch0, index_t valid,
                                       index_t ch_step, const common_form& f, const Tail& tail) {
  using act = common_form::act;
  constexpr int L = V::lanes;
  // A rolled loop over the saved vectors: unrolled (store_each), the 4 activations x 24 vectors
  // of a 6x4 tile made a 38 KB function whose select waited on each vdivps in turn.
  const auto store = [&](auto a) {
    const common_value<decltype(a), Tail> value{f, a, tail};
#pragma GCC unroll 1
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 1
      for (int j = 0; j < NV; ++j) {
        if (j * L >= valid) break;
        store_vector<PerLane>(simd::load<V>(saved + (r * NV + j) * L), out, ld, flat0, flat_ld, ch0,
                              valid, ch_step, r, j, value);
      }
    }
  };
  switch (f.kind) {
    case act::hardswish:
      return store(kfuse::hardswish{});
    case act::gelu_erf:
      return store(kfuse::gelu_erf{});
    case act::gelu_tanh:
      return store(kfuse::gelu_tanh{});
    case act::silu:
      if constexpr (Coarse || !std::is_same_v<Out, float>)
        return store(silu_coarse{});
      else
        return store(kfuse::silu{});
    default:
      return;
  }
}

/// Runs the epilogue on a finished Rows x NV tile and stores it once (store_each). An
/// out-of-line epilogue (the graph's run-time chain, epilogue_traits) would be a call per
/// output vector, and each call clobbers every vector register (GCC saved and restored the tile
/// around each one, and the chain dispatched its stages once per vector: gemm ran 10-15% slower
/// than with the same compile-time stages). So the tile is saved to memory and the epilogue
/// runs on it stage by stage, unless the epilogue is of the common form, which runs in one pass:
/// inline for a clamp, out of line from a saved copy for the other activations (inlined, their
/// constants were hoisted into registers for the whole kernel and GCC spilled the accumulators
/// of the K loop instead). One pass instead of one per stage: MiniLM's int8 FFN linear with
/// [dequantize, bias, gelu_erf, quantize] spent ~47 cycles per output vector in five passes and
/// ~36 in this one (perf, Zen 4), of which GELU's erf is ~20.
template <bool PerLane, bool LowpInput = false, class V, int Rows, int NV, class Out, class Ep>
KFUSE_INLINE void store_tile(const V (&acc)[Rows][NV], Out* KFUSE_RESTRICT out, index_t ld,
                             index_t flat0, index_t flat_ld, index_t ch0, index_t valid,
                             const Ep& ep, index_t ch_step = 1) {
  constexpr int L = V::lanes;
  if constexpr (has_common_form<Ep>) {
    const common_form f = stage_at<0>(ep.stages).common();
    const auto tail = common_tail(ep);
    if (f.kind == common_form::act::clamp)
      return store_each<PerLane>(acc, out, ld, flat0, flat_ld, ch0, valid, ch_step,
                                 common_value<kfuse::clamp, decltype(tail)>{f, {f.lo, f.hi}, tail});
    if (f.kind != common_form::act::other) {
      alignas(64) float saved[Rows * NV * L];
      save_tile(acc, saved);
      return store_saved_common<PerLane, LowpInput, V, Rows, NV>(saved, out, ld, flat0, flat_ld,
                                                                 ch0, valid, ch_step, f, tail);
    }
  }
  if constexpr (epilogue_traits<Ep>::out_of_line) {
    alignas(64) float saved[Rows * NV * L];
    save_tile(acc, saved);
    apply_to_tile<V, PerLane>(ep, saved_tile{saved, Rows, NV, valid, flat0, flat_ld, ch0, ch_step});
    const float* from = saved;
    store_each<PerLane>(acc, out, ld, flat0, flat_ld, ch0, valid, ch_step,
                        [from](V, int r, int j, const auto&)
                            KFUSE_INLINE_LAMBDA { return simd::load<V>(from + (r * NV + j) * L); });
  } else {
    store_each<PerLane>(acc, out, ld, flat0, flat_ld, ch0, valid, ch_step,
                        [&ep](V x, int, int, const auto& ctx)
                            KFUSE_INLINE_LAMBDA { return apply(ep, x, ctx); });
  }
}

}  // namespace detail

KFUSE_END_NAMESPACE
