#pragma once
// The plan compiler, instantiated once per arch for all graph and tools tests, the way users
// get it from kfuse::runtime's tiers: the test TUs include kfuse/graph/prebuilt_compile.hpp (the
// explicit specialization's declaration) and link the objects that define it (kfuse::runtime's
// sources, built per arch at the tests' -O1 and sanitizer flags as kfuse_graph_compiler_<arch>:
// tests/CMakeLists.txt). compile.hpp is included too for the tests that look at graph_ops (which
// kernels exist).
#include "kfuse/graph/compile.hpp"
#include "kfuse/graph/prebuilt_compile.hpp"
