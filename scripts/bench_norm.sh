#!/usr/bin/env bash
# Normalization benchmark from one command: softmax, layer norm and RMS norm on 4096 x 1024 f32
# (and bf16 rows), kfuse vs oneDNN vs a hand-written two-pass AVX-512 loop, 1 and 2 threads.
# Prints a markdown table: median GB/s [min - max over the repetitions] and the in-run ratios.
#
#   scripts/bench_norm.sh                         # 5 repetitions, interleaved, 0.2 s each
#   REPS=9 scripts/bench_norm.sh --benchmark_filter='softmax'
#
# Environment: BUILD_DIR (default build/bench-norm), JOBS (ninja -j, default 1), REPS (default
# 5), MIN_TIME (default 0.2), OUT (JSON, default $BUILD_DIR/norm_bench.json), TABLE_FROM=<json>
# (no build, no run: print the table of an earlier run). Extra arguments go to the binary.
# Runs are serialized with flock /tmp/kfuse_bench.lock (the machine is shared).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/bench-norm}
reps=${REPS:-5}
out=${OUT:-$build/norm_bench.json}

if [[ -z ${TABLE_FROM:-} ]]; then
  if [[ ! -f $build/CMakeCache.txt ]]; then  # an existing build dir keeps its settings
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_BENCH=ON \
      -DKFUSE_BUILD_TESTS=OFF -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
  fi
  cmake --build "$build" --target norm_bench -- -j"${JOBS:-1}" >/dev/null
  export OMP_WAIT_POLICY=passive  # OpenMP workers must not spin against kfuse's threads
  flock /tmp/kfuse_bench.lock "$build/bench/norm_bench" --benchmark_repetitions="$reps" \
    --benchmark_min_time="${MIN_TIME:-0.2}" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=false --benchmark_display_aggregates_only=true \
    --benchmark_out="$out" --benchmark_out_format=json "$@" >&2
else
  out=$TABLE_FROM
fi

python3 - "$out" <<'PY'
import json, re, statistics, sys

doc = json.load(open(sys.argv[1]))
runs = {}  # (op, impl, threads) -> [GB/s per repetition]
label = {}
for b in doc["benchmarks"]:
    if b.get("run_type") != "iteration" or b.get("error_occurred"):
        continue
    m = re.match(r"([^/]+)/([^/]+)/(\d+)", b["run_name"])
    key = (m.group(1), m.group(2), int(m.group(3)))
    runs.setdefault(key, []).append(b["GB/s"] / 1e9)
    label[key] = b.get("label", "")

def stats(key):
    v = runs.get(key)
    return None if not v else (statistics.median(v), min(v), max(v))

def cell(s):
    return "-" if s is None else f"{s[0]:.1f} [{s[1]:.1f}-{s[2]:.1f}]"

ctx = doc["context"]
print(f"{ctx.get('date', '')}, {ctx.get('num_cpus', '?')} CPUs, load avg "
      f"{', '.join(f'{x:.1f}' for x in ctx.get('load_avg', []))}, kfuse {ctx.get('kfuse.impl', '?')}; "
      f"{len(next(iter(runs.values()), []))} repetitions, GB/s = bytes of one read of the input "
      f"+ one write of the output per second, median [min-max]")
print()
print("| op | threads | kfuse | oneDNN | loop | loop, streaming stores | kfuse / oneDNN | kfuse / loop | kfuse / loop_nt |")
print("|---|---|---|---|---|---|---|---|---|")
ops = []
for (o, _, _) in runs:
    if o not in ops:
        ops.append(o)
verdicts = []
for o in ops:
    for t in (1, 2):
        k, d, l, n = (stats((o, i, t)) for i in ("kfuse", "onednn", "loop", "loop_nt"))
        if k is None:
            continue
        ratio = lambda p: "-" if p is None else f"{k[0] / p[0]:.2f}"
        print(f"| {o} | {t} | {cell(k)} | {cell(d)} | {cell(l)} | {cell(n)} | {ratio(d)} | {ratio(l)} | {ratio(n)} |")
        if o in ("softmax_f32", "layer_norm_f32") and d and l:
            r_d, r_l = k[0] / d[0], k[0] / l[0]
            overlap = k[2] >= l[1] and l[2] >= k[1]
            met_l = r_l >= 1.0 or (r_l >= 0.97 and overlap)
            verdicts.append(f"- {o} {t}T: {r_d:.2f}x oneDNN ({'met' if r_d >= 2 else 'NOT met'}), "
                            f"{r_l:.2f}x loop ({'met' if met_l else 'NOT met'}"
                            f"{', ranges overlap' if overlap and r_l < 1 else ''})")
others = [(o, i, t) for (o, i, t) in runs if i not in ("kfuse", "onednn", "loop", "loop_nt")]
for key in others:
    print(f"| {key[0]} ({key[1]}) | {key[2]} | {cell(stats(key))} | | | | | | |")
print()
print("Targets (>= 2x oneDNN and >= 1.0x the loop; >= 0.97x counts when the min-max ranges overlap):")
print("\n".join(verdicts))
print()
print("Paths: " + "; ".join(sorted({f'{k[0]}/{k[1]}: {v}' for k, v in label.items() if k[2] == 1})))
PY

# docs/plots/norm.png: GB/s per op and library, 1 and 2 threads (python3-matplotlib).
/usr/bin/python3 "$root/scripts/plot_bench.py" "$root/docs/plots/norm.png" "norms, 4096 x 1024" \
  "$out" --rate "GB/s" --scale 1e-9 --bars --args _,threads >&2
