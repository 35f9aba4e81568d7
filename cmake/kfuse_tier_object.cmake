# cmake -DLD=<ld> -DOBJCOPY=<objcopy> -DNM=<nm> -DOUT=<tier.o> -DTIER=<arch> -DOBJECTS=<a.o;b.o;...>
#       -P kfuse_tier_object.cmake
# One tier of kfuse::runtime as one relocatable object whose only global definitions are its two
# entry points (kfuse_tier_compile_isa_<tier>, kfuse_tier_limits_isa_<tier>): the COMDAT groups
# are resolved inside the tier (--force-group-allocation) and every other symbol made local, so
# that no copy of inline code compiled for this tier (the standard library's included) can be
# the one another tier or the caller runs. The tier's TUs are compiled with -fno-gnu-unique (GCC):
# objcopy cannot make a STB_GNU_UNIQUE symbol local. Fails when a global definition remains.
cmake_minimum_required(VERSION 3.20)
foreach(v LD OBJCOPY NM OUT TIER OBJECTS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "kfuse_tier_object: -D${v}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" objects "${OBJECTS}")
# $<TARGET_OBJECTS> lists the tier's precompiled header too (CMake does for object libraries).
list(FILTER objects EXCLUDE REGEX "\\.gch$")
set(entries kfuse_tier_compile_isa_${TIER} kfuse_tier_limits_isa_${TIER})
execute_process(COMMAND ${LD} -r --force-group-allocation -o ${OUT} ${objects}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kfuse_tier_object: ld -r failed for tier ${TIER}:\n${err}")
endif()
set(keep "")
foreach(e IN LISTS entries)
  list(APPEND keep --keep-global-symbol=${e})
endforeach()
execute_process(COMMAND ${OBJCOPY} ${keep} ${OUT} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kfuse_tier_object: objcopy failed for tier ${TIER}:\n${err}")
endif()
# nm --defined-only -g: the global definitions left (T, D, B, R, W, V, u ...).
execute_process(COMMAND ${NM} --defined-only -g ${OUT} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
string(REGEX REPLACE "\n$" "" syms "${syms}")
string(REPLACE "\n" ";" syms "${syms}")
set(stray "")
foreach(line IN LISTS syms)
  string(REGEX REPLACE "^.* " "" name "${line}")
  if(NOT name IN_LIST entries)
    list(APPEND stray "${line}")
  endif()
endforeach()
if(stray)
  list(LENGTH stray n)
  list(SUBLIST stray 0 5 some)
  list(JOIN some "\n  " some)
  message(FATAL_ERROR "kfuse_tier_object: tier ${TIER} still defines ${n} global symbols besides "
                      "its entry points (a tier's code could then run on another tier's CPU), e.g.\n  ${some}")
endif()
