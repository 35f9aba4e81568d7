#!/usr/bin/env bash
# Threading where inference runs: kfuse (bench/threading_bench) and ONNX Runtime (npm
# onnxruntime-node through bench/ort/ort_run.js, intraOpNumThreads = the same count) on the same
# models, in the same run, under four conditions:
#   a  1 thread
#   b  2 threads, idle machine
#   c  2 threads, the process pinned to one core (taskset; KFUSE_NUM_THREADS=2 keeps kfuse's pool
#      at 2, which its default would size to 1)
#   d  2 threads while a busy-loop process occupies one core (pinned to the second CPU)
# Prints the CPU, kfuse's probed limits and pool, ONNX Runtime's per-call overhead from node, and
# one markdown table (medians of KFUSE_BENCH_ROUNDS alternated rounds) with the targets of
# docs/executor.md: c/a <= 1.15, d/a <= 1.3, each no worse than ONNX Runtime's; plots c/a and d/a
# of both in docs/plots/threading.png (python3-matplotlib).
#   scripts/bench_threading.sh [model ...]     models: mlp_b1 mlp_b64 block_b1 mobile_b1
# Needs the peers: scripts/setup.sh --peers. Serialized with flock on /tmp/kfuse_bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KFUSE_BENCH_BUILD:-build/bench}
rounds=${KFUSE_BENCH_ROUNDS:-3}
ort_dir=${KFUSE_ORT_DIR:-$HOME/.cache/kfuse/ort}
models=("$@")
((${#models[@]})) || models=(mlp_b1 mlp_b64 block_b1 mobile_b1)
[[ -d $ort_dir/node_modules/onnxruntime-node ]] || { echo "no onnxruntime-node in $ort_dir: scripts/setup.sh --peers" >&2; exit 2; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target threading_bench -j "${KFUSE_JOBS:-1}" >/dev/null
/usr/bin/python3 scripts/make_models.py "$build/models" >/dev/null
out=$build/threading-results
rm -rf "$out" && mkdir -p "$out"

mapfile -t cpus < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | while IFS=- read -r a b; do seq "$a" "${b:-$a}"; done)
((${#cpus[@]} >= 2)) || { echo "needs two CPUs in the affinity mask" >&2; exit 2; }
pin=${cpus[0]} busy_cpu=${cpus[1]}
declare -A shape=([mlp_b1]=1,784 [mlp_b64]=64,784 [block_b1]=1,64,56,56 [mobile_b1]=1,3,224,224 [tiny]=1,1)
declare -A reps=([mlp_b1]=400 [mlp_b64]=100 [block_b1]=60 [mobile_b1]=150 [tiny]=2000)

busy_pid=
stop_busy() {
  if [[ -n $busy_pid ]]; then
    kill "$busy_pid" 2>/dev/null || true
    wait "$busy_pid" 2>/dev/null || true
  fi
  busy_pid=
}
trap stop_busy EXIT
# run_condition COND ROUND: every model, kfuse then ONNX Runtime, under COND.
run_condition() {
  local cond=$1 round=$2 threads=2 prefix=() env=()
  case $cond in
    a) threads=1 ;;
    c) prefix=(taskset -c "$pin"); env=(KFUSE_NUM_THREADS=2) ;;
    d) taskset -c "$busy_cpu" bash -c 'while :; do :; done' & busy_pid=$!; sleep 0.2 ;;
  esac
  for m in "${models[@]}"; do
    env "${env[@]}" "${prefix[@]}" "$build/bench/threading_bench" \
      --benchmark_filter="kfuse_replay/$m/threads:$threads/" --benchmark_repetitions=5 \
      --benchmark_min_time=0.2 --benchmark_format=json >"$out/kfuse_${m}_${cond}_$round.json" 2>/dev/null
    NODE_PATH=$ort_dir/node_modules "${prefix[@]}" node bench/ort/ort_run.js "$build/models/$m.onnx" \
      --shape "x=${shape[$m]}" --threads "$threads" --reps "${reps[$m]}" --warmup 20 \
      >"$out/ort_${m}_${cond}_$round.txt"
  done
  stop_busy
}
(
  flock 9
  NODE_PATH=$ort_dir/node_modules node bench/ort/ort_run.js "$build/models/tiny.onnx" --shape x=1,1 \
    --threads 1 --reps 2000 --warmup 100 >"$out/ort_tiny.txt"
  for ((r = 0; r < rounds; ++r)); do
    for cond in a b c d; do run_condition "$cond" "$r"; done
  done
) 9>/tmp/kfuse_bench.lock

/usr/bin/python3 - "$out" "$rounds" "${models[@]}" <<'PY'
import json, re, statistics, subprocess, sys
sys.path.insert(0, "scripts")
from bench_report import ratio_plot
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def kfuse(m, c, r):
    doc = json.load(open(f"{out}/kfuse_{m}_{c}_{r}.json"))
    med = [b for b in doc["benchmarks"] if b.get("aggregate_name") == "median"]
    b = med[0] if med else doc["benchmarks"][0]
    if b.get("error_occurred"): raise SystemExit(f"kfuse {m}: {b.get('error_message')}")
    mean = b["real_time"] * {"ns": 1e-3, "us": 1, "ms": 1e3}[b["time_unit"]]
    return {"median": b["median_call_us"], "mean": mean}, b, doc["context"]
def ort(m, c, r):
    line = open(f"{out}/ort_{m}_{c}_{r}.txt").read()
    return {k: float(re.search(k + r" ([0-9.]+) ms", line).group(1)) * 1e3 for k in ("median", "mean")}
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
name = re.search(r"Model name:\s*(.*)", cpu).group(1)
ctx = kfuse(models[0], "a", 0)[2]
print(f"CPU: {name}, {ctx.get('num_cpus')} CPUs; kfuse limits: {ctx.get('kfuse.limits')}")
print(f"kfuse pool (unpinned): {ctx.get('kfuse.pool')}; measured split cost {float(ctx.get('kfuse.fork_join_ns', 0)):.0f} ns")
tiny = float(re.search(r"median ([0-9.]+) ms", open(f"{out}/ort_tiny.txt").read()).group(1)) * 1e3
print(f"ONNX Runtime per-call overhead from node (x + 1 on one float): {tiny:.1f} us (in every ORT figure below)")
print(f"Medians of {rounds} alternated rounds. a = 1 thread, b = 2 threads, c = 2 threads pinned to one core, "
      "d = 2 threads while a busy loop runs on one core.")
def us(t): return f"{t / 1000:.2f} ms" if t >= 1000 else f"{t:.1f} us"
bars = {"kfuse c/a": [], "ORT c/a": [], "kfuse d/a": [], "ORT d/a": []}
for stat, what in (("median", "median call (the statistic of ONNX Runtime's latency line)"),
                   ("mean", "mean call (throughput: a stall of a time slice counts in full)")):
    print(f"\n{what}; targets c/a <= 1.15 and d/a <= 1.3, each no worse than ONNX Runtime's (3% noise allowed)\n")
    print("| model | kfuse a | b | c | d | c/a | d/a | ORT a | b | c | d | c/a | d/a | c target | d target |")
    print("|---" * 15 + "|")
    for m in models:
        k = {c: statistics.median(kfuse(m, c, r)[0][stat] for r in range(rounds)) for c in "abcd"}
        o = {c: statistics.median(ort(m, c, r)[stat] for r in range(rounds)) for c in "abcd"}
        kc, kd, oc, od = k["c"] / k["a"], k["d"] / k["a"], o["c"] / o["a"], o["d"] / o["a"]
        if stat == "median":
            for name, v in (("kfuse c/a", kc), ("ORT c/a", oc), ("kfuse d/a", kd), ("ORT d/a", od)):
                bars[name].append(v)
        met_c = "met" if kc <= 1.15 and kc <= oc * 1.03 else ("no (vs ORT)" if kc <= 1.15 else "no")
        met_d = "met" if kd <= 1.3 and kd <= od * 1.03 else ("no (vs ORT)" if kd <= 1.3 else "no")
        print(f"| {m} | {us(k['a'])} | {us(k['b'])} | {us(k['c'])} | {us(k['d'])} | {kc:.2f} | {kd:.2f} | "
              f"{us(o['a'])} | {us(o['b'])} | {us(o['c'])} | {us(o['d'])} | {oc:.2f} | {od:.2f} | {met_c} | {met_d} |")
print("\nkfuse's pool per run (round 0): split nodes / steps; jobs published, run alone, late, stalled in c and d")
for m in models:
    row = []
    for c in "cd":
        b = kfuse(m, c, 0)[1]
        row.append(f"{c}: {b.get('jobs_per_run', 0):.2f} published, {b.get('solo_jobs_per_run', 0):.2f} alone, "
                   f"{b.get('late_per_run', 0):.3f} late, {b.get('stalled_per_run', 0):.4f} stalled")
    b = kfuse(m, "b", 0)[1]
    print(f"- {m}: {b.get('split_nodes', 0):.0f}/{b.get('steps', 0):.0f} split; " + "; ".join(row))
ratio_plot("docs/plots/threading.png", "2 threads pinned to one core (c) and beside a busy core (d)", models,
           bars, {"kfuse c/a": 1.15, "kfuse d/a": 1.3},
           "median call time / median call time on 1 thread (lower is better; dashed: the targets)")
PY
