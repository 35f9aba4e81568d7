// kfuse::runtime: compile<arch::native, backend::xsimd> for the arch this file is compiled for
// (CMake compiles it once per arch of KFUSE_RUNTIME_ARCHS, each with only that arch's flags;
// kfuse/graph/prebuilt_compile.hpp declares it). The passes are here; each op family's
// lowering, where its kernels are instantiated, is an object of its own (src/runtime/ops/), so
// that the build runs them in parallel.
#include "kfuse/graph/compile.hpp"

#include "kfuse/graph/prebuilt_compile.hpp"

KFUSE_BEGIN_NAMESPACE

template <>
plan compile<arch::native, backend::xsimd>(const graph& g, const compile_options& options) {
  return detail::compile_with<arch::native, backend::xsimd, detail::prebuilt_ops>(g, options);
}

plan detail::compile_prebuilt(const graph& g, const compile_options& options,
                              const std::string& dispatch) {
  return compile_with<arch::native, backend::xsimd, prebuilt_ops>(g, options, dispatch);
}

KFUSE_END_NAMESPACE
