# Fused attention vs the unfused kfuse kernels vs oneDNN (matmul, softmax, matmul), and the
# decoder's KV-cache step. Run it with scripts/bench_attention.sh.
kfuse_add_bench(attention_bench SOURCES attention_bench.cpp PEERS openmp dnnl)
