#pragma once
// Runtime dispatch: call a functor with the best arch of a list that the CPU supports.
//
// The functor's operator()<A> for each A must be compiled in a TU built for A (CMake helper
// kfuse_add_arch_sources); the calling TU only declares them (`extern template`), as with
// xsimd::dispatch. See examples/03_dispatch.
#include <utility>

#include "kfuse/arch/cpu_features.hpp"
#include "kfuse/error.hpp"

KFUSE_BEGIN_NAMESPACE

/// The name of the best arch of `List` this CPU supports.
template <class A, class... Rest>
std::string_view best_arch_name(arch::list<A, Rest...>) {
  if (cpu_supports<A>()) return A::name;
  if constexpr (sizeof...(Rest) > 0)
    return best_arch_name(arch::list<Rest...>{});
  else
    return "none";
}

/// Calls f(A{}, args...) for the first A in `List` that this CPU supports.
template <class A, class... Rest, class F, class... Args>
decltype(auto) dispatch(arch::list<A, Rest...>, F&& f, Args&&... args) {
  if (cpu_supports<A>()) return std::forward<F>(f)(A{}, std::forward<Args>(args)...);
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch(arch::list<Rest...>{}, std::forward<F>(f), std::forward<Args>(args)...);
  } else {
    throw error("kfuse::dispatch: no arch of the list is supported by this CPU");
  }
}

KFUSE_END_NAMESPACE
