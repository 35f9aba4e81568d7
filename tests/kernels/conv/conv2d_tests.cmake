# conv2d (dense and grouped convolution, batch-norm folding). Paths relative to tests/.
# CI (the 30-minute budget): generic (scalar) and avx512_bf16 (vdpbf16ps, vpdpbusd) for every
# part, plus avx2 (8 lanes, other tails) for the NHWC f32 part; every other arch x part under "full".
kfuse_arch_set(kernel_ci conv2d_ci_archs)
kfuse_arch_set(f32_tails_ci conv2d_f32_tails)
foreach(part f32 f32_nchw lowp lowp_nchw errors)
  set(ci ${conv2d_ci_archs})
  if(part STREQUAL "f32")
    list(APPEND ci ${conv2d_f32_tails})
  endif()
  set(conv2d_full_archs ${archs})
  list(REMOVE_ITEM conv2d_full_archs ${ci})
  kfuse_add_arch_test(kernels_conv2d_${part} SOURCES kernels/conv/conv2d_${part}_test.cpp
                      LABELS "ci" ARCHS ${ci})
  if(KFUSE_FULL_TESTS AND conv2d_full_archs)
    kfuse_add_arch_test(kernels_conv2d_${part} SOURCES kernels/conv/conv2d_${part}_test.cpp
                        LABELS "full" ARCHS ${conv2d_full_archs})
  endif()
endforeach()

# conv_transpose2d (GEMM + banded col2im): the CI archs; every other under "full".
set(conv_transpose_full_archs ${archs})
list(REMOVE_ITEM conv_transpose_full_archs ${conv2d_ci_archs})
kfuse_add_arch_test(kernels_conv_transpose2d SOURCES kernels/conv/conv_transpose2d_test.cpp
                    LABELS "ci" ARCHS ${conv2d_ci_archs})
if(KFUSE_FULL_TESTS AND conv_transpose_full_archs)
  kfuse_add_arch_test(kernels_conv_transpose2d SOURCES kernels/conv/conv_transpose2d_test.cpp
                      LABELS "full" ARCHS ${conv_transpose_full_archs})
endif()

# conv2d's Winograd F(4x4, 3x3) path: the CI archs plus avx2 (8-lane tails); every other under
# "full".
set(winograd_ci ${conv2d_ci_archs} ${conv2d_f32_tails})
set(winograd_full_archs ${archs})
list(REMOVE_ITEM winograd_full_archs ${winograd_ci})
kfuse_add_arch_test(kernels_conv_winograd SOURCES kernels/conv/winograd_test.cpp LABELS "ci"
                    ARCHS ${winograd_ci})
if(KFUSE_FULL_TESTS AND winograd_full_archs)
  kfuse_add_arch_test(kernels_conv_winograd SOURCES kernels/conv/winograd_test.cpp LABELS "full"
                      ARCHS ${winograd_full_archs})
endif()

# few_channel_conv2d (NCHW in, NHWC out stems): as the Winograd path.
kfuse_add_arch_test(kernels_conv_few_channel SOURCES kernels/conv/few_channel_conv2d_test.cpp
                    LABELS "ci" ARCHS ${winograd_ci})
if(KFUSE_FULL_TESTS AND winograd_full_archs)
  kfuse_add_arch_test(kernels_conv_few_channel SOURCES kernels/conv/few_channel_conv2d_test.cpp
                      LABELS "full" ARCHS ${winograd_full_archs})
endif()
