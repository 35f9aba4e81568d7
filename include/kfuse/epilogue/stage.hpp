#pragma once
// What an epilogue stage is, and the context a kernel hands it.
//
// A stage is a small aggregate: its parameters are its fields, and it has one templated
//   template <class V, class Ctx> V operator()(V x, const Ctx& ctx) const;
// that maps a vector of f32 values (simd::vec<...>, or a one-lane vec on the generic arch) to
// another. The same body serves every arch and backend. Optional static members:
//   name (std::string_view), needs_channel (bool), cost (int), output_elem (an element tag:
//   the storage type this stage produces), out_of_line (bool: the body is too big to be inlined
//   at every output vector, see epilogue_traits), an apply_tile member (saved_tile), a
//   common() member (common_form) and a validate(check) template member.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "kfuse/detail/bytes_overlap.hpp"
#include "kfuse/error.hpp"
#include "kfuse/simd/vec.hpp"

KFUSE_BEGIN_NAMESPACE

/// Where the lanes of a vector sit in the tensor. Kernels build it; stages read parameters
/// through it so that one stage body serves every layout, tail and kernel.
///  - i: flat element index of lane 0 (for elementwise second tensors)
///  - c: channel of lane 0; with ChannelPerLane lane k has channel c + k (channels-last rows,
///       GEMM columns), otherwise every lane has channel c (channels-first rows)
///  - n: number of valid lanes (less than V::lanes only in a tail)
template <class V, bool ChannelPerLane>
struct lane_ctx {
  static constexpr bool channel_per_lane = ChannelPerLane;
  index_t i = 0;
  index_t c = 0;
  int n = V::lanes;

  /// The n values of an elementwise operand at the lanes' positions.
  template <class T>
  KFUSE_INLINE V load(const T* base) const {
    return n == V::lanes ? simd::load<V>(base + i) : simd::load_partial<V>(base + i, n);
  }
  /// The per-channel parameter of every lane.
  template <class T>
  KFUSE_INLINE V channel_param(const T* per_channel) const {
    if constexpr (ChannelPerLane)
      return n == V::lanes ? simd::load<V>(per_channel + c)
                           : simd::load_partial<V>(per_channel + c, n);
    else
      return V(to_float(per_channel[c]));
  }
};

/// A kernel's register tile saved to memory before an out-of-line epilogue (epilogue_traits):
/// `rows` x `nv` vectors of f32 values, row r at vals + r * nv * V::lanes, of which the first
/// `valid` columns are real. Vector (r, j) sits at flat index flat0 + r * flat_ld + j * lanes,
/// channel ch0 + j * lanes (PerLane) or ch0 + r * ch_step (rows of channels: 1; rows of one
/// channel's plane, as an NCHW tile's: 0). A stage may run on the whole tile at once with
///   template <class V, bool PerLane> void apply_tile(const saved_tile&) const;
/// (one dispatch per tile instead of one per vector); other stages run vector by vector.
struct saved_tile {
  float* vals = nullptr;
  int rows = 0, nv = 0;
  index_t valid = 0, flat0 = 0, flat_ld = 0, ch0 = 0;
  index_t ch_step = 1;

  /// x = f(x, ctx) for every vector of the tile that holds real columns.
  template <class V, bool PerLane, class F>
  KFUSE_INLINE void transform(F&& f) const {
    constexpr int L = V::lanes;
    for (int r = 0; r < rows; ++r) {
      float* row = vals + r * nv * L;
      for (int j = 0; j < nv && j * L < valid; ++j) {
        const index_t col = index_t(j) * L;
        const int n = int(std::min<index_t>(L, valid - col));
        const lane_ctx<V, PerLane> ctx{flat0 + r * flat_ld + col,
                                       PerLane ? ch0 + col : ch0 + r * ch_step, n};
        simd::store(row + col, V(f(simd::load<V>(row + col), ctx)));
      }
    }
  }
};

/// The shape most fused producer epilogues of a plan take: y = act(x * scale[c] + bias[c] +
/// addend[i]), act a clamp (relu, relu6, clip; none is clamp(-inf, inf)), hardswish, gelu (erf
/// or tanh form) or silu (the scale: an int8 kernel's dequantization). An out-of-line stage
/// that can state itself in this form (the graph's run-time chain) offers
///   common_form common() const;
/// and kernels then apply it on the register tile, inline, instead of saving the tile for a
/// pass per stage (detail::store_tile): on MobileNetV3 those passes were 18% of the time.
struct common_form {
  // other: not of this form
  enum class act : std::uint8_t { other, clamp, hardswish, gelu_erf, gelu_tanh, silu };
  act kind = act::other;
  const float* bias = nullptr;    // per channel; null: none
  const float* addend = nullptr;  // at each output's flat index; null: none
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  const float* scale = nullptr;  // per channel, applied first; null: none
};

