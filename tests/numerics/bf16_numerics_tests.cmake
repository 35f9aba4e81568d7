# bf16 numerics across archs (labels "ci;smoke;numerics"): one executable, numerics_bf16, whose
# bf16_numerics_arch.cpp is compiled once per arch of the build with only that arch's flags; the
# main TU (default flags) runs every arch the CPU supports on the same inputs and compares them
# with the first arch (generic) and with a double reference. The main TU (default flags) and then
# the generic arch's TU come first in the link, so inline library functions that several TUs
# instantiate resolve to baseline code.
# avx2_vnni and avx512_vnni run the bf16 code of avx2 and avx512 (their TUs cost 20-35 CPU-s each at
# -O1): they join under KFUSE_FULL_TESTS.
set(exe numerics_bf16)
set(bn_archs ${archs})
if(NOT KFUSE_FULL_TESTS)
  kfuse_arch_set(bf16_full_only bn_full_only)
  list(REMOVE_ITEM bn_archs ${bn_full_only})
endif()
add_executable(${exe} numerics/bf16_numerics_test.cpp)
kfuse_note_test_sources(numerics/bf16_numerics_test.cpp)
foreach(arch IN LISTS bn_archs)
  kfuse_add_arch_sources(${exe} ARCH ${arch} SOURCES numerics/bf16_numerics_arch.cpp)
  target_compile_definitions(${exe} PRIVATE BN_HAS_${arch}=1)
endforeach()
target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(${exe} PRIVATE kfuse::kfuse kfuse_catch_main)
target_compile_options(${exe} PRIVATE ${KFUSE_KERNEL_SANITIZER_FLAGS} ${KFUSE_TEST_OPT_FLAGS})
catch_discover_tests(${exe})
kfuse_set_discovered(${exe} LABELS "ci;smoke;numerics")
kfuse_note_test_labels(${exe} "ci;smoke;numerics")
