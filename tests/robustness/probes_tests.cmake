# Bad-argument probes of the kernels (sizes that overflow, null spans, overlaps, quantization
# parameters, empty tensors, NaN): the generic arch everywhere (CI), this machine's tier too; the
# checks are arch-independent, so the aarch64 smoke run (qemu, CI time) leaves them out.
kfuse_arch_set(reference probes_reference)
kfuse_arch_set(host probes_host)
kfuse_add_arch_test(robustness_kernel_probes SOURCES robustness/kernel_probes_test.cpp
                    ARCHS ${probes_reference} ${probes_host} SANITIZE ci)
# The executor's probes (names, sizes, quant params, typed and overlapping bindings, NaN through
# plans, plan::run from two threads): links the prebuilt plan compiler like the graph tests.
kfuse_add_arch_test(robustness_graph_probes SOURCES robustness/graph_probes_test.cpp
                    ARCHS ${probes_host} LABELS threads SANITIZE ci)
