// Compiled by warn_scalar_fallback.cmake with and without SIMD -march flags and
// KFUSE_WARN_SCALAR_FALLBACK: several kfuse headers, so the test sees the warning come once.
#include "kfuse/graph/graph.hpp"
#include "kfuse/kfuse.hpp"
#include "kfuse/tools/profiler.hpp"

int main() { return kfuse::compiled_arch().empty() ? 1 : 0; }
