# depthwise_conv2d tests: f32 (both layouts, epilogues, threads, errors) and the bf16 / int8
# recipes, in separate TUs to keep each compile short. CI archs: generic and avx512_bf16, plus
# avx2 for f32 (the CI time budget); every other arch x part under "full".
kfuse_arch_set(kernel_ci dw_kernel_ci)
kfuse_arch_set(f32_tails_ci dw_f32_tails)
kfuse_add_arch_test(kernels_conv_depthwise_f32 SOURCES kernels/conv/depthwise_f32_test.cpp
                    CI_ARCHS ${dw_kernel_ci} ${dw_f32_tails} SANITIZE ci)
kfuse_add_arch_test(kernels_conv_depthwise_lowp SOURCES kernels/conv/depthwise_lowp_test.cpp
                    CI_ARCHS ${dw_kernel_ci} SANITIZE full)