/// What a stage may check before a kernel runs. fail() throws kfuse::error naming the kernel
/// and the stage.
struct stage_check {
  std::string_view kernel;
  std::string_view stage;
  index_t numel = 0;
  index_t channels = 0;       // 0: the tensor has no channel axis
  const void* out = nullptr;  // the kernel's output (unknown when null)
  std::size_t out_bytes = 0;  // from out to one past its last element
  std::size_t out_elem = 0;   // bytes per output element
  [[noreturn]] void fail(const std::string& what) const {
    throw error(std::string(kernel) + ": stage '" + std::string(stage) + "': " + what);
  }
  /// A parameter array of count elements must have memory behind it.
  void expect_data(const void* p, std::size_t count, std::string_view what) const {
    if (p == nullptr && count != 0)
      fail(std::string(what) + " is null but has " + std::to_string(count) + " elements");
  }
  /// A second tensor read at each output's own index may be the output itself (each element is
  /// read before it is overwritten) when it covers exactly the output, with the same element
  /// size; any other overlap would read values the kernel already wrote.
  void expect_operand_apart(const void* p, std::size_t bytes, std::size_t elem,
                            std::string_view what) const {
    if (!detail::bytes_overlap(p, bytes, out, out_bytes)) return;
    if (p == out && bytes == out_bytes && elem == out_elem) return;
    fail(std::string(what) +
         " overlaps the output (only the output buffer itself, same size and element type, "
         "may be used as the operand)");
  }
  /// A parameter array (read at any index, e.g. per channel) must not share a byte with the
  /// output.
  void expect_params_apart(const void* p, std::size_t bytes, std::string_view what) const {
    if (detail::bytes_overlap(p, bytes, out, out_bytes))
      fail(std::string(what) + " overlap the output buffer");
  }
  /// A per-channel parameter list must have one value per channel.
  void expect_per_channel(index_t count, std::string_view what) const {
    if (numel == 0) return;  // an empty tensor: nothing is read
    if (channels == 0)
      fail(std::string(what) +
           " is per channel but the tensor has no channel axis (pass a "
           "tensor_view with a layout)");
    if (count != channels)
      fail(std::to_string(count) + " " + std::string(what) + " for " + std::to_string(channels) +
           " channels");
  }
};

namespace detail {

template <class S>
constexpr std::string_view stage_name() {
  if constexpr (requires { S::name; })
    return S::name;
  else
    return "user stage";
}

template <class S>
constexpr bool stage_needs_channel() {
  if constexpr (requires { S::needs_channel; })
    return S::needs_channel;
  else
    return false;
}

/// True when this stage object uses per-channel parameters at run time.
template <class S>
KFUSE_INLINE bool stage_uses_channel(const S& s) {
  if constexpr (stage_needs_channel<S>())
    return true;
  else if constexpr (requires { s.per_channel; })
    return bool(s.per_channel);
  else if constexpr (requires { s.q.scales; })
    return !s.q.scales.empty();
  else if constexpr (requires { s.multipliers; })
    return !s.multipliers.empty();
  else
    return false;
}

/// True when some object of this stage type can use per-channel parameters (compile time: a
/// kernel leaves its per-channel code out without one). A stage whose channel use is decided at
/// run time in another way says so with `static constexpr bool may_use_channel = true`.
template <class S>
constexpr bool stage_may_use_channel() {
  if constexpr (requires { S::may_use_channel; })
    if constexpr (S::may_use_channel) return true;
  return stage_needs_channel<S>() || requires(const S& s) { s.per_channel; }
  || requires(const S& s) { s.q.scales; }
  || requires(const S& s) { s.multipliers; };
}

template <class S>
struct stage_output {
  using type = void;
};
template <class S>
requires requires { typename S::output_elem; }
struct stage_output<S> {
  using type = typename S::output_elem;
};

template <class S>
constexpr int stage_cost() {
  if constexpr (requires { S::cost; })
    return S::cost;
  else
    return 1;
}

template <class S>
constexpr bool stage_out_of_line() {
  if constexpr (requires { S::out_of_line; })
    return S::out_of_line;
  else
    return false;
}

template <class S, class V, class Ctx>
concept vector_stage = requires(const S& s, V x, const Ctx& c) {
  { s(x, c) } -> std::same_as<V>;
};
template <class S, class Ctx>
concept scalar_stage = requires(const S& s, float x, const Ctx& c) {
  { s(x, c) } -> std::convertible_to<float>;
};

/// Instantiated only for a stage that cannot run on a SIMD target: the diagnostic names it.
template <class Stage>
struct epilogue_stage_has_no_vector_path {
  static_assert(sizeof(Stage) == 0,
                "kfuse: this epilogue stage has no vector operator() for the SIMD target it is "
                "used on, and kfuse never falls back to a slow path. Write it as "
                "`template <class V, class Ctx> V operator()(V x, const Ctx&) const` using "
                "kfuse::simd ops, or run the kernel on arch::generic.");
  static constexpr bool value = false;
};

template <class S, class V, class Ctx>
KFUSE_INLINE V call_stage(const S& s, V x, const Ctx& c) {
  if constexpr (vector_stage<S, V, Ctx>) {
    return s(x, c);
  } else if constexpr (V::lanes == 1 && scalar_stage<S, Ctx>) {
    return V(float(s(float(x.r), c)));
  } else {
    static_assert(epilogue_stage_has_no_vector_path<S>::value);
    return x;
  }
}

/// Runs one stage over a saved tile: its own apply_tile when it has one, else vector by vector.
template <class V, bool PerLane, class S>
KFUSE_INLINE void apply_stage_to_tile(const S& s, const saved_tile& t) {
  if constexpr (requires { s.template apply_tile<V, PerLane>(t); })
    s.template apply_tile<V, PerLane>(t);
  else
    t.transform<V, PerLane>(
        [&](V x, const lane_ctx<V, PerLane>& c) { return call_stage(s, x, c); });
}

}  // namespace detail
KFUSE_END_NAMESPACE
