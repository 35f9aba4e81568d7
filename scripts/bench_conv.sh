#!/usr/bin/env bash
# Convolution benchmark tables from one command: conv2d (kfuse NHWC / NCHW vs oneDNN `any` and
# NHWC vs XNNPACK, ResNet-50 layers), then the depthwise (bench/dwconv_bench) and normalization
# (bench/norm_bench) benchmarks when those targets exist. Prints markdown tables.
#
#   scripts/bench_conv.sh                       # 3 repetitions, min time 0.2 s, medians
#   REPS=5 scripts/bench_conv.sh --benchmark_filter='bare'
#   TABLE_FROM=build/bench-conv/conv.json scripts/bench_conv.sh   # re-print an earlier run
#
# Environment: BUILD_DIR (default build/bench-conv), REPS (3), MIN_TIME (0.2), JOBS (ninja -j, 1).
# Runs are serialized with flock /tmp/kfuse_bench.lock (the machine is shared). Single-thread
# rows are rated by CPU time (the thread's own time: robust while other jobs share the cores),
# two-thread rows by wall time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build/bench-conv}
reps=${REPS:-3}
min_time=${MIN_TIME:-0.2}
jobs=${JOBS:-1}
export OMP_WAIT_POLICY=passive  # OpenMP workers must not spin against kfuse's threads

run_bench() {  # run_bench <binary> <json> [args]
  local bin=$1 json=$2
  shift 2
  flock /tmp/kfuse_bench.lock "$bin" --benchmark_min_time="$min_time" \
    --benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true \
    --benchmark_out="$json" --benchmark_out_format=json "$@" >/dev/null
}

if [[ -z ${TABLE_FROM:-} ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
    -DKFUSE_BUILD_EXAMPLES=OFF -DKFUSE_BUILD_BENCH=ON >/dev/null
  targets=$(cmake --build "$build" --target help | sed -n 's/^\([a-z_]*\): .*/\1/p')
  want=(conv_bench)
  for t in dwconv_bench norm_bench; do
    if grep -qx "$t" <<<"$targets"; then want+=("$t"); fi
  done
  cmake --build "$build" --target "${want[@]}" -- -j"$jobs" >/dev/null
  run_bench "$build/bench/conv_bench" "$build/conv.json" "$@"
  for t in dwconv_bench norm_bench; do
    if [[ -x $build/bench/$t ]]; then run_bench "$build/bench/$t" "$build/$t.json"; fi
  done
  conv_json=$build/conv.json
else
  conv_json=$TABLE_FROM
  build=$(dirname "$TABLE_FROM")
fi

python3 - "$conv_json" "$build/dwconv_bench.json" "$build/norm_bench.json" <<'EOF'
import json, os, re, sys
from collections import defaultdict

def medians(path):
    """The median entry of each benchmark (the single run when there are no repetitions)."""
    rows, reps = {}, defaultdict(list)
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                rows[b["run_name"]] = b
        else:
            reps[b["run_name"]].append(b)
    for name, runs in reps.items():
        rows.setdefault(name, runs[0])
    REPS[path] = reps
    return rows

REPS = {}

def rate(b, threads):
    """GFLOP/s: CPU time for one thread (robust to sharing), wall time for more."""
    mflop = b.get("MFLOP")
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
    if mflop is None:
        return b.get("GFLOPs", 0)
    t = (b["cpu_time"] if threads == 1 else b["real_time"]) * unit
    return mflop * 1e-3 / t

conv = medians(sys.argv[1])
conv_reps = REPS[sys.argv[1]]

def rep_range(impl_key, t):
    """min, max GFLOP/s over the repetitions of one benchmark (None when not repeated)."""
    runs = conv_reps.get(impl_key)
    if not runs:
        return None
    v = [rate(b, t) for b in runs]
    return min(v), max(v)

def verdict(a, b, ka, kb, t, target):
    """The verdict rule: met at >= target, or at >= 0.97 target when the min-max ranges overlap."""
    if not a or not b:
        return "-"
    r = a / b
    if r >= target:
        return "met"
    ra, rb = rep_range(ka, t), rep_range(kb, t)
    if r >= 0.97 * target and ra and rb and ra[1] * 1.0 >= rb[0] * target:
        return "met (ranges overlap)"
    return f"**not met** ({(r / target - 1) * 100:+.0f}%)"
layers = ["C=64 56x56 K=64 3x3", "C=256 56x56 K=64 1x1", "C=128 28x28 K=128 3x3",
          "C=512 7x7 K=512 3x3"]
peak = {}
for t in (1, 2):
    b = conv.get(f"peak/fp32/{t}/real_time")
    if b:
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}[b.get("time_unit", "ns")]
        secs = (b["cpu_time"] if t == 1 else b["real_time"]) * unit
        peak[t] = 24 * 32 * (1 << 16) * t / secs * 1e-9
impls = ["kfuse_nhwc", "kfuse_nchw", "onednn_any", "onednn_nhwc", "xnnpack"]
table = defaultdict(dict)
names = defaultdict(dict)
labels = {}
for name, b in conv.items():
    m = re.match(r"(bare|bias_relu)/(\w+)/(\d+)/(\d+)/(\d+)/real_time", name)
    if not m:
        continue
    epi, impl, li, batch, t = m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5))
    table[(t, batch, li, epi)][impl] = rate(b, t)
    names[(t, batch, li, epi)][impl] = name
    labels[impl] = b.get("label", "")

