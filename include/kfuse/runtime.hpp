#pragma once
// kfuse::runtime: the plan compiler prebuilt once per arch, so that a translation unit can
// build graphs and compile plans without instantiating a single kernel.
//
//   #include <kfuse/runtime.hpp>        // instead of kfuse/graph/compile.hpp
//   kfuse::plan p = kfuse::compile(g);   // the same call, linked from kfuse::runtime
//
// CMake: link kfuse::runtime (find_package(kfuse COMPONENTS runtime) for an installed kfuse).
// The library holds compile<arch::X, backend::xsimd> for each X of KFUSE_RUNTIME_ARCHS
// (default: the build machine's own tier, -march=native); the TU must be compiled for one of
// them (kfuse_arch_flags(<arch> flags) gives the flags), else the link fails with an undefined
// kfuse::isa_<tier>::compile<...>. docs/compile_time.md has the measured difference.
#include "kfuse/graph/compile_fwd.hpp"

KFUSE_BEGIN_NAMESPACE

// Defined in kfuse::runtime: no TU that includes this header instantiates it, even one that
// also includes kfuse/graph/compile.hpp.
extern template plan compile<arch::native, backend::xsimd>(const graph&, const compile_options&);

KFUSE_END_NAMESPACE
