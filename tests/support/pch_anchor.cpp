// The one source of a kfuse_test_pch_<arch> target, which builds that arch's precompiled header
// (tests/CMakeLists.txt): a target needs a source for CMake to build its PCH.
