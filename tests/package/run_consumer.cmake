# cmake -DMODE=find_package|add_subdirectory -DKFUSE_SOURCE_DIR=<src> -DKFUSE_BINARY_DIR=<build>
#       -DWORK_DIR=<scratch> -DGENERATOR=<gen> -DCXX=<compiler> [-DBUILD_TYPE=<cfg>]
#       [-DEXPECT_RUNTIME=ON: the install must provide kfuse::runtime, and runtime_plan runs]
#       [-DEXPECT_ONNX=ON: the install must provide kfuse::onnx and kfuse-run; onnx_import runs]
#       -P run_consumer.cmake
#
# find_package:     cmake --install <build> --prefix <scratch>/prefix, then configures the
#                   find_package consumer with CMAKE_PREFIX_PATH=<scratch>/prefix only.
# add_subdirectory: configures the add_subdirectory consumer on the source tree.
# Both then build the consumer and run its fused op (it checks its own numbers).
cmake_minimum_required(VERSION 3.20)
foreach(v MODE KFUSE_SOURCE_DIR WORK_DIR GENERATOR CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer: -D${v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "+ ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${shown}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(here ${CMAKE_CURRENT_LIST_DIR})
set(args -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX})

if(MODE STREQUAL "find_package")
  if(NOT DEFINED KFUSE_BINARY_DIR)
    message(FATAL_ERROR "run_consumer: -DKFUSE_BINARY_DIR=... is required")
  endif()
  set(prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${KFUSE_BINARY_DIR} --prefix ${prefix})
  foreach(f include/kfuse/kfuse.hpp include/kfuse/arch/dispatch.hpp
            include/kfuse/arch/arch_table.def
            share/cmake/kfuse/kfuse-config.cmake share/cmake/kfuse/kfuse-config-version.cmake
            share/cmake/kfuse/kfuse-targets.cmake share/cmake/kfuse/kfuse_arch.cmake)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "the install tree lacks ${f}")
    endif()
  endforeach()
  # Only the prefix: no package registry, no kfuse_DIR, nothing from the source or build tree.
  run(${CMAKE_COMMAND} -S ${here}/find_package -B ${WORK_DIR}/build ${args}
      -DCMAKE_PREFIX_PATH=${prefix} -DEXPECT_PREFIX=${prefix} -DEXPECT_RUNTIME=${EXPECT_RUNTIME}
      -DEXPECT_ONNX=${EXPECT_ONNX} -DTEST_MODEL=${KFUSE_SOURCE_DIR}/tests/onnx/models/mlp_b3.onnx
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
elseif(MODE STREQUAL "add_subdirectory")
  run(${CMAKE_COMMAND} -S ${here}/add_subdirectory -B ${WORK_DIR}/build ${args}
      -DKFUSE_SOURCE_DIR=${KFUSE_SOURCE_DIR})
else()
  message(FATAL_ERROR "run_consumer: unknown MODE '${MODE}'")
endif()

run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel 1)
run(${WORK_DIR}/build/fused_op)
if(EXISTS ${WORK_DIR}/build/runtime_plan)
  run(${WORK_DIR}/build/runtime_plan)
endif()
if(EXISTS ${WORK_DIR}/build/onnx_import)
  run(${WORK_DIR}/build/onnx_import)
endif()
message(STATUS "OK: ${MODE} consumer built and its fused op checked")
