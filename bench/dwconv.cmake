# Depthwise convolution (and pooling) benchmark: kfuse vs XNNPACK (libxnnpack-dev +
# libpthreadpool-dev) and oneDNN (libdnnl-dev + OpenMP), in-process. Target name: dwconv_bench
# (scripts/bench_conv.sh runs it). A missing peer is reported and its rows are left out.
find_package(OpenMP QUIET)
find_package(dnnl CONFIG QUIET)
find_path(KFUSE_XNNPACK_INCLUDE xnnpack.h)
find_path(KFUSE_PTHREADPOOL_INCLUDE pthreadpool.h)
find_library(KFUSE_XNNPACK_LIB XNNPACK)
find_library(KFUSE_PTHREADPOOL_LIB pthreadpool)
add_executable(dwconv_bench dwconv_bench.cpp)
kfuse_arch_flags(native dwconv_bench_flags)
target_compile_options(dwconv_bench PRIVATE ${dwconv_bench_flags})
target_link_libraries(dwconv_bench PRIVATE kfuse::kfuse benchmark::benchmark)
if(KFUSE_XNNPACK_INCLUDE AND KFUSE_PTHREADPOOL_INCLUDE AND KFUSE_XNNPACK_LIB AND KFUSE_PTHREADPOOL_LIB)
  target_include_directories(dwconv_bench PRIVATE ${KFUSE_XNNPACK_INCLUDE} ${KFUSE_PTHREADPOOL_INCLUDE})
  target_link_libraries(dwconv_bench PRIVATE ${KFUSE_XNNPACK_LIB} ${KFUSE_PTHREADPOOL_LIB})
  target_compile_definitions(dwconv_bench PRIVATE KFUSE_BENCH_HAVE_XNNPACK=1)
else()
  message(WARNING "kfuse: XNNPACK (libxnnpack-dev, libpthreadpool-dev) not found: the depthwise "
                  "benchmark has no XNNPACK column")
endif()
if(TARGET DNNL::dnnl AND OpenMP_CXX_FOUND)
  target_link_libraries(dwconv_bench PRIVATE DNNL::dnnl OpenMP::OpenMP_CXX)
  target_compile_definitions(dwconv_bench PRIVATE KFUSE_BENCH_HAVE_DNNL=1)
else()
  message(WARNING "kfuse: oneDNN (libdnnl-dev) or OpenMP not found: the depthwise benchmark has "
                  "no oneDNN column")
endif()
