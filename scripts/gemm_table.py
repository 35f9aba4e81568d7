"""Turns the GEMM benchmark JSON (kfuse, peers, peak probes) into the markdown table of docs/performance.md."""
import json
import sys
from collections import defaultdict

med = {}       # (recipe, variant, lib, shape, threads) -> median GFLOP/s
lo_hi = defaultdict(list)
labels = {}
peak = {}
for path in sys.argv[1:]:
    for b in json.load(open(path))["benchmarks"]:
        name = b["run_name"] if "run_name" in b else b["name"]
        parts = name.replace("/real_time", "").replace("/min_time:0.200", "").split("/")
        agg = b.get("aggregate_name", "")
        g = b.get("GFLOPs", 0) / 1e9 if b.get("GFLOPs", 0) > 1e6 else b.get("GFLOPs", 0)
        if parts[0] == "peak":
            if agg == "median":
                peak[(parts[1], int(parts[2]))] = g
            continue
        recipe, variant, lib = parts[0], parts[1], parts[2]
        m, n, k, t = map(int, parts[3:7])
        key = (recipe, variant, lib, (m, n, k), t)
        if agg == "median":
            med[key] = g
            if b.get("label"):
                labels[key] = b["label"]
        elif agg in ("min", "max") or agg == "":
            lo_hi[key].append(g)

def fmt(x):
    return "-" if x is None else f"{x:.1f}"

def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}x"

print("Peaks measured in this run (GFLOP/s, median):",
      ", ".join(f"{r} {t}T {v:.0f}" for (r, t), v in sorted(peak.items())))
print()
print("| recipe | epilogue | M,N,K | thr | kfuse GFLOP/s | % peak | oneDNN | kfuse/oneDNN | OpenBLAS-SKX | kfuse/OpenBLAS | Eigen | fused cost | micro-kernel |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(k for k in med if k[2] == "kfuse"):
    recipe, variant, _, shape, t = key
    g = med[key]
    pk = peak.get(({"f32": "fp32"}.get(recipe, recipe), t))
    one = med.get((recipe, variant, "onednn", shape, t))
    ob = med.get((recipe, variant, "openblas", shape, t))
    eg = med.get((recipe, variant, "eigen", shape, t))
    bare = med.get((recipe, "bare", "kfuse", shape, t))
    cost = "-" if variant == "bare" or not bare else f"{(bare / g - 1) * 100:+.1f}%"
    print(f"| {recipe} | {variant} | {shape[0]},{shape[1]},{shape[2]} | {t} | {fmt(g)} | "
          f"{'-' if not pk else f'{100 * g / pk:.0f}%'} | {fmt(one)} | {ratio(g, one)} | {fmt(ob)} | "
          f"{ratio(g, ob)} | {fmt(eg)} | {cost} | {labels.get(key, '')} |")
