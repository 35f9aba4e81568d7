# Randomized differential test of the graph executor (docs/robustness.md, "Randomized
# differential test"): random valid graphs compared with a double reference and the unfused f32
# plan, random invalid graphs and arguments expecting kfuse::error. Fixed seed and count in CI
# (KFUSE_FUZZ_SEED / KFUSE_FUZZ_COUNT override them; scripts/fuzz_graphs.sh runs it longer).
# It links the prebuilt plan compiler (tests/CMakeLists.txt, kfuse_graph_compiler_<arch>).
kfuse_arch_set(host fuzz_host)
kfuse_add_arch_test(robustness_graph_fuzz SOURCES robustness/graph_fuzz_test.cpp
                    ARCHS ${fuzz_host} SANITIZE ci)
