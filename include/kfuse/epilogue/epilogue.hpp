#pragma once
// epilogue<Stages...>: a compile-time list of stages applied, in order, to values in registers
// before a kernel's single store. Capabilities fold over the stages (Eigen style).
#include <tuple>

#include "kfuse/epilogue/stage.hpp"

namespace kfuse {

/// Construct with one brace-list per stage: epilogue<scale, bias, relu>{{2.f}, {b}, {}}.
template <class... Stages>
struct epilogue {
  std::tuple<Stages...> stages;

  constexpr epilogue() = default;
  constexpr epilogue(Stages... s) : stages(std::move(s)...) {}
};

template <class... S>
epilogue(S...) -> epilogue<S...>;

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

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
  /// Rough cost per element, in vector ops (for grain sizes).
  static constexpr int cost = (detail::stage_cost<S>() + ... + 0);
  /// The element tag the last type-changing stage produces; void if none does.
  using output_elem = typename detail::last_output<void, S...>::type;
};

/// True when some stage of e reads per-channel parameters at run time.
template <class... S>
KFUSE_INLINE bool uses_channel(const epilogue<S...>& e) {
  return std::apply(
      [](const auto&... s) { return (detail::stage_uses_channel(s) || ... || false); }, e.stages);
}

/// Checks every stage's parameters; throws kfuse::error naming the kernel and the stage.
template <class... S>
void validate(const epilogue<S...>& e, std::string_view kernel, index_t numel, index_t channels) {
  std::apply(
      [&](const auto&... s) {
        (
            [&](const auto& st) {
              using St = std::remove_cvref_t<decltype(st)>;
              stage_check c{kernel, detail::stage_name<St>(), numel, channels};
              if constexpr (requires { st.validate(c); }) st.validate(c);
            }(s),
            ...);
      },
      e.stages);
}

/// Runs every stage on x, in order.
template <class V, class Ctx, class... S>
KFUSE_INLINE V apply(const epilogue<S...>& e, V x, const Ctx& ctx) {
  std::apply([&](const auto&... s) { ((x = detail::call_stage(s, x, ctx)), ...); }, e.stages);
  return x;
}

KFUSE_END_NAMESPACE
