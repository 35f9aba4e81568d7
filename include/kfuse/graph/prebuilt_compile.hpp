#pragma once
// The plan compiler for this TU's own arch, defined in objects built from kfuse::runtime's
// sources for that arch (src/runtime/: the fixed-arch route, e.g. a test's plan compiler built
// once per arch): no TU that includes this header instantiates it, even one that also includes
// kfuse/graph/compile.hpp. Most users want kfuse/runtime.hpp instead (any CPU, chosen at run
// time).
#include <string>

#include "kfuse/graph/compile_fwd.hpp"

KFUSE_BEGIN_NAMESPACE

template <>
plan compile<arch::native, backend::xsimd>(const graph&, const compile_options&);

namespace detail {
/// The same with target_info::dispatch set (kfuse::runtime's tier entry point).
plan compile_prebuilt(const graph& g, const compile_options& options, const std::string& dispatch);
}  // namespace detail

KFUSE_END_NAMESPACE
