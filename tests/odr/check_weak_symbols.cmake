# cmake -DNM=<nm> -DOBJ_A=<object> -DOBJ_B=<object> [-DMARK_A=<regex> -DMARK_B=<regex>]
#       -P check_weak_symbols.cmake
#
# Fails when a weak symbol (nm type W, V, w, v or u: what the linker merges across objects,
# keeping ONE copy) whose demangled name contains "kfuse" is defined in both objects, other than
# the allowed ones below. OBJ_A and OBJ_B are the same source built with different -march flags,
# so such a symbol could be the code (or data) of one arch run by a TU built for another.
#
# Allowed, each because it is kfuse::error's compiler-generated code, shared on purpose (see
# include/kfuse/error.hpp): one `catch (const kfuse::error&)` must work whichever TU threw, so its
# typeinfo must be one object. None of these contains ISA-specific instructions (the vtable and
# typeinfo are data; the destructor and the inherited constructor only call std::runtime_error's
# and store the vtable pointer).
cmake_minimum_required(VERSION 3.20)
set(allowed
    "^vtable for kfuse::error$"                          # data
    "^typeinfo for kfuse::error$"                        # data, must be unique for catch
    "^typeinfo name for kfuse::error$"                   # data
    "^kfuse::error::~error\\(\\)$"                       # D0/D1 destructors
    "^kfuse::error::runtime_error\\(.*\\)$"              # inherited std::runtime_error ctors
    "^kfuse::error::error\\(.*\\)$")                     # implicit copy / move constructors

foreach(v NM OBJ_A OBJ_B)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_weak_symbols: -D${v}=... is required")
  endif()
endforeach()

# The demangled names of the weak symbols an object defines that mention kfuse.
function(weak_kfuse_symbols obj out)
  execute_process(COMMAND ${NM} -C --defined-only ${obj} OUTPUT_VARIABLE text
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_weak_symbols: ${NM} ${obj} failed: ${err}")
  endif()
  string(REPLACE ";" "\\;" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  set(all_kfuse 0)
  foreach(line IN LISTS lines)
    # "<address> <type> <name>"; the name may contain spaces.
    if(line MATCHES "^[0-9a-fA-F]* ([WVwvu]) (.*)$")
      set(name "${CMAKE_MATCH_2}")
      if(name MATCHES "kfuse")
        list(APPEND names "${name}")
      endif()
    endif()
    if(line MATCHES "kfuse")
      math(EXPR all_kfuse "${all_kfuse} + 1")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} "${names}" PARENT_SCOPE)
  set(${out}_all ${all_kfuse} PARENT_SCOPE)
endfunction()

function(is_allowed name out)
  foreach(re IN LISTS allowed)
    if(name MATCHES "${re}")
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

weak_kfuse_symbols(${OBJ_A} a)
weak_kfuse_symbols(${OBJ_B} b)
list(LENGTH a na)
list(LENGTH b nb)
message(STATUS "${OBJ_A}: ${a_all} kfuse symbols, ${na} of them weak")
message(STATUS "${OBJ_B}: ${b_all} kfuse symbols, ${nb} of them weak")

# Not vacuous: each object must hold kfuse code of its own ISA namespace.
function(expect_mark obj names mark)
  if(NOT mark)
    return()
  endif()
  foreach(name IN LISTS names)
    if(name MATCHES "${mark}")
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "check_weak_symbols: no weak symbol of ${obj} matches '${mark}': "
                      "the objects do not hold the per-ISA kfuse code this check is about")
endfunction()
expect_mark(${OBJ_A} "${a}" "${MARK_A}")
expect_mark(${OBJ_B} "${b}" "${MARK_B}")

set(shared "")
set(shared_allowed "")
foreach(name IN LISTS a)
  list(FIND b "${name}" i)
  if(i GREATER_EQUAL 0)
    is_allowed("${name}" ok)
    if(ok)
      list(APPEND shared_allowed "${name}")
    else()
      list(APPEND shared "${name}")
    endif()
  endif()
endforeach()

foreach(name IN LISTS shared_allowed)
  message(STATUS "allowed, defined in both: ${name}")
endforeach()
if(shared)
  list(LENGTH shared n)
  string(REPLACE ";" "\n  " pretty "${shared}")
  message(FATAL_ERROR "${n} weak kfuse symbol(s) defined in both objects (the linker keeps one "
                      "copy for both ISAs):\n  ${pretty}")
endif()
message(STATUS "OK: no weak kfuse symbol outside the allowed list is defined in both objects")
