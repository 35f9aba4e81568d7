# Executor replay overhead (issue 5, point 9): a chain of 1000 relu nodes on 64 floats, replayed
# vs the same kernels called directly vs the plan run op by op. No peers: run with
#   flock /tmp/kfuse_bench.lock build/<dir>/bench/replay_bench --benchmark_repetitions=5
add_executable(replay_bench replay_bench.cpp)
kfuse_arch_flags(native replay_bench_flags)
target_compile_options(replay_bench PRIVATE ${replay_bench_flags})
target_link_libraries(replay_bench PRIVATE kfuse::kfuse benchmark::benchmark)
# Threading where inference runs (scripts/bench_threading.sh: four conditions, ONNX Runtime in
# the same run).
add_executable(threading_bench threading_bench.cpp)
target_compile_options(threading_bench PRIVATE ${replay_bench_flags})
target_link_libraries(threading_bench PRIVATE kfuse::kfuse benchmark::benchmark)
