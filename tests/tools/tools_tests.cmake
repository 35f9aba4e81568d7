# Tools (profiler, machine limits, calibration, accuracy report, batch sweep).
# The profiler's probe has per-arch code (FMA, vdpbf16ps, vpdpbusd): the kernel_ci archs (generic
# and avx512_bf16). The others are plain C++ and build once.
kfuse_arch_set(kernel_ci profiler_archs)
kfuse_add_arch_test(tools_profiler SOURCES tools/profiler_test.cpp ARCHS ${profiler_archs}
                    SANITIZE ci)
kfuse_add_test(tools_unit SOURCES tools/calibrate_test.cpp tools/accuracy_test.cpp
               tools/batch_sweep_test.cpp SANITIZE full)
# .npy files (numpy-written fixtures, round trips, every malformed header, a fuzz loop) and
# kfuse-run's command line (src/tools/kfuse_run_args.hpp: pure, no ONNX library). Both build in
# seconds and are in CI's AddressSanitizer set.
kfuse_add_test(tools_npy SOURCES tools/npy_test.cpp SANITIZE ci)
kfuse_add_test(tools_kfuse_run_args SOURCES tools/kfuse_run_args_test.cpp SANITIZE ci)
if(TARGET tools_kfuse_run_args)  # (a main build may leave it to the sanitizer build)
  target_include_directories(tools_kfuse_run_args PRIVATE ${PROJECT_SOURCE_DIR}/src/tools)
endif()

# The Chrome trace loaded by an independent JSON parser (Python's), when python3 is there.
find_program(KFUSE_PYTHON3 python3)
if(KFUSE_PYTHON3)
  foreach(arch IN LISTS profiler_archs)
    if(TARGET tools_profiler_${arch})
      add_test(NAME tools:trace_json_python:${arch}
               COMMAND ${KFUSE_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_trace.py
                       $<TARGET_FILE:tools_profiler_${arch}>)
      get_target_property(labels tools_profiler_${arch} KFUSE_TEST_LABELS)  # (sanitize too)
      set_tests_properties(tools:trace_json_python:${arch} PROPERTIES LABELS "${labels}"
                           PASS_REGULAR_EXPRESSION "trace json ok" TIMEOUT 60)
    endif()
  endforeach()
endif()

# The tools on compiled plans (replay_profiler through the executor's hook, calibrate_graph and
# the int8 plan it feeds): the executor instantiates its kernels per TU, so one arch only.
kfuse_arch_set(host tools_host)
kfuse_add_arch_test(tools_graph SOURCES tools/graph_tools_test.cpp ARCHS ${tools_host}
                    SANITIZE full)
