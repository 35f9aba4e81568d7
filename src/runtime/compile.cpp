// kfuse::runtime: the one definition of compile<arch::native, backend::xsimd> for the arch this
// file is compiled for (CMake compiles it once per arch of KFUSE_RUNTIME_ARCHS, each with only
// that arch's flags; kfuse/runtime.hpp declares it).
#include "kfuse/graph/compile.hpp"

#include "kfuse/runtime.hpp"

KFUSE_BEGIN_NAMESPACE
template plan compile<arch::native, backend::xsimd>(const graph&, const compile_options&);
KFUSE_END_NAMESPACE
