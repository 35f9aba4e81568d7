#!/usr/bin/env bash
# Builds bench/eltwise_bench (Release, -march=native) in its own build directory, runs it with
# JSON output and prints the markdown table of docs/benchmarks/eltwise.md (summarized in
# docs/performance.md), and plots it in docs/plots/eltwise.png.
#
#   scripts/bench_eltwise.sh                  # 5 repetitions, medians
#   REPS=9 scripts/bench_eltwise.sh --benchmark_filter='fused|triad|copy'
#
# Environment: BUILD_DIR (default build-bench), JOBS (ninja -j, default 1), REPS (default 5),
# OUT (JSON file, default $BUILD_DIR/eltwise_bench.json), KFUSE_NUM_THREADS (pool size),
# KFUSE_BENCH_HUGEPAGES=0 (no MADV_HUGEPAGE on the 256 MiB arrays), TABLE_FROM=<json> (no build
# and no run: print the table of that earlier output).
# Extra arguments are passed to the benchmark binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
jobs=${JOBS:-1}
reps=${REPS:-5}
out=${OUT:-$build/eltwise_bench.json}

if [[ -n ${TABLE_FROM:-} ]]; then  # only print the table of an earlier run's JSON
  out=$TABLE_FROM
else
# Release, benchmarks on; the examples are not needed here.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_BENCH=ON \
  -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target eltwise_bench -- -j"$jobs" >/dev/null
bin=$build/bench/eltwise_bench
if [[ ! -x $bin ]]; then
  echo "bench_eltwise.sh: $bin was not built (is libbenchmark-dev installed?)" >&2
  exit 1
fi

"$bin" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json "$@" >&2
fi

python3 - "$out" <<'PY'
import json, re, sys

doc = json.load(open(sys.argv[1]))
med, best = {}, {}  # (case, threads) -> GB/s: median, best repetition ("max" aggregate)
order = []
for b in doc["benchmarks"]:
    agg = b.get("aggregate_name")
    if agg not in ("median", "max") or b.get("error_occurred"):
        continue
    m = re.match(r"([^/]+)/threads:(\d+)", b["run_name"])
    key = (m.group(1), int(m.group(2)))
    (med if agg == "median" else best)[key] = b["GB/s"]
    if key not in order:
        order.append(key)

def fmt(x):
    return "-" if x is None else f"{x:.2f}"

def separate_of(case):
    return case.replace("fused_", "separate_") if case.startswith("fused_") else None

ctx = doc["context"]
print(f"host {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs, "
      f"{ctx.get('library_build_type', '?')} libbenchmark, {ctx.get('date', '')}; "
      f"impl {ctx.get('kfuse.impl.xsimd', '?')} / {ctx.get('kfuse.impl.hwy', '?')}, "
      f"huge pages {ctx.get('kfuse.hugepages', '?')}")
print()
print("| case | threads | GB/s (median) | ratio to triad | ratio to separate passes | GB/s (best rep.) |")
print("|---|---|---|---|---|---|")
for case, t in order:
    gbps = med[(case, t)]
    triad = med.get(("triad", t))
    sep_case = separate_of(case)
    sep = med.get((sep_case, t)) if sep_case else None
    nhwc = case.endswith("_nhwc")
    print(f"| {case} | {t} | {gbps:.1f} | {fmt(gbps / triad if triad else None)} | "
          f"{fmt(gbps / sep if sep and not nhwc else None)} | {best.get((case, t), 0):.1f} |")

print()
print("Targets (fused f32: >= 0.9x in-run triad, >= 2.5x the separate passes; "
      "copy = the 1-read + 1-write ceiling with regular stores):")
for case, t in order:
    if not case.startswith("fused_f32") or case.endswith("_nhwc"):
        continue
    gbps = med[(case, t)]
    triad, copy = med.get(("triad", t)), med.get(("copy", t))
    sep = med.get((separate_of(case), t))
    r_t = gbps / triad if triad else float("nan")
    r_s = gbps / sep if sep else float("nan")
    r_c = gbps / copy if copy else float("nan")
    print(f"- {case} {t}T: {r_t:.2f}x triad ({'met' if r_t >= 0.9 else 'NOT met'}), "
          f"{r_s:.2f}x separate ({'met' if r_s >= 2.5 else 'NOT met'}), {r_c:.2f}x copy")
PY

# docs/plots/eltwise.png: GB/s per case, 1 and 2 threads (python3-matplotlib).
/usr/bin/python3 "$root/scripts/plot_bench.py" "$root/docs/plots/eltwise.png" \
  "elementwise chain, 64 Mi floats" "$out" --rate "GB/s" --bars >&2
