# Models benchmark (MLP, ResNet basic block): kfuse replay / kfuse eager op by op / libtorch
# frozen TorchScript / chained oneDNN primitives. Peers are optional: a missing one is a missing
# column (scripts/setup.sh --peers installs libdnnl-dev and libtorch-dev).
kfuse_add_bench(models_bench SOURCES models_bench.cpp PEERS dnnl torch)
