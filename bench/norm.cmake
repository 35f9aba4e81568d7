# Normalization benchmark (softmax, layer norm, RMS norm): kfuse vs oneDNN vs a hand-written
# AVX-512 loop. Run it with scripts/bench_norm.sh. The hand loop runs 2 threads with OpenMP.
kfuse_add_bench(norm_bench SOURCES norm_bench.cpp REQUIRES openmp PEERS dnnl)
