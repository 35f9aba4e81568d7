# Convolution benchmark. Peers in-process: oneDNN (libdnnl-dev, with OpenMP) and XNNPACK
# (libxnnpack-dev + pthreadpool).
kfuse_add_bench(conv_bench SOURCES conv_bench.cpp PEERS dnnl xnnpack)
