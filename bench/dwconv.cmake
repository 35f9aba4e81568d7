# Depthwise convolution (and pooling) benchmark: kfuse vs XNNPACK (libxnnpack-dev +
# libpthreadpool-dev) and oneDNN (libdnnl-dev + OpenMP), in-process. Target name: dwconv_bench
# (scripts/bench_conv.sh runs it). A missing peer is reported and its rows are left out.
kfuse_add_bench(dwconv_bench SOURCES dwconv_bench.cpp PEERS xnnpack dnnl)
