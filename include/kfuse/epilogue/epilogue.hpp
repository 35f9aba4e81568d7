#pragma once
// epilogue<Stages...>: a compile-time list of stages applied, in order, to values in registers
// before a kernel's single store. Capabilities fold over the stages (Eigen style).
#include <cstddef>
#include <utility>

#include "kfuse/epilogue/stage.hpp"

namespace kfuse {

namespace detail {
/// One stage of an epilogue, tagged with its position so that equal stage types stay distinct.
template <std::size_t I, class S>
struct stage_slot {
  S stage;
};
template <class Seq, class... S>
struct stage_list;
/// The stages of an epilogue. Deliberately not a std::tuple: epilogue types are shared by every
/// translation unit (they cross the dispatcher), so they must have no code of their own.
/// std::tuple's constructors and std::get would be weak symbols outside the per-ISA namespace,
/// emitted by TUs built with different -march flags (tests/odr). This aggregate has only
/// implicit (trivial for the built-in stages) special members; it is read through
/// for_each_stage / detail::stage_at, which live in the per-ISA namespace.
template <std::size_t... I, class... S>
struct stage_list<std::index_sequence<I...>, S...> : stage_slot<I, S>... {};
}  // namespace detail

/// Construct with one brace-list per stage: epilogue<scale, bias, relu>{{2.f}, {b}, {}}.
template <class... Stages>
struct epilogue {
  detail::stage_list<std::index_sequence_for<Stages...>, Stages...> stages;

  constexpr epilogue() = default;
  // Always inlined, so that no TU emits it as a (shared, weak) function.
  KFUSE_INLINE constexpr epilogue(Stages... s) requires(sizeof...(Stages) > 0) : stages{{s}...} {}
};

template <class... S>
epilogue(S...) -> epilogue<S...>;

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {
/// The stage at position I of an epilogue's stage list.
template <std::size_t I, class S>
KFUSE_INLINE constexpr const S& stage_at(const stage_slot<I, S>& slot) noexcept {
  return slot.stage;
}
}  // namespace detail

/// Calls f(stage) for every stage of e, in order.
template <class... S, class F>
KFUSE_INLINE constexpr void for_each_stage(const epilogue<S...>& e, F&& f) {
  // always_inline: GCC otherwise keeps this lambda out of line in kernels whose tile loop is
  // large (the int8 GEMM with bias, relu, requantize: 40% of a 1x1 conv in the call).
  [&]<std::size_t... I>(std::index_sequence<I...>) KFUSE_INLINE_LAMBDA {
    (f(detail::stage_at<I>(e.stages)), ...);
  }
  (std::index_sequence_for<S...>{});
}

namespace detail {
template <class Acc, class... S>
struct last_output {
  using type = Acc;
};
template <class Acc, class S0, class... S>
struct last_output<Acc, S0, S...> {
  using here = typename stage_output<S0>::type;
  using type =
      typename last_output<std::conditional_t<std::is_void_v<here>, Acc, here>, S...>::type;
};
}  // namespace detail

/// Folded capabilities of an epilogue type.
template <class E>
struct epilogue_traits;

template <class... S>
struct epilogue_traits<epilogue<S...>> {
  static constexpr std::size_t size = sizeof...(S);
  /// Some stage always reads a per-channel parameter (bias).
  static constexpr bool needs_channel = (detail::stage_needs_channel<S>() || ... || false);
  /// Some stage can read a per-channel parameter at run time (kernels compile their per-channel
  /// walks only then).
  static constexpr bool may_use_channel = (detail::stage_may_use_channel<S>() || ... || false);
  /// Some stage runs as a call rather than inlined (the graph's run-time chain). A call clobbers
  /// every vector register, so kernels save their register tile to memory before such an
  /// epilogue: otherwise GCC saves and restores every live accumulator around each call.
  static constexpr bool out_of_line = (detail::stage_out_of_line<S>() || ... || false);
  /// Rough cost per element, in vector ops (for grain sizes).
  static constexpr int cost = (detail::stage_cost<S>() + ... + 0);
  /// The element tag the last type-changing stage produces; void if none does.
  using output_elem = typename detail::last_output<void, S...>::type;
};

/// True when some stage of e reads per-channel parameters at run time.
template <class... S>
KFUSE_INLINE bool uses_channel(const epilogue<S...>& e) {
  bool any = false;
  for_each_stage(e, [&](const auto& s) { any = any || detail::stage_uses_channel(s); });
  return any;
}

/// True when every stage of e is known at run time to leave values as they are (the graph's
/// run-time chain with no stages). Kernels whose epilogue runs out of line then run without it:
/// a call per output vector (the chain's switch) cost a layer norm 3x its time.
template <class... S>
KFUSE_INLINE bool is_identity(const epilogue<S...>& e) {
  bool all = true;
  for_each_stage(e, [&](const auto& s) {
    if constexpr (requires { s.identity(); })
      all = all && s.identity();
    else
      all = false;
  });
  return all;
}

/// Checks every stage's parameters; throws kfuse::error naming the kernel and the stage.
/// With the output (out, out_bytes from out to past its last element, bytes per element)
/// stages also check that their operands do not overlap it (stage_check).
template <class... S>
void validate(const epilogue<S...>& e, std::string_view kernel, index_t numel, index_t channels,
              const void* out = nullptr, std::size_t out_bytes = 0, std::size_t out_elem = 0) {
  for_each_stage(e, [&](const auto& st) {
    using St = std::remove_cvref_t<decltype(st)>;
    stage_check c{kernel, detail::stage_name<St>(), numel, channels, out, out_bytes, out_elem};
    if constexpr (requires { st.validate(c); }) st.validate(c);
  });
}

/// Runs every stage on x, in order.
template <class V, class Ctx, class... S>
KFUSE_INLINE V apply(const epilogue<S...>& e, V x, const Ctx& ctx) {
  for_each_stage(e, [&](const auto& s) KFUSE_INLINE_LAMBDA { x = detail::call_stage(s, x, ctx); });
  return x;
}

/// Runs every stage on a tile saved to memory, stage by stage (see saved_tile).
template <class V, bool PerLane, class... S>
KFUSE_INLINE void apply_to_tile(const epilogue<S...>& e, const saved_tile& t) {
  for_each_stage(e, [&](const auto& s) { detail::apply_stage_to_tile<V, PerLane>(s, t); });
}

KFUSE_END_NAMESPACE
