// The one definition of the plan compiler for this arch's graph and tools tests: kfuse::runtime's
// source, built with the tests' flags (see compiler_instance.hpp).
#include "../../src/runtime/compile.cpp"
