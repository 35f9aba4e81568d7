#!/usr/bin/env bash
# Executor benchmarks from one command: the per-node replay overhead (replay_bench, when the
# executor's benchmark is built) and the models (models_bench: MLP and ResNet basic block, kfuse
# replay / kfuse eager op by op / libtorch frozen TorchScript / chained oneDNN primitives, at 1
# and 2 threads) and ONNX Runtime on the same models in the same run (npm onnxruntime-node through
# bench/ort/ort_run.js, intraOpNumThreads = the same count; models from scripts/make_models.py).
# Prints the CPU and markdown tables; ratios are same-run medians. Plots the replay's ratios to
# each peer in docs/plots/executor.png (python3-matplotlib).
#   scripts/bench_executor.sh [extra google-benchmark args, e.g. --benchmark_filter=mlp]
# Needs the peers: scripts/setup.sh --peers. Runs are serialized with flock on
# /tmp/kfuse_bench.lock (the machine is shared); medians of KFUSE_BENCH_REPS repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh
kfuse_bench_configure
targets=(models_bench)
if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^replay_bench:'; then targets+=(replay_bench); fi
cmake --build "$build" --target "${targets[@]}" -j "${KFUSE_JOBS:-1}"
out=$build/executor-results
mkdir -p "$out"
export OMP_WAIT_POLICY=passive  # OpenMP workers (oneDNN, libtorch) must not spin against kfuse's
reps=(--benchmark_repetitions="${KFUSE_BENCH_REPS:-5}" --benchmark_report_aggregates_only=true
      --benchmark_min_time="${KFUSE_BENCH_MIN_TIME:-0.2}")
if [[ -x $build/bench/replay_bench ]]; then
  flock /tmp/kfuse_bench.lock "$build/bench/replay_bench" "${reps[@]}" \
    --benchmark_out="$out/replay.json" --benchmark_out_format=json "$@"
fi
flock /tmp/kfuse_bench.lock "$build/bench/models_bench" "${reps[@]}" \
  --benchmark_out="$out/models.json" --benchmark_out_format=json "$@" >/dev/null
# ONNX Runtime on the same models and thread counts, right after (same machine state).
/usr/bin/python3 scripts/make_models.py "$build/models" >/dev/null
declare -A shape=([mlp_b1]=1,784 [mlp_b64]=64,784 [block_b1]=1,64,56,56 [block_b8]=8,64,56,56)
declare -A ort_reps=([mlp_b1]=400 [mlp_b64]=100 [block_b1]=60 [block_b8]=15)
(
  flock 9
  NODE_PATH=$ort_dir/node_modules node bench/ort/ort_run.js "$build/models/tiny.onnx" --shape x=1,1 \
    --threads 1 --reps 2000 --warmup 100 >"$out/ort_tiny.txt"
  for m in mlp_b1 mlp_b64 block_b1 block_b8; do
    for t in 1 2; do
      NODE_PATH=$ort_dir/node_modules node bench/ort/ort_run.js "$build/models/$m.onnx" \
        --shape "x=${shape[$m]}" --threads "$t" --reps "${ort_reps[$m]}" --warmup 10 \
        >"$out/ort_${m}_t$t.txt"
    done
  done
) 9>/tmp/kfuse_bench.lock
/usr/bin/python3 - "$out/models.json" "$out" <<'PY'
import json, os, re, subprocess, sys
sys.path.insert(0, "scripts")
from bench_report import ratio_plot
doc = json.load(open(sys.argv[1]))
out = sys.argv[2]
cpu = re.search(r"Model name:\s*(.*)", subprocess.run(["lscpu"], capture_output=True, text=True).stdout).group(1)
ctx = doc.get("context", {})
print(f"CPU: {cpu}, {ctx.get('num_cpus')} CPUs; kfuse limits: {ctx.get('kfuse.limits', '-')}")
def ort_us(name):
    f = f"{out}/ort_{name}.txt"
    if not os.path.exists(f): return None
    return float(re.search(r"median ([0-9.]+) ms", open(f).read()).group(1)) * 1e3
