# First use (x86): a translation unit built without -march flags for a SIMD target is the scalar
# fallback, and says so: target_of(), the profiler table and the fusion report print "scalar
# fallback"; KFUSE_WARN_SCALAR_FALLBACK turns it into one compiler warning per such TU.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  # -march=x86-64 (SSE2, below kfuse's sse4 tier) after any -march of CMAKE_CXX_FLAGS, and no
  # KFUSE_FORCE_GENERIC: what a plain `g++ -std=c++20` build gets.
  kfuse_add_test(first_use_scalar_fallback SOURCES first_use/scalar_fallback_test.cpp
                 LABELS first_use NO_PCH)
  target_compile_options(first_use_scalar_fallback PRIVATE -march=x86-64)

  add_test(NAME first_use_warn_scalar_fallback
           COMMAND ${CMAKE_COMMAND} -DCXX=${CMAKE_CXX_COMPILER}
                   -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/first_use/warn_scalar_fallback.cpp
                   -DINCLUDE=${PROJECT_SOURCE_DIR}/include
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/first_use/warn_scalar_fallback.cmake)
  set_tests_properties(first_use_warn_scalar_fallback PROPERTIES LABELS "ci;first_use" TIMEOUT 300)
endif()
