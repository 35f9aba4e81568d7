# Convolution benchmark. Peers in-process: oneDNN (libdnnl-dev, with OpenMP) and XNNPACK
# (libxnnpack-dev + pthreadpool).
kfuse_add_bench(conv_bench SOURCES conv_bench.cpp PEERS dnnl xnnpack)
# bf16 and int8 convolutions against f32 on the same layers; no peers.
kfuse_add_bench(conv_lowp_bench SOURCES conv_lowp_bench.cpp)
