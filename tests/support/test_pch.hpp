#pragma once
// The headers nearly every test TU includes, precompiled once per arch (tests/CMakeLists.txt,
// kfuse_use_test_pch): Catch2 and the kernel layer.
#include <catch2/catch.hpp>

#include "kfuse/kfuse.hpp"
