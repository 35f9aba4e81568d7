# The plan compiler's arch-independent passes, tested on their own (no kernel is instantiated:
# fast to build).
kfuse_add_test(graph_passes SOURCES graph/passes/fusion_test.cpp
               graph/passes/quantize_absorption_test.cpp graph/passes/memory_plan_test.cpp
               graph/passes/channel_gate_test.cpp graph/passes/layout_choice_test.cpp
               graph/passes/view_absorption_test.cpp graph/passes/qkv_merge_test.cpp
               graph/passes/entry_layout_test.cpp graph/passes/narrow_int8_test.cpp
               SANITIZE ci)
# One TU: each file would otherwise generate the same passes' code again (-O0 ASan: ~7 of its
# ~10 s per file).
if(TARGET graph_passes)
  set_target_properties(graph_passes PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
endif()
