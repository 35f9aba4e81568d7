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

# The zoo benchmarks (bench_zoo.sh, bench_zoo_int8.sh):
# ms_of LOG: the median a kfuse-run / ort_run.js log reports (empty when it has none).
ms_of() { sed -n 's/^latency: median \([0-9.]*\) ms.*/\1/p' "$1" 2>/dev/null | head -1; }
# round_size ONE_MS BATCH BUDGET_MS MAX: "reps warmup" for a round of about BUDGET_MS of replays
# of a model whose batch-1 call takes ONE_MS (2 to MAX replays; a fifth of them warm-up, 1 to 5).
round_size() {
  local reps
  reps=$(awk -v one="${1:-0}" -v b="$2" -v budget="$3" -v hi="$4" \
    'BEGIN { r = one > 0 ? int(budget / (one * b)) : hi; print r < 2 ? 2 : (r > hi ? hi : r) }')
  echo "$reps $((reps / 5 > 5 ? 5 : (reps / 5 < 1 ? 1 : reps / 5)))"
}
# alternated_rounds ROUNDS KLOG OLOG: runs the commands in the arrays kcmd (kfuse-run) and ocmd
# (ONNX Runtime) ROUNDS times, the one that goes first alternating, into KLOG_r<N>.txt and
# OLOG_r<N>.txt. Round 0 lets kfuse-run's --layout auto pick; the later rounds run its pick
# without the trial (which costs more than the timing on the largest models).
alternated_rounds() {
  local rounds=$1 r l klog olog
  local layout=()
  for ((r = 0; r < rounds; ++r)); do
    klog=${2}_r$r.txt olog=${3}_r$r.txt
    if ((r % 2 == 0)); then
      "${kcmd[@]}" "${layout[@]}" >"$klog" 2>&1 || true
      "${ocmd[@]}" >"$olog" 2>&1 || true
    else
      "${ocmd[@]}" >"$olog" 2>&1 || true
      "${kcmd[@]}" "${layout[@]}" >"$klog" 2>&1 || true
    fi
    if ((r == 0)); then
      l=$(sed -n 's/^layout: auto -> \([a-z]*\).*/\1/p' "$klog" | head -1)
      [[ -z $l ]] || layout=(--layout "$l")
    fi
  done
}
