# conv2d (dense and grouped convolution, batch-norm folding). Paths relative to tests/.
# CI (the 30-minute budget): generic (scalar) and avx512_bf16 (vdpbf16ps, vpdpbusd) for every
# part, plus avx2 (8 lanes, other tails) for the NHWC f32 part; every other arch x part under "full".
kfuse_arch_set(kernel_ci conv2d_ci_archs)
kfuse_arch_set(f32_tails_ci conv2d_f32_tails)
set(conv2d_f32_ci ${conv2d_ci_archs} ${conv2d_f32_tails})
kfuse_add_arch_test(kernels_conv2d_f32 SOURCES kernels/conv/conv2d_f32_test.cpp
                    CI_ARCHS ${conv2d_f32_ci} SANITIZE ci)
foreach(part f32_nchw lowp lowp_nchw errors)
  kfuse_add_arch_test(kernels_conv2d_${part} SOURCES kernels/conv/conv2d_${part}_test.cpp
                      CI_ARCHS ${conv2d_ci_archs} SANITIZE full)
endforeach()

# conv_transpose2d (GEMM + banded col2im): the CI archs; every other under "full".
kfuse_add_arch_test(kernels_conv_transpose2d SOURCES kernels/conv/conv_transpose2d_test.cpp
                    CI_ARCHS ${conv2d_ci_archs})

# conv2d's Winograd F(4x4, 3x3) path and few_channel_conv2d (NCHW in, NHWC out stems): the CI
# archs plus avx2 (8-lane tails); every other under "full".
kfuse_add_arch_test(kernels_conv_winograd SOURCES kernels/conv/winograd_test.cpp
                    CI_ARCHS ${conv2d_f32_ci})
kfuse_add_arch_test(kernels_conv_few_channel SOURCES kernels/conv/few_channel_conv2d_test.cpp
                    CI_ARCHS ${conv2d_f32_ci})
