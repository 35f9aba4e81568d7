#pragma once
// The declaration of compile(graph, options): defined in kfuse/graph/compile.hpp (which
// instantiates every kernel a plan may call), or prebuilt per arch in kfuse::runtime
// (kfuse/runtime.hpp).
#include <type_traits>

#include "kfuse/arch/tags.hpp"
#include "kfuse/graph/compiler/op_set.hpp"
#include "kfuse/graph/graph.hpp"
#include "kfuse/graph/replay.hpp"
#include "kfuse/simd/backend.hpp"

KFUSE_BEGIN_NAMESPACE

/// Compiles a graph into a plan for arch A and backend B (the TU's native arch by default).
template <class A = arch::native, class B = backend::xsimd>
requires arch::tag<A> plan compile(const graph& g, const compile_options& options = {});

/// The same with only the ops of Ops (kfuse::ops<op_kind...>) instantiated: a selective build
/// (graph/compiler/op_set.hpp).
template <class Ops, class A = arch::native, class B = backend::xsimd>
requires op_set<Ops> plan compile(const graph& g, const compile_options& options = {});

/// compile<T> with a T that is neither: a readable error instead of a failed overload set.
template <class T, class A = arch::native, class B = backend::xsimd>
requires(!arch::tag<T> && !op_set<T>) plan compile(const graph&, const compile_options& = {}) {
  static_assert(!std::is_same_v<T, T>,
                "kfuse::compile<T>: T must be an arch tag (kfuse::arch::avx2, ...) or an op set "
                "(kfuse::ops<kfuse::op_kind::linear, ...>)");
  return {};
}

KFUSE_END_NAMESPACE
