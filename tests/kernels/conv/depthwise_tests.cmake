# depthwise_conv2d tests: f32 (both layouts, epilogues, threads, errors) and the bf16 / int8
# recipes, in separate TUs to keep each compile short. CI archs: generic and avx512_bf16, plus
# avx2 for f32 (the CI time budget); every other arch x part under "full".
kfuse_arch_set(kernel_ci dw_kernel_ci)
kfuse_arch_set(f32_tails_ci dw_f32_tails)
foreach(t f32 lowp)
  set(dw_ci_archs ${dw_kernel_ci})
  if(t STREQUAL "f32")
    list(APPEND dw_ci_archs ${dw_f32_tails})
  endif()
  set(dw_full_archs ${archs})
  list(REMOVE_ITEM dw_full_archs ${dw_ci_archs})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/conv/depthwise_${t}_test.cpp)
    kfuse_add_arch_test(kernels_conv_depthwise_${t} SOURCES kernels/conv/depthwise_${t}_test.cpp
                        LABELS "ci" ARCHS ${dw_ci_archs})
    if(KFUSE_FULL_TESTS AND dw_full_archs)
      kfuse_add_arch_test(kernels_conv_depthwise_${t} SOURCES kernels/conv/depthwise_${t}_test.cpp
                          LABELS "full" ARCHS ${dw_full_archs})
    endif()
  endif()
endforeach()
