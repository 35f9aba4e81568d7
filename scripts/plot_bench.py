"""Speed against problem size from a Google Benchmark JSON (bench/*_bench --benchmark_out=...):
one line per library, one panel per thread count (and batch, where the benchmark has one).
  plot_bench.py OUT.png TITLE BENCH.json [BENCH.json ...] [--metric GFLOPs] [--size MFLOP]
A benchmark's run name is family/library[/variant]/args...; rows with the metric counter and the
size counter are plotted (medians of repetitions when the run has them). Families with one
problem size per layer (conv_bench's ResNet-50 layers) become points sorted by size."""
import argparse
import json
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("title")
ap.add_argument("json", nargs="+")
ap.add_argument("--metric", default="GFLOPs", help="counter on the y axis")
ap.add_argument("--size", default="MFLOP", help="counter on the x axis (the problem size)")
ap.add_argument("--args", default="layer,batch,threads",
                help="names of the numeric run-name arguments, in order")
a = ap.parse_args()
arg_names = a.args.split(",")


def rows(path):
    data = json.load(open(path))["benchmarks"]
    has_median = any(b.get("aggregate_name") == "median" for b in data)
    for b in data:
        if has_median and b.get("aggregate_name") != "median":
            continue
        if a.metric not in b or a.size not in b:
            continue
        name = b.get("run_name", b["name"])
        parts = [p for p in name.split("/") if not p.startswith(("real_time", "min_time"))]
        nums = []
        while parts and parts[-1].lstrip("-").isdigit():
            nums.insert(0, int(parts.pop()))
        args = dict(zip(arg_names[-len(nums):] if nums else [], nums))
        lib = "/".join(parts[1:]) if len(parts) > 1 else parts[0]
        yield lib, args, float(b[a.size]), float(b[a.metric])


series = defaultdict(dict)  # (panel, lib) -> {size: metric}
for path in a.json:
    for lib, args, size, metric in rows(path):
        panel = ", ".join(f"{k} {v}" for k, v in args.items() if k != "layer")
        series[(panel, lib)][size] = metric

panels = sorted({p for p, _ in series})
if not panels:
    raise SystemExit(f"plot_bench.py: no rows with counters {a.metric} and {a.size}")
cols = min(len(panels), 2)
nrows = (len(panels) + cols - 1) // cols
fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.6 * nrows), squeeze=False)
for i, panel in enumerate(panels):
    ax = axes[i // cols][i % cols]
    for (p, lib), pts in sorted(series.items()):
        if p != panel:
            continue
        xs = sorted(pts)
        ax.plot(xs, [pts[x] for x in xs], marker="o", ms=3,
                lw=2.2 if lib.startswith("kfuse") else 1.2, label=lib)
    ax.set_xscale("log")
    ax.set_title(f"{a.title}: {panel}" if panel else a.title, fontsize=10)
    ax.set_xlabel(a.size + " per call")
    ax.set_ylabel(a.metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
for j in range(len(panels), nrows * cols):
    axes[j // cols][j % cols].axis("off")
fig.tight_layout()
fig.savefig(a.out, dpi=110)
print(f"wrote {a.out}")
