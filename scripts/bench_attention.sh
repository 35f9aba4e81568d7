#!/usr/bin/env bash
# Fused attention against the unfused chain of kfuse kernels and against oneDNN (matmul, softmax,
# matmul), batch 1, 12 heads, head dim 64, sequence 128 to 4096, 1 and 2 threads; and the
# decoder's KV-cache step (one query against 128 to 2048 cached positions) next to its memory
# floor. Prints the CPU, the probed limits and markdown tables of medians (3 repetitions) with
# the ratios next to the target (fused >= 1.5x unfused from sequence 512), and plots the
# attention rows in docs/plots/attention.png.
#   scripts/bench_attention.sh [extra google-benchmark args]
# Needs Google Benchmark (and oneDNN for its column: scripts/setup.sh --peers).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KFUSE_BENCH_BUILD:-build/bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target attention_bench -j "${KFUSE_JOBS:-1}"
out=$build/attention-results
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
flock /tmp/kfuse_bench.lock "$build/bench/attention_bench" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="$out/attention.json" \
  --benchmark_out_format=json "$@" >/dev/null
/usr/bin/python3 - "$out/attention.json" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from bench_report import cpu_line
d = json.load(open(sys.argv[1]))
print(cpu_line())
print("limits:", d["context"].get("kfuse.limits", "?"), "| impl:", d["context"].get("kfuse.impl", "?"), "\n")
med = {}
for b in d["benchmarks"]:
    if b.get("aggregate_name") != "median": continue
    parts = b["run_name"].split("/")  # attention/fused/S/t/real_time
    med[(parts[0], parts[1], int(parts[2]), int(parts[3]))] = b
def t(k): return med[k]["real_time"] if k in med else None
print("| seq | threads | fused | unfused kfuse | oneDNN chain | unfused / fused | oneDNN / fused | traffic fused / unfused (MB) | target |")
print("|---|---|---|---|---|---|---|---|---|")
for th in (1, 2):
    for s in (128, 256, 512, 1024, 2048, 4096):
        f, u, o = t(("attention", "fused", s, th)), t(("attention", "unfused", s, th)), t(("attention", "onednn", s, th))
        if f is None: continue
        cell = lambda v: f"{v:.2f} ms" if v is not None else "-"
        r = lambda v: f"{v / f:.2f}" if v is not None else "-"
        tf = med[("attention", "fused", s, th)]["traffic_MB"]
        tu = med[("attention", "unfused", s, th)]["traffic_MB"] if ("attention", "unfused", s, th) in med else 0
        target = "-" if s < 512 else ("met" if u is not None and u / f >= 1.5 else "not met")
        print(f"| {s} | {th} | {cell(f)} | {cell(u)} | {cell(o)} | {r(u)} | {r(o)} | {tf:.1f} / {tu:.1f} | {target} |")
print("\n| encoder heads (12 x 32) | threads | f32 products | bf16 products | GFLOP/s f32 / bf16 |")
print("|---|---|---|---|---|")
for th in (1, 2):
    for s in (128, 384):
        a, b = med.get(("encoder_heads", "f32", s, th)), med.get(("encoder_heads", "bf16", s, th))
        if a is None or b is None: continue
        print(f"| {s} | {th} | {a['real_time']:.3f} ms | {b['real_time']:.3f} ms | {a['GFLOP']:.0f} / {b['GFLOP']:.0f} |")
print("\n| context | threads | step | tokens/s | cache read | memory floor | step / floor |")
print("|---|---|---|---|---|---|---|")
for th in (1, 2):
    for c in (128, 512, 1024, 2048):
        k = ("kv_step", "kfuse", c, th)
        if k not in med: continue
        b = med[k]
        print(f"| {c} | {th} | {b['real_time']:.1f} us | {1e6 / b['real_time']:.0f} | {b['cache_MB']:.2f} MB | {b['floor_us']:.1f} us | {b['real_time'] / b['floor_us']:.2f} |")
PY

# docs/plots/attention.png: GFLOP/s against sequence length, fused / unfused / oneDNN, 1 and 2
# threads (python3-matplotlib).
/usr/bin/python3 scripts/plot_bench.py docs/plots/attention.png "attention, 12 heads x 64" \
  "$out/attention.json" --family attention --rate GFLOP --x seq --args seq,threads >&2
