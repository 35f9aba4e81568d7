# Tools (profiler, machine limits, calibration, accuracy report, batch sweep).
# The profiler's probe has per-arch code (FMA, vdpbf16ps, vpdpbusd): the kernel_ci archs (generic
# and avx512_bf16). The others are plain C++ and build once.
kfuse_arch_set(kernel_ci profiler_archs)
kfuse_add_arch_test(tools_profiler SOURCES tools/profiler_test.cpp LABELS "ci"
                    ARCHS ${profiler_archs})
kfuse_add_test(tools_unit SOURCES tools/calibrate_test.cpp tools/accuracy_test.cpp
               tools/batch_sweep_test.cpp LABELS "ci")
# .npy files (numpy-written fixtures, round trips, every malformed header, a fuzz loop) and
# kfuse-run's command line (src/tools/kfuse_run_args.hpp: pure, no ONNX library). Both build in
# seconds and are in CI's AddressSanitizer set (scripts/test.sh).
kfuse_add_test(tools_npy SOURCES tools/npy_test.cpp LABELS "ci")
kfuse_add_test(tools_kfuse_run_args SOURCES tools/kfuse_run_args_test.cpp LABELS "ci")
if(TARGET tools_kfuse_run_args)  # (scripts/test.sh's main build leaves it to the ASan build)
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
      set_tests_properties(tools:trace_json_python:${arch} PROPERTIES LABELS "ci;arch_${arch}"
                           PASS_REGULAR_EXPRESSION "trace json ok" TIMEOUT 60)
    endif()
  endforeach()
endif()

# The tools on compiled plans (replay_profiler through the executor's hook, calibrate_graph and
# the int8 plan it feeds): the executor instantiates its kernels per TU, so one arch only.
kfuse_arch_set(host tools_host)
kfuse_add_arch_test(tools_graph SOURCES tools/graph_tools_test.cpp LABELS "ci" ARCHS ${tools_host})
