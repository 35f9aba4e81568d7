# Sourced by the same-run benchmarks against ONNX Runtime (bench_executor.sh, bench_onnx.sh,
# bench_transformers.sh, transformer_accuracy.sh): the bench build directory, the ONNX Runtime
# check and NODE_PATH. kfuse_bench_configure [cmake args...] configures the Release bench build;
# kfuse_bench_kfuse_run configures it with the importer, builds kfuse-run and sets $run.
build=${KFUSE_BENCH_BUILD:-build/bench}
ort_dir=${KFUSE_ORT_DIR:-$HOME/.cache/kfuse/ort}
[[ -d $ort_dir/node_modules/onnxruntime-node ]] || { echo "no onnxruntime-node in $ort_dir: scripts/setup.sh --peers" >&2; exit 2; }
export NODE_PATH=$ort_dir/node_modules
kfuse_bench_configure() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
    -DKFUSE_BUILD_EXAMPLES=OFF "$@" >/dev/null
}
kfuse_bench_kfuse_run() {
  kfuse_bench_configure -DKFUSE_ONNX=ON
  cmake --build "$build" --target kfuse_run -j "${KFUSE_JOBS:-1}"
  run=$build/src/tools/kfuse-run
}
