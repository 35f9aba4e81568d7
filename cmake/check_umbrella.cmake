# ctest umbrella:complete: every header under include/kfuse/kernels/ is reachable from the
# umbrella header kfuse/kfuse.hpp (the preprocessor's dependency list of a TU that includes it).
#   cmake -DCXX=<compiler> -DROOT=<source dir> -P check_umbrella.cmake
execute_process(COMMAND ${CXX} -std=c++20 -I${ROOT}/include -M -x c++ ${ROOT}/include/kfuse/kfuse.hpp
                OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "umbrella: the compiler could not preprocess kfuse/kfuse.hpp:\n${err}")
endif()
string(REPLACE "\\\n" " " deps "${deps}")
file(GLOB_RECURSE kernels RELATIVE ${ROOT}/include ${ROOT}/include/kfuse/kernels/*.hpp)
set(missing "")
foreach(h IN LISTS kernels)
  string(FIND "${deps}" "include/${h}" at)
  if(at EQUAL -1)
    list(APPEND missing ${h})
  endif()
endforeach()
if(missing)
  list(JOIN missing "\n  " text)
  message(FATAL_ERROR "umbrella: kfuse/kfuse.hpp does not reach:\n  ${text}\n(add them to it)")
endif()
list(LENGTH kernels n)
message(STATUS "umbrella: kfuse/kfuse.hpp reaches all ${n} kernel headers")
