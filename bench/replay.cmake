# Executor replay overhead: a chain of 1000 relu nodes on 64 floats, replayed
# vs the same kernels called directly vs the plan run op by op. No peers: run with
#   flock /tmp/kfuse_bench.lock build/<dir>/bench/replay_bench --benchmark_repetitions=5
kfuse_add_bench(replay_bench SOURCES replay_bench.cpp)
# Threading where inference runs (scripts/bench_threading.sh: four conditions, ONNX Runtime in
# the same run).
kfuse_add_bench(threading_bench SOURCES threading_bench.cpp)
