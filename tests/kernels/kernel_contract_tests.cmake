# The kernel contract and workspaces (kernels/kernel_contract.hpp, kernels/workspace.hpp): the
# scalar and the widest tier (kernel_ci), in CI.
kfuse_arch_set(kernel_ci contract_ci_archs)
kfuse_add_arch_test(kernels_kernel_contract SOURCES kernels/kernel_contract_test.cpp
                    ARCHS ${contract_ci_archs} SANITIZE ci)
