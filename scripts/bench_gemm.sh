#!/usr/bin/env bash
# GEMM benchmark, all peers side by side from one command; prints a markdown table and writes
# the plot docs/plots/gemm.png.
#   scripts/bench_gemm.sh [extra google-benchmark args, e.g. --benchmark_filter=f32]
# Needs the peers: scripts/setup.sh --peers. Quote medians: the machine is shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KFUSE_BENCH_BUILD:-build/bench}
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
flock /tmp/kfuse_bench.lock cmake --build $build --target gemm_bench gemm_bench_openblas
out=$build/gemm-results
mkdir -p $out
export OMP_WAIT_POLICY=passive  # OpenMP workers must not spin against kfuse's threads
reps=(--benchmark_repetitions=${KFUSE_BENCH_REPS:-5} --benchmark_display_aggregates_only=true)
flock /tmp/kfuse_bench.lock $build/bench/gemm_bench "${reps[@]}" --benchmark_out=$out/gemm.json --benchmark_out_format=json "$@" >/dev/null
OPENBLAS_CORETYPE=SkylakeX flock /tmp/kfuse_bench.lock $build/bench/gemm_bench_openblas "${reps[@]}" \
  --benchmark_out=$out/openblas.json --benchmark_out_format=json "$@" >/dev/null
python3 scripts/gemm_table.py $out/gemm.json $out/openblas.json
# docs/plots/gemm.png: GFLOP/s against problem size, kfuse and the peers (python3-matplotlib)
/usr/bin/python3 scripts/plot_gemm.py docs/plots/gemm.png $out/gemm.json $out/openblas.json
