# cmake -DCXX=<compiler> -DSOURCE=warn_scalar_fallback.cpp -DINCLUDE=<kfuse include dir>
#       -P warn_scalar_fallback.cmake
#
# KFUSE_WARN_SCALAR_FALLBACK gives exactly one warning in a TU built for the scalar fallback
# (-march=x86-64, no KFUSE_FORCE_GENERIC), and none when the build has a SIMD tier, asked for
# generic, or did not opt in.
foreach(v CXX SOURCE INCLUDE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "warn_scalar_fallback: -D${v}=... is required")
  endif()
endforeach()

# g++: 'warning: #warning "kfuse: scalar ...', clang: 'warning: "kfuse: scalar ...'
set(warning "warning: (#warning )?\"?kfuse: scalar fallback: this translation unit has no -march flags")
# name | include flag | flags (space-separated) | expected number of warnings
# (-isystem: how an installed kfuse is included through find_package.)
set(cases
    "fallback|-I|-march=x86-64 -DKFUSE_WARN_SCALAR_FALLBACK|1"
    "fallback, value 1|-I|-march=x86-64 -DKFUSE_WARN_SCALAR_FALLBACK=1|1"
    "fallback, kfuse as a system include|-isystem|-march=x86-64 -DKFUSE_WARN_SCALAR_FALLBACK|1"
    "not opted in|-I|-march=x86-64|0"
    "asked for generic|-I|-march=x86-64 -DKFUSE_FORCE_GENERIC=1 -DKFUSE_WARN_SCALAR_FALLBACK|0"
    "x86-64-v2|-I|-march=x86-64-v2 -DKFUSE_WARN_SCALAR_FALLBACK|0"
    "x86-64-v3|-I|-march=x86-64-v3 -DKFUSE_WARN_SCALAR_FALLBACK|0")
set(failed "")
foreach(c IN LISTS cases)
  string(REPLACE "|" ";" f "${c}")
  list(GET f 0 name)
  list(GET f 1 inc)
  list(GET f 2 flags)
  list(GET f 3 expected)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  set(cmd ${CXX} -std=c++20 -fsyntax-only ${inc} ${INCLUDE} ${flags} ${SOURCE})
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REPLACE ";" " " shown "${cmd}")
  if(NOT rc EQUAL 0)
    list(APPEND failed "${name}: does not compile:\n${shown}\n${out}")
    continue()
  endif()
  string(REGEX MATCHALL "${warning}" hits "${out}")
  list(LENGTH hits n)
  if(NOT n EQUAL expected)
    list(APPEND failed "${name}: ${n} warning(s), expected ${expected}:\n${shown}\n${out}")
  else()
    message(STATUS "OK: ${name}: ${n} warning(s)")
  endif()
endforeach()
if(failed)
  string(REPLACE ";" "\n" failed "${failed}")
  message(FATAL_ERROR "${failed}")
endif()
message(STATUS "warn_scalar_fallback: all cases ok")
