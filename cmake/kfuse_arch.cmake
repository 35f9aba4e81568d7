# Per-arch compile flags: code for one kfuse arch is compiled in translation units that carry
# only that arch's flags (see docs/design.md, "One arch per translation unit").
#
#   kfuse_arch_flags(<arch> <out-var>)        flags for generic|sse4|avx2|avx512|avx512_vnni|
#                                             avx512_bf16|neon|neon_dotprod|native
#   kfuse_add_arch_sources(<target> ARCH <arch> SOURCES <files...>)
#                                             compiles <files> with that arch's flags

function(kfuse_arch_flags arch out)
  # Highway 1.0.3's AVX2/AVX3 static targets also need AES and PCLMUL (toolchain-notes).
  set(x86_hwy -maes -mpclmul)
  if(arch STREQUAL "generic")
    if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
      set(f -march=x86-64 -DKFUSE_FORCE_GENERIC=1)
    else()
      set(f -DKFUSE_FORCE_GENERIC=1)
    endif()
  elseif(arch STREQUAL "sse4")
    set(f -march=x86-64-v2 ${x86_hwy})
  elseif(arch STREQUAL "avx2")
    set(f -march=x86-64-v3 ${x86_hwy})
  elseif(arch STREQUAL "avx512")
    set(f -march=x86-64-v4 ${x86_hwy})
  elseif(arch STREQUAL "avx512_vnni")
    set(f -march=x86-64-v4 -mavx512vnni ${x86_hwy})
  elseif(arch STREQUAL "avx512_bf16")
    set(f -march=x86-64-v4 -mavx512vnni -mavx512bf16 ${x86_hwy})
  elseif(arch STREQUAL "neon")
    set(f -march=armv8-a)
  elseif(arch STREQUAL "neon_dotprod")
    set(f -march=armv8.2-a+fp16+dotprod+crypto)
  elseif(arch STREQUAL "native")
    set(f -march=native)
  else()
    message(FATAL_ERROR "kfuse_arch_flags: unknown arch '${arch}'")
  endif()
  set(${out} ${f} PARENT_SCOPE)
endfunction()

# The archs this compiler targets, best last.
function(kfuse_default_archs out)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    set(${out} generic sse4 avx2 avx512 avx512_vnni avx512_bf16 PARENT_SCOPE)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(${out} generic neon neon_dotprod PARENT_SCOPE)
  else()
    set(${out} generic PARENT_SCOPE)
  endif()
endfunction()

function(kfuse_add_arch_sources target)
  cmake_parse_arguments(A "" "ARCH" "SOURCES" ${ARGN})
  kfuse_arch_flags(${A_ARCH} flags)
  target_sources(${target} PRIVATE ${A_SOURCES})
  set_source_files_properties(${A_SOURCES} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${flags}")
endfunction()
