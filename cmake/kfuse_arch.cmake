# Per-arch compile flags: code for one kfuse arch is compiled in translation units that carry
# only that arch's flags (see docs/design.md, "One arch per translation unit"). The archs, their
# flags and the named arch sets of the tests come from include/kfuse/arch/arch_table.def, the
# table the C++ tags (kfuse/arch/tags.hpp) are generated from.
#
#   kfuse_arch_flags(<arch> <out-var>)        flags for an arch of the table, or native
#   kfuse_default_archs(<out-var>)            the archs this compiler targets, best last
#   kfuse_arch_set(<set> <out-var>)           the archs of a named set (arch_table.def says why
#                                             each set exists), in table order; the row tagged
#                                             "host" becomes the build machine's best arch
#   kfuse_add_arch_sources(<target> ARCH <arch> SOURCES <files...>)
#                                             compiles <files> with that arch's flags

# The table: next to this file in the source tree; an installed package sets KFUSE_ARCH_TABLE
# (kfuse-config.cmake) to the copy installed with the headers.
if(NOT KFUSE_ARCH_TABLE)
  set(KFUSE_ARCH_TABLE ${CMAKE_CURRENT_LIST_DIR}/../include/kfuse/arch/arch_table.def)
endif()
if(NOT EXISTS ${KFUSE_ARCH_TABLE})
  message(FATAL_ERROR "kfuse: the arch table ${KFUSE_ARCH_TABLE} does not exist")
endif()
# Editing the table re-runs CMake (flags, default archs and test sets come from it).
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KFUSE_ARCH_TABLE})
# The rows go to global properties: the functions below may be called from any directory.
file(STRINGS ${KFUSE_ARCH_TABLE} _kfuse_rows REGEX "^KFUSE_ARCH")
# KFUSE_ARCH[_ROOT](name, parent, tier, bytes, bf16 dot, int8 dot, family, "flags", "sets"): the
# nine groups CMake's regex allows (the parent, tier and widths are checked by the C++ side).
set(_kfuse_re "^KFUSE_ARCH[_A-Z]*\\( *([a-z0-9_]+), *([a-z0-9_]+), *([0-9]+), *([0-9]+), *")
string(APPEND _kfuse_re "(true|false), *(true|false), *(x86|arm|none), *")
string(APPEND _kfuse_re "\"([^\"]*)\", *\"([^\"]*)\" *\\)")
set(_kfuse_names "")
foreach(_kfuse_row IN LISTS _kfuse_rows)
  if(NOT _kfuse_row MATCHES "${_kfuse_re}")
    message(FATAL_ERROR "kfuse: cannot read this row of ${KFUSE_ARCH_TABLE}:\n${_kfuse_row}")
  endif()
  list(APPEND _kfuse_names ${CMAKE_MATCH_1})
  set_property(GLOBAL PROPERTY KFUSE_ARCH_FAMILY_${CMAKE_MATCH_1} ${CMAKE_MATCH_7})
  separate_arguments(_kfuse_flags UNIX_COMMAND "${CMAKE_MATCH_8}")
  set_property(GLOBAL PROPERTY KFUSE_ARCH_FLAGS_${CMAKE_MATCH_1} "${_kfuse_flags}")
  separate_arguments(_kfuse_sets UNIX_COMMAND "${CMAKE_MATCH_9}")
  set_property(GLOBAL PROPERTY KFUSE_ARCH_SETS_${CMAKE_MATCH_1} "${_kfuse_sets}")
endforeach()
set_property(GLOBAL PROPERTY KFUSE_ARCH_NAMES "${_kfuse_names}")
set_property(GLOBAL PROPERTY KFUSE_ARCH_TABLE "${KFUSE_ARCH_TABLE}")
unset(_kfuse_re)
unset(_kfuse_rows)
unset(_kfuse_row)
unset(_kfuse_names)
unset(_kfuse_flags)
unset(_kfuse_sets)

include(${CMAKE_CURRENT_LIST_DIR}/kfuse_host_arch.cmake)
kfuse_probe_host_arch(_kfuse_host)
if(_kfuse_host)
  get_property(_kfuse_names GLOBAL PROPERTY KFUSE_ARCH_NAMES)
  if(NOT _kfuse_host IN_LIST _kfuse_names)
    set(_kfuse_host "")
  endif()
