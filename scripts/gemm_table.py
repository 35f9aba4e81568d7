"""Turns the GEMM benchmark JSON (kfuse, peers, peak probes) into the markdown tables of
docs/benchmarks/gemm.md: medians, the min-max range of the repetitions, the target per row and
whether it is met (a ratio >= 0.97 counts as met when the min-max ranges of the two overlap)."""
import json
import sys
from collections import defaultdict

med = {}                   # (recipe, variant, lib, shape, threads) -> median GFLOP/s
reps = defaultdict(list)   # same key -> GFLOP/s of each repetition
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
        elif b.get("run_type", "iteration") == "iteration":
            reps[key].append(g)

def fmt(x):
    return "-" if x is None else f"{x:.1f}"

def rng(key):
    r = reps.get(key)
    return f"{min(r):.0f}-{max(r):.0f}" if r else "-"

def overlap(a, b):
    ra, rb = reps.get(a), reps.get(b)
    return bool(ra and rb and max(ra) >= min(rb))

def verdict(ratio, a, b, target=1.0):
    if ratio is None:
        return "-"
    if ratio >= target:
        return "met"
    if ratio >= 0.97 * target and overlap(a, b):
        return "met (ranges overlap)"
    return f"**not met** ({(ratio / target - 1) * 100:+.0f}%)"

print("Peaks measured in this run (GFLOP/s or GOP/s per probe, median):",
      ", ".join(f"{r} {t}T {v:.0f}" for (r, t), v in sorted(peak.items())))
print()
print("| recipe | epilogue | M,N,K | thr | kfuse GFLOP/s (min-max) | % peak | oneDNN (min-max) | "
      "kfuse/oneDNN | target >= 1.0x oneDNN | fused cost (target <= 3%) | OpenBLAS-SKX | "
      "kfuse/OpenBLAS | Eigen | micro-kernel |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(k for k in med if k[2] == "kfuse"):
    recipe, variant, _, shape, t = key
    g = med[key]
    pk = peak.get(({"f32": "fp32"}.get(recipe, recipe), t))
    okey = (recipe, variant, "onednn", shape, t)
    one = med.get(okey)
    ob = med.get((recipe, variant, "openblas", shape, t))
    eg = med.get((recipe, variant, "eigen", shape, t))
    bkey = (recipe, "bare", "kfuse", shape, t)
    bare = med.get(bkey)
    if variant == "bare" or not bare:
        cost = "-"
    else:
        c = (bare / g - 1) * 100
        ok = "met" if c <= 3 else "**not met**" + (" (bare and fused ranges overlap)"
                                                  if overlap(key, bkey) else "")
        cost = f"{c:+.1f}% {ok}"
    r = g / one if one else None
    print(f"| {recipe} | {variant} | {shape[0]},{shape[1]},{shape[2]} | {t} | {fmt(g)} ({rng(key)}) | "
          f"{'-' if not pk else f'{100 * g / pk:.0f}%'} | {fmt(one)} ({rng(okey)}) | "
          f"{'-' if r is None else f'{r:.2f}x'} | {verdict(r, key, okey)} | {cost} | {fmt(ob)} | "
          f"{'-' if not ob else f'{g / ob:.2f}x'} | {fmt(eg)} | {labels.get(key, '')} |")

# M = 1: bf16 / int8 weights against kfuse's own fp32 (targets 1.8x / 3.5x faster).
print()
print("| M = 1 (1x4096x4096) | thr | time vs kfuse fp32 | target | verdict |")
print("|---|---|---|---|---|")
for recipe, target in (("bf16", 1.8), ("int8", 3.5)):
    for t in (1, 2):
        f = med.get(("f32", "bare", "kfuse", (1, 4096, 4096), t))
        q = med.get((recipe, "bare", "kfuse", (1, 4096, 4096), t))
        if f and q:
            s = q / f
            v = "met" if s >= target else f"**not met** ({(s / target - 1) * 100:+.0f}%)"
            print(f"| {recipe} weights | {t} | {s:.2f}x faster | >= {target}x | {v} |")
