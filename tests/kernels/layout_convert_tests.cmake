# Layout conversions (kernels/layout_convert.hpp), one executable per arch.
# CI: the unit_ci archs, every distinct vector implementation (arch_table.def); the rest: full.
kfuse_arch_set(unit_ci unit_ci_archs)
kfuse_add_arch_test(kernels_layout_convert SOURCES kernels/layout_convert_test.cpp
                    CI_ARCHS ${unit_ci_archs} LABELS smoke SANITIZE ci)
