#!/usr/bin/env bash
# bf16 and int8 convolutions against f32 on the same layers, one command:
# builds bench/conv_lowp_bench (Release, arch native), runs it (REPS repetitions, medians) and
# prints the CPU, the probed per-core peaks and a markdown table of GFLOP/s (int8: GOP/s) with
# bf16 / f32 and int8 / f32 next to the targets (>= 1.7x, >= 3x; the depthwise row is
# memory-bound and shown without a target).
#   scripts/bench_conv_lowp.sh [--benchmark_filter=...]
# Environment: BUILD_DIR (default build/bench-conv), REPS (3), MIN_TIME (0.2), JOBS (1).
# Serialized with flock on /tmp/kfuse_bench.lock. Single-thread rows are rated by the thread's
# CPU time, two-thread rows by wall time (as scripts/bench_conv.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/bench-conv}
json=$build/conv_lowp.json
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF -DKFUSE_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target conv_lowp_bench -- -j"${JOBS:-1}" >/dev/null
flock /tmp/kfuse_bench.lock "$build/bench/conv_lowp_bench" --benchmark_min_time="${MIN_TIME:-0.2}" \
  --benchmark_repetitions="${REPS:-3}" --benchmark_display_aggregates_only=true \
  --benchmark_out="$json" --benchmark_out_format=json "$@" >/dev/null
/usr/bin/python3 - "$json" <<'EOF'
import json, re, sys
from collections import defaultdict
d = json.load(open(sys.argv[1]))
ctx = d["context"]
print(f"CPU: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}, "
      f"{ctx.get('num_cpus')} CPUs; probed per-core peaks: {ctx.get('limits', '?')}\n")
unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
rate = defaultdict(dict)
label = {}
for b in d["benchmarks"]:
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    m = re.match(r"(\w+)/(\d+)/(\d+)/(\d+)/real_time", b["run_name"])
    if not m:
        continue
    kind, li, n, t = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    secs = (b["cpu_time"] if t == 1 else b["real_time"]) * unit[b["time_unit"]]
    rate[(t, n, li)][kind] = b["MFLOP"] * 1e-3 / secs
    label[(li, kind)] = b.get("label", "")
layers = ["C=64 56x56 K=64 3x3", "C=128 28x28 K=128 3x3", "C=256 14x14 K=256 3x3",
          "C=512 7x7 K=512 3x3", "C=256 56x56 K=64 1x1", "C=96 28x28 K=576 1x1",
          "C=16 112x112 K=64 1x1", "C=144 56x56 depthwise 3x3"]  # bench/conv_lowp_bench.cpp's order
def verdict(r, target, li):
    if r is None:
        return "-"
    if li == len(layers) - 1:
        return f"{r:.2f} (memory-bound)"
    return f"{r:.2f} ({'met' if r >= target else 'not met'})"
print("| threads | N | layer | f32 GFLOP/s | bf16 GFLOP/s | int8 GOP/s | bf16 / f32 (target >= 1.7) | int8 / f32 (target >= 3) |")
print("|---|---|---|---|---|---|---|---|")
for (t, n, li), r in sorted(rate.items()):
    f, b, i = r.get("f32"), r.get("bf16"), r.get("int8")
    cell = lambda v: f"{v:.0f}" if v else "-"
    print(f"| {t} | {n} | {layers[li]} | {cell(f)} | {cell(b)} | {cell(i)} | "
          f"{verdict(b / f if b and f else None, 1.7, li)} | {verdict(i / f if i and f else None, 3.0, li)} |")
print("\nKernels: " + "; ".join(f"{layers[li]} {k}: {v}" for (li, k), v in sorted(label.items())))
EOF
