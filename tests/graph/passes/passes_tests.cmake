# The plan compiler's arch-independent passes, tested on their own (no kernel is instantiated:
# fast to build). Under ASan too (scripts/test.sh).
kfuse_add_test(graph_passes SOURCES graph/passes/fusion_test.cpp
               graph/passes/quantize_absorption_test.cpp graph/passes/memory_plan_test.cpp
               graph/passes/channel_gate_test.cpp graph/passes/layout_choice_test.cpp
               graph/passes/view_absorption_test.cpp
               LABELS "ci")
