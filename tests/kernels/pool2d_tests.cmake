# pool2d tests: f32/bf16 (modes, epilogues, NaN, threads, errors) and u8/i8, one TU each.
# CI archs: generic, avx2, avx512_bf16; the rest under "full".
set(pool_ci_archs generic avx2 avx512_bf16)
set(pool_full_archs ${archs})
list(REMOVE_ITEM pool_full_archs ${pool_ci_archs})
foreach(t float int8)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/pool2d_${t}_test.cpp)
    kfuse_add_arch_test(kernels_pool2d_${t} SOURCES kernels/pool2d_${t}_test.cpp LABELS "ci"
                        ARCHS ${pool_ci_archs})
    if(KFUSE_FULL_TESTS AND pool_full_archs)
      kfuse_add_arch_test(kernels_pool2d_${t} SOURCES kernels/pool2d_${t}_test.cpp LABELS "full"
                          ARCHS ${pool_full_archs})
    endif()
  endif()
endforeach()
