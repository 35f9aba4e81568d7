# GEMM benchmark. Peers: oneDNN (libdnnl-dev) and Eigen (its 2-thread runs need OpenMP)
# in-process, OpenBLAS (libopenblas-openmp-dev) in its own executable.
kfuse_add_bench(gemm_bench SOURCES gemm_bench.cpp PEERS openmp dnnl eigen_openmp)
kfuse_add_bench(gemm_bench_openblas SOURCES gemm_bench_openblas.cpp REQUIRES openblas PLAIN)
