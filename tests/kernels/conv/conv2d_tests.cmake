# conv2d (dense and grouped convolution, batch-norm folding). Paths relative to tests/.
# CI: generic (scalar), avx2 and avx512_bf16 (vdpbf16ps, vpdpbusd); the rest under "full".
set(conv2d_ci_archs generic avx2 avx512_bf16)
set(conv2d_full_archs ${archs})
list(REMOVE_ITEM conv2d_full_archs ${conv2d_ci_archs})
foreach(part f32 f32_nchw lowp lowp_nchw errors)
  kfuse_add_arch_test(kernels_conv2d_${part} SOURCES kernels/conv/conv2d_${part}_test.cpp
                      LABELS "ci" ARCHS ${conv2d_ci_archs})
  if(KFUSE_FULL_TESTS AND conv2d_full_archs)
    kfuse_add_arch_test(kernels_conv2d_${part} SOURCES kernels/conv/conv2d_${part}_test.cpp
                        LABELS "full" ARCHS ${conv2d_full_archs})
  endif()
endforeach()