endif()
set_property(GLOBAL PROPERTY KFUSE_PROBED_HOST_ARCH "${_kfuse_host}")
unset(_kfuse_host)
unset(_kfuse_names)

# The arch family of the target processor: x86, arm, or none.
function(_kfuse_target_family out)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    set(${out} x86 PARENT_SCOPE)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(${out} arm PARENT_SCOPE)
  else()
    set(${out} none PARENT_SCOPE)
  endif()
endfunction()

function(kfuse_arch_flags arch out)
  get_property(names GLOBAL PROPERTY KFUSE_ARCH_NAMES)
  if(arch STREQUAL "native")
    set(f -march=native)
  elseif(arch IN_LIST names)
    get_property(f GLOBAL PROPERTY KFUSE_ARCH_FLAGS_${arch})
    get_property(family GLOBAL PROPERTY KFUSE_ARCH_FAMILY_${arch})
    _kfuse_target_family(target)
    # The x86 baseline first: a -march of CMAKE_CXX_FLAGS must not put vector code in generic.
    if(family STREQUAL "none" AND target STREQUAL "x86")
      list(PREPEND f -march=x86-64)
    endif()
  else()
    message(FATAL_ERROR "kfuse_arch_flags: unknown arch '${arch}'")
  endif()
  set(${out} ${f} PARENT_SCOPE)
endfunction()

# The archs this compiler targets, best last: the family-less ones and those of its family.
function(kfuse_default_archs out)
  get_property(names GLOBAL PROPERTY KFUSE_ARCH_NAMES)
  _kfuse_target_family(target)
  set(archs "")
  foreach(a IN LISTS names)
    get_property(family GLOBAL PROPERTY KFUSE_ARCH_FAMILY_${a})
    if(family STREQUAL "none" OR family STREQUAL target)
      list(APPEND archs ${a})
    endif()
  endforeach()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# The archs of a named set of arch_table.def, in table order (a set no row names is an error,
# most likely a typo).
function(kfuse_arch_set set out)
  get_property(names GLOBAL PROPERTY KFUSE_ARCH_NAMES)
  set(archs "")
  foreach(a IN LISTS names)
    get_property(sets GLOBAL PROPERTY KFUSE_ARCH_SETS_${a})
    if(set IN_LIST sets)
      list(APPEND archs ${a})
    endif()
  endforeach()
  if(NOT archs)
    get_property(table GLOBAL PROPERTY KFUSE_ARCH_TABLE)
    message(FATAL_ERROR "kfuse_arch_set: no arch of ${table} is in set '${set}'")
  endif()
  # The row tagged "host" stands for the widest tier: a build machine that cannot run it gets
  # the most extended arch it does run instead (kfuse_host_arch.cmake), not a set of skips.
  get_property(host GLOBAL PROPERTY KFUSE_PROBED_HOST_ARCH)
  if(host)
    set(swapped "")
    foreach(a IN LISTS archs)
      get_property(sets GLOBAL PROPERTY KFUSE_ARCH_SETS_${a})
      if("host" IN_LIST sets)
        set(a ${host})
      endif()
      if(NOT a IN_LIST swapped)
        list(APPEND swapped ${a})
      endif()
    endforeach()
    set(archs ${swapped})
  endif()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# Source file properties are per directory, not per target: setting COMPILE_OPTIONS on a file
# that several targets (one per arch) compile would give every one of them the flags of the last
# call. Each (target, arch, source) therefore gets its own one-line wrapper TU that includes the
# source, and the flags are set on the wrapper.
function(kfuse_add_arch_sources target)
  cmake_parse_arguments(A "" "ARCH" "SOURCES" ${ARGN})
  kfuse_arch_flags(${A_ARCH} flags)
  foreach(src IN LISTS A_SOURCES)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(name "${src}" NAME)
    set(wrapper "${CMAKE_CURRENT_BINARY_DIR}/kfuse_arch_sources/${target}/${A_ARCH}/${name}")
    file(CONFIGURE OUTPUT "${wrapper}" CONTENT
         "// Generated by kfuse_add_arch_sources: ${abs} for arch ${A_ARCH}.\n#include \"${abs}\"\n")
    target_sources(${target} PRIVATE "${wrapper}")
    set_source_files_properties("${wrapper}" TARGET_DIRECTORY ${target} PROPERTIES
                                COMPILE_OPTIONS "${flags}")
  endforeach()
endfunction()