tiny = ort_us("tiny")
print(f"ONNX Runtime per-call overhead from node (x + 1 on one float): {tiny:.1f} us, inside every ORT figure below\n")
rows = {}   # (model, prec, batch, threads) -> {impl: (median_us, error)}
ort = {}
benches = doc["benchmarks"]
if any(b.get("run_type") == "aggregate" for b in benches):  # repetitions: the medians
    benches = [b for b in benches if b.get("aggregate_name") == "median"]
for b in benches:
    m = re.match(r"(\w+?)/(mlp|block)_(f32|bf16|int8)/batch:(\d+)/threads:(\d+)", b["name"])
    if not m:
        continue
    impl, model, prec, batch, threads = m.group(1), m.group(2), m.group(3), int(m.group(4)), int(m.group(5))
    key = (model, prec, batch, threads)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "us")]
    t, cpu = b.get("real_time", 0.0) * scale, b.get("cpu_time", 0.0) * scale
    rows.setdefault(key, {})[impl] = (t, b.get("error_message"), cpu)
    ort[key] = ort_us(f"{model}_b{batch}_t{threads}")
impls = [("kfuse_replay", "kfuse replay"), ("kfuse_eager", "kfuse eager op by op"),
         ("torch_frozen", "libtorch frozen"), ("dnnl_chained", "oneDNN chained")]
target = {("mlp", "f32", 1): 0.8, ("mlp", "bf16", 1): 0.5, ("mlp", "int8", 1): 0.3}
def us(t):
    return f"{t/1000:.2f} ms" if t >= 1000 else f"{t:.1f} us"
def fmt(v):
    if v is None: return "-"
    t, err = v[0], v[1]
    if err: return "error"
    # The calling thread's CPU time too: on a loaded machine it shows what the run got.
    return us(t) + (f" (cpu {us(v[2])})" if len(v) > 2 and v[2] < 0.8 * t else "")
def vs(r, peer):
    a, b = r.get("kfuse_replay"), r.get(peer)
    if not a or not b or a[1] or b[1]: return "-"
    return f"{a[0] / b[0]:.2f}x"
print("| model | prec | batch | threads | " + " | ".join(n for _, n in impls) +
      " | replay / oneDNN | replay / libtorch | ORT (same run) | replay / ORT | goal | met |")
print("|---" * (len(impls) + 10) + "|")
labels, bars = [], {"ONNX Runtime": [], "oneDNN chained": [], "libtorch frozen": []}
def over(a, b):
    return a[0] / b[0] if a and b and not a[1] and not b[1] else None
for key in sorted(rows, key=lambda k: (k[0] != "mlp", k[1] != "f32", k[2], k[3], k[1])):
    model, prec, batch, threads = key
    r = rows[key]
    o = ort.get(key)
    rep = r.get("kfuse_replay")
    ratio = rep[0] / o if (rep and not rep[1] and o) else None
    goal = target.get((model, prec, batch), 1.0)
    labels.append(f"{model} {prec} b{batch} t{threads}")
    bars["ONNX Runtime"].append(ratio)
    bars["oneDNN chained"].append(over(rep, r.get("dnnl_chained")))
    bars["libtorch frozen"].append(over(rep, r.get("torch_frozen")))
    print(f"| {model} | {prec} | {batch} | {threads} | " + " | ".join(fmt(r.get(i)) for i, _ in impls) +
          f" | {vs(r, 'dnnl_chained')} | {vs(r, 'torch_frozen')}" +
          f" | {us(o) if o else '-'} | {f'{ratio:.2f}x' if ratio else '-'} | <= {goal}x | "
          f"{('yes' if ratio <= goal else 'no') if ratio else '-'} |")
ratio_plot("docs/plots/executor.png", "executor models: kfuse replay against its peers", labels, bars, {},
           "kfuse replay time / peer time (lower is better; ONNX Runtime: f32 model at every precision)")
PY
