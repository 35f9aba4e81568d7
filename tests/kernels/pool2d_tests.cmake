# pool2d tests: f32/bf16 (modes, epilogues, NaN, threads, errors) and u8/i8, one TU each.
# CI archs: generic and avx512_bf16, plus avx2 for float (the CI time budget); the rest under
# "full".
kfuse_arch_set(kernel_ci pool_kernel_ci)
kfuse_arch_set(f32_tails_ci pool_f32_tails)
foreach(t float int8)
  set(pool_ci_archs ${pool_kernel_ci})
  if(t STREQUAL "float")
    list(APPEND pool_ci_archs ${pool_f32_tails})
  endif()
  set(pool_full_archs ${archs})
  list(REMOVE_ITEM pool_full_archs ${pool_ci_archs})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/pool2d_${t}_test.cpp)
    kfuse_add_arch_test(kernels_pool2d_${t} SOURCES kernels/pool2d_${t}_test.cpp LABELS "ci"
                        ARCHS ${pool_ci_archs})
    if(KFUSE_FULL_TESTS AND pool_full_archs)
      kfuse_add_arch_test(kernels_pool2d_${t} SOURCES kernels/pool2d_${t}_test.cpp LABELS "full"
                          ARCHS ${pool_full_archs})
    endif()
  endif()
endforeach()
