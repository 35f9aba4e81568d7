# pool2d tests: f32/bf16 (modes, epilogues, NaN, threads, errors) and u8/i8, one TU each.
# CI archs: generic and avx512_bf16, plus avx2 for float (the CI time budget); the rest under
# "full".
kfuse_arch_set(kernel_ci pool_kernel_ci)
kfuse_arch_set(f32_tails_ci pool_f32_tails)
kfuse_add_arch_test(kernels_pool2d_float SOURCES kernels/pool2d_float_test.cpp
                    CI_ARCHS ${pool_kernel_ci} ${pool_f32_tails} SANITIZE ci)
kfuse_add_arch_test(kernels_pool2d_int8 SOURCES kernels/pool2d_int8_test.cpp
                    CI_ARCHS ${pool_kernel_ci} SANITIZE full)
