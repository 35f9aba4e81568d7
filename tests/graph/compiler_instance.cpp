// The one definition of the plan compiler for this arch's graph and tools tests (see
// compiler_instance.hpp).
#include "graph/compiler_instance.hpp"

KFUSE_BEGIN_NAMESPACE
template plan compile<arch::native, backend::xsimd>(const graph&, const compile_options&);
KFUSE_END_NAMESPACE
