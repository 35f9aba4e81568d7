"""docs/plots/gemm.png from the GEMM benchmark's JSON (scripts/bench_gemm.sh): GFLOP/s (GOP/s for
int8) against the problem's operation count, one panel per recipe, one line per library, plain
GEMMs (no epilogue) on one thread and on all threads.
  plot_gemm.py OUT.png gemm.json [openblas.json ...]"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

series = defaultdict(dict)  # (recipe, threads, lib) -> {flops: GFLOP/s median}
for path in sys.argv[2:]:
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        parts = name.replace("/real_time", "").replace("/min_time:0.200", "").split("/")
        if parts[0] == "peak" or len(parts) < 7 or parts[1] != "bare":
            continue
        recipe, lib = parts[0], parts[2]
        m, n, k, t = map(int, parts[3:7])
        g = b.get("GFLOPs", 0)
        g = g / 1e9 if g > 1e6 else g
        series[(recipe, t, lib)][2.0 * m * n * k] = g

recipes = sorted({r for r, _, _ in series})
threads = sorted({t for _, t, _ in series})
if not recipes:
    sys.exit("plot_gemm.py: no plain GEMM medians in the JSON")
fig, axes = plt.subplots(len(threads), len(recipes), figsize=(4.2 * len(recipes), 3.4 * len(threads)),
                         squeeze=False)
for i, t in enumerate(threads):
    for j, r in enumerate(recipes):
        ax = axes[i][j]
        for (rr, tt, lib), pts in sorted(series.items()):
            if rr != r or tt != t or not pts:
                continue
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], marker="o", ms=3,
                    lw=2.2 if lib == "kfuse" else 1.2, label=lib)
        ax.set_xscale("log")
        ax.set_title(f"{r}, {t} thread{'s' if t > 1 else ''}", fontsize=10)
        ax.set_xlabel("operations per call (2 M N K)")
        ax.set_ylabel("GOP/s" if "8" in r else "GFLOP/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[1], dpi=110)
print(f"wrote {sys.argv[1]}")
