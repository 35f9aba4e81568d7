# Epilogue stages, their math and their NaN / Inf behaviour (epilogue/), one executable per arch.
# CI: the unit_ci archs, every distinct vector implementation (arch_table.def); the rest: full.
kfuse_arch_set(unit_ci unit_ci_archs)
kfuse_add_arch_test(epilogue_stages SOURCES epilogue/stages_test.cpp CI_ARCHS ${unit_ci_archs}
                    LABELS smoke SANITIZE ci)
kfuse_add_arch_test(epilogue_math SOURCES epilogue/math_test.cpp CI_ARCHS ${unit_ci_archs}
                    LABELS smoke)
kfuse_add_arch_test(epilogue_nan_inf SOURCES epilogue/nan_inf_test.cpp CI_ARCHS ${unit_ci_archs}
                    LABELS smoke SANITIZE ci)
