# Normalization benchmark (softmax, layer norm, RMS norm): kfuse vs oneDNN vs a hand-written
# AVX-512 loop. Included from bench/CMakeLists.txt after Google Benchmark was found.
# Run it with scripts/bench_norm.sh. The hand loop needs AVX-512 and OpenMP.
find_package(OpenMP QUIET)
find_package(dnnl CONFIG QUIET)
if(NOT OpenMP_CXX_FOUND)
  message(WARNING "kfuse: OpenMP not found: norm_bench (its 2-thread hand loop and oneDNN peer "
                  "need it) is skipped")
  return()
endif()
add_executable(norm_bench norm_bench.cpp)
kfuse_arch_flags(native norm_bench_flags)
target_compile_options(norm_bench PRIVATE ${norm_bench_flags})
target_link_libraries(norm_bench PRIVATE kfuse::kfuse benchmark::benchmark OpenMP::OpenMP_CXX)
if(TARGET DNNL::dnnl)
  target_link_libraries(norm_bench PRIVATE DNNL::dnnl)
  target_compile_definitions(norm_bench PRIVATE KFUSE_BENCH_HAVE_DNNL=1)
else()
  message(WARNING "kfuse: oneDNN (libdnnl-dev) not found: norm_bench has no oneDNN column. "
                  "Install the peers with scripts/setup.sh --peers")
endif()
