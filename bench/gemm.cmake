# GEMM benchmark (included from bench/CMakeLists.txt after Google Benchmark was found).
# Peers: oneDNN (libdnnl-dev) and Eigen in-process, OpenBLAS (libopenblas-openmp-dev) in its own
# executable. scripts/setup.sh --peers installs them; a peer that is missing is reported by CMake.
find_package(OpenMP QUIET)
find_package(dnnl CONFIG QUIET)
add_executable(gemm_bench gemm_bench.cpp)
kfuse_arch_flags(native gemm_bench_flags)
target_compile_options(gemm_bench PRIVATE ${gemm_bench_flags})
target_link_libraries(gemm_bench PRIVATE kfuse::kfuse benchmark::benchmark)
if(OpenMP_CXX_FOUND)
  target_link_libraries(gemm_bench PRIVATE OpenMP::OpenMP_CXX)
endif()
if(TARGET DNNL::dnnl AND OpenMP_CXX_FOUND)
  target_link_libraries(gemm_bench PRIVATE DNNL::dnnl)
  target_compile_definitions(gemm_bench PRIVATE KFUSE_BENCH_HAVE_DNNL=1)
else()
  message(WARNING "kfuse: oneDNN (libdnnl-dev) or OpenMP not found: the GEMM benchmark has no oneDNN "
                  "column. Install the peers with scripts/setup.sh --peers")
endif()
if(TARGET Eigen3::Eigen AND OpenMP_CXX_FOUND)
  target_link_libraries(gemm_bench PRIVATE Eigen3::Eigen)
  target_compile_definitions(gemm_bench PRIVATE KFUSE_BENCH_HAVE_EIGEN=1)
endif()

find_path(KFUSE_OPENBLAS_INCLUDE cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
find_library(KFUSE_OPENBLAS_LIB openblas PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
if(KFUSE_OPENBLAS_INCLUDE AND KFUSE_OPENBLAS_LIB)
  add_executable(gemm_bench_openblas gemm_bench_openblas.cpp)
  target_include_directories(gemm_bench_openblas PRIVATE ${KFUSE_OPENBLAS_INCLUDE})
  target_link_libraries(gemm_bench_openblas PRIVATE ${KFUSE_OPENBLAS_LIB} benchmark::benchmark)
else()
  message(WARNING "kfuse: OpenBLAS (libopenblas-openmp-dev) not found: no OpenBLAS column. "
                  "Install the peers with scripts/setup.sh --peers")
endif()
