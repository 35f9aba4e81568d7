# The vector layer (simd/): vec against scalar, streaming stores; one executable per arch.
# CI: the unit_ci archs, every distinct vector implementation (arch_table.def); the rest: full.
kfuse_arch_set(unit_ci unit_ci_archs)
kfuse_add_arch_test(simd_vec SOURCES simd/vec_test.cpp CI_ARCHS ${unit_ci_archs} LABELS smoke
                    SANITIZE ci)
kfuse_add_arch_test(simd_stream SOURCES simd/stream_test.cpp CI_ARCHS ${unit_ci_archs}
                    LABELS smoke)
