#pragma once
// The plan compiler, instantiated once per arch for all graph and tools tests.
//
// kfuse::compile instantiates every op adapter (gemm, conv2d, depthwise, pool, norms, eltwise
// for each recipe): ~45 CPU-seconds at -O1 in every translation unit that calls it. The test TUs
// see it as an explicit instantiation declared here and link the one object that defines it
// (compiler_instance.cpp, built per arch as kfuse_graph_compiler_<arch>: tests/CMakeLists.txt).
// Users' programs need none of this: they include kfuse/graph/compile.hpp and call compile().
#include "kfuse/graph/compile.hpp"

KFUSE_BEGIN_NAMESPACE
extern template plan compile<arch::native, backend::xsimd>(const graph&, const compile_options&);
KFUSE_END_NAMESPACE
