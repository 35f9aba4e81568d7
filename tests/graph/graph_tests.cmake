# Graph executor tests. graph_test and graph_errors_test each instantiate the plan compiler
# (kfuse/graph/compile.hpp: every op adapter); CI builds them for the host set (avx512_bf16,
# int8 included, or the best tier the build machine runs). The generic copies (~40 CPU-s each)
# run under "full": the executor's own logic is the same code on every arch, and the scalar
# kernels it calls are in CI's kernel tests.
# The executor tests also carry "threads" so the ThreadSanitizer phase runs them.
# (arch_table.def's sets: host = avx512_bf16 or the machine's best, reference = generic.)
kfuse_arch_set(host graph_host)
kfuse_arch_set(reference graph_reference)
kfuse_add_arch_test(graph_exec SOURCES graph/graph_test.cpp graph/ops/channel_shuffle_test.cpp
                    graph/ops/conv2d_grouped_test.cpp graph/ops/eltwise_test.cpp
                    graph/ops/strided_view_test.cpp ARCHS ${graph_host} ${graph_reference}
                    CI_ARCHS ${graph_host} LABELS threads SANITIZE ci)
kfuse_add_arch_test(graph_errors SOURCES graph/graph_errors_test.cpp ARCHS ${graph_host}
                    SANITIZE full)
# Zero heap allocations during replay, on every thread (replaces the global operator new, so it
# stays out of the sanitizer builds).
kfuse_add_arch_test(graph_noalloc SOURCES graph/graph_noalloc_test.cpp ARCHS ${graph_host})
# Quantize absorption into producers' epilogues (int8 MLP and conv chains, explicit quantize
# nodes): fused vs unfused within one quantization step.
kfuse_add_arch_test(graph_quant_fusion SOURCES graph/graph_quant_fusion_test.cpp
                    ARCHS ${graph_host} ${graph_reference} CI_ARCHS ${graph_host} SANITIZE full)
# Threading where inference runs: the process pinned to one core with pools of 1..8 threads,
# application threads against a busy loop, one replay buffer on two threads (docs/executor.md);
# split_replay (a batch as one-thread parts at once).
# Its own executable: the pinning must come before the default pool exists, which
# KFUSE_NUM_THREADS=4 then makes oversubscribe the core.
kfuse_add_arch_test(graph_threading SOURCES graph/graph_threading_test.cpp graph/split_replay_test.cpp
                    ARCHS ${graph_host} LABELS threads SANITIZE ci)
foreach(arch IN LISTS graph_host)
  kfuse_set_discovered(graph_threading_${arch} ENVIRONMENT KFUSE_NUM_THREADS=4)
endforeach()
# Selective builds (compile<ops<...>>): the TU instantiates the listed ops itself.
kfuse_add_arch_test(graph_selective SOURCES graph/selective_build_test.cpp ARCHS ${graph_host})
# The vocabulary helpers (names, bind) and their ADL behaviour: header-only, no kernel.
kfuse_add_test(graph_names SOURCES graph/names_test.cpp LABELS smoke)
# The op registry: every op's rule has what the passes ask for, and its builder call makes the
# rule's attributes (parses the rules; instantiates no kernel).
kfuse_add_test(graph_registry SOURCES graph/ops/registry_test.cpp LABELS smoke)
