#pragma once
// The declaration of compile(graph, options): defined in kfuse/graph/compile.hpp (which
// instantiates every kernel a plan may call), or prebuilt per arch in kfuse::runtime
// (kfuse/runtime.hpp).
#include "kfuse/arch/tags.hpp"
#include "kfuse/graph/graph.hpp"
#include "kfuse/graph/replay.hpp"
#include "kfuse/simd/backend.hpp"

KFUSE_BEGIN_NAMESPACE

/// Compiles a graph into a plan for arch A and backend B (the TU's native arch by default).
template <class A = arch::native, class B = backend::xsimd>
plan compile(const graph& g, const compile_options& options = {});

KFUSE_END_NAMESPACE