print("### conv2d f32, GFLOP/s (median of %s repetitions; %% = of the in-run FMA peak)" %
      os.environ.get("REPS", "3"))
print()
print("FMA peak probe: " + ", ".join(f"{t} thread{'s' if t > 1 else ''}: {p:.0f} GFLOP/s"
                                      for t, p in sorted(peak.items())))
print()
print("| threads | N | layer | epilogue | kfuse NHWC | kfuse NCHW | oneDNN any | oneDNN NHWC | "
      "XNNPACK | NHWC / best oneDNN | target >= 1.0 | NCHW / NHWC | target >= 0.9 | "
      "NHWC / XNNPACK |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def cell(v, t):
    if v is None:
        return "-"
    p = peak.get(t)
    return f"{v:.0f} ({100 * v / p:.0f}%)" if p else f"{v:.0f}"
def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"
for key in sorted(table):
    t, batch, li, epi = key
    r = table[key]
    nhwc, nchw = r.get("kfuse_nhwc"), r.get("kfuse_nchw")
    best_impl = max([k for k in r if k.startswith("onednn")], key=lambda k: r[k], default=None)
    best = r.get(best_impl) if best_impl else None
    n = names[key]
    v1 = verdict(nhwc, best, n.get("kfuse_nhwc"), n.get(best_impl), t, 1.0)
    v2 = verdict(nchw, nhwc, n.get("kfuse_nchw"), n.get("kfuse_nhwc"), t, 0.9)
    print(f"| {t} | {batch} | {layers[li]} | {epi.replace('_', '+')} | " +
          " | ".join(cell(r.get(i), t) for i in impls) +
          f" | {ratio(nhwc, best)} | {v1} | {ratio(nchw, nhwc)} | {v2} | "
          f"{ratio(nhwc, r.get('xnnpack'))} |")
print()
print("Kernels: " + "; ".join(f"{k}: {v}" for k, v in sorted(labels.items()) if v))

# Other families' benchmarks: a plain table of their medians and counters.
for path in sys.argv[2:]:
    if not os.path.exists(path):
        continue
    print()
    print(f"### {os.path.basename(path)[:-5]} (median of repetitions)")
    print()
    rows = medians(path)
    keys = sorted({k for b in rows.values() for k, v in b.items()
                   if isinstance(v, (int, float)) and k not in (
                       "real_time", "cpu_time", "iterations", "repetitions", "repetition_index",
                       "threads", "family_index", "per_family_instance_index")})
    print("| benchmark | time | " + " | ".join(keys) + " | label |")
    print("|---|---|" + "---|" * len(keys) + "---|")
    for name, b in rows.items():
        vals = " | ".join(f"{b[k]:.4g}" if k in b else "-" for k in keys)
        print(f"| {name} | {b['real_time']:.4g} {b.get('time_unit', 'ns')} | {vals} | "
              f"{b.get('label', '')} |")
EOF

# docs/plots/conv.png, depthwise.png and norm.png: GFLOP/s per layer, kfuse and the peers
# (python3-matplotlib; scripts/plot_bench.py).
/usr/bin/python3 "$root/scripts/plot_bench.py" "$root/docs/plots/conv.png" \
  "conv2d f32, ResNet-50 layers" "$conv_json" --family bare >&2
if [[ -f $build/dwconv_bench.json ]]; then
  /usr/bin/python3 "$root/scripts/plot_bench.py" "$root/docs/plots/depthwise.png" \
    "depthwise, MobileNetV3 / EfficientNet layers" "$build/dwconv_bench.json" --family layers \
    --rate GFLOPs >&2
fi
if [[ -f $build/norm_bench.json ]]; then  # docs/plots/norm.png: GB/s per op and library
  /usr/bin/python3 "$root/scripts/plot_bench.py" "$root/docs/plots/norm.png" \
    "norms, 4096 x 1024" "$build/norm_bench.json" --rate "GB/s" --scale 1e-9 --bars \
    --args _,threads >&2
fi
