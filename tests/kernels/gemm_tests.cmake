# GEMM tests instantiate many tiles per epilogue (~3 CPU-minutes per arch): CI covers generic,
# avx2_vnni (the ymm f32 kernels of avx2 plus the ymm vpdpbusd kernel) and avx512_bf16 (zmm, the
# vdpbf16ps and vpdpbusd kernels); the other archs (and the aarch64 ones) run under "full".
kfuse_arch_set(gemm_ci gemm_ci_archs)
kfuse_add_arch_test(kernels_gemm SOURCES kernels/gemm_test.cpp CI_ARCHS ${gemm_ci_archs}
                    SANITIZE ci)

# batched_gemm (the run-time operand products of matmul and attention) and the fused attention
# kernel (its score and value products run on the same micro-kernels): the gemm micro-kernels
# are covered above, so the kernel CI set (scalar and the widest tier) checks their addressing.
kfuse_arch_set(kernel_ci batched_gemm_ci_archs)
foreach(t batched_gemm attention)
  kfuse_add_arch_test(kernels_${t} SOURCES kernels/${t}_test.cpp ARCHS ${batched_gemm_ci_archs}
                      SANITIZE ci)
endforeach()
