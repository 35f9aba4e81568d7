"""Speed against problem size from a Google Benchmark JSON (bench/*_bench --benchmark_out=...):
one line per library, one panel per thread count (and batch, where the benchmark has one).
  plot_bench.py OUT.png TITLE BENCH.json [BENCH.json ...] [--family bare] [--size MFLOP]
                [--rate COUNTER [--x ARG | --bars]]
A benchmark's run name is family/library[/variant]/args...; rows with the size counter are
plotted (medians of repetitions when the run has them) at size / time: GFLOP/s for MFLOP, GB/s
for MB; one thread rated by CPU time, more by wall time, as scripts/bench_conv.sh does. Families
with a layer argument (conv_bench's ResNet-50 layers) are plotted per layer, in the benchmark's
order, since several layers share a size. With --rate, --x names the run argument on the x axis
(attention's sequence length); --bars draws one bar per run name instead (one problem size)."""
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
ap.add_argument("--family", default="", help="only run names starting with FAMILY/")
ap.add_argument("--size", default="MFLOP", help="counter of work per call (x axis)")
ap.add_argument("--rate", default="", help="plot this rate counter as it is (e.g. GFLOPs)")
ap.add_argument("--args", default="layer,batch,threads",
                help="names of the numeric run-name arguments, in order (_: not plotted)")
ap.add_argument("--x", default="", help="with --rate: the run argument on the x axis")
ap.add_argument("--bars", action="store_true", help="with --rate: one bar per run name")
ap.add_argument("--scale", type=float, default=1.0,
                help="with --rate: multiply the counter (1e-9: a bytes/s counter in GB/s)")
a = ap.parse_args()
arg_names = a.args.split(",")
NAMED = {"N": "batch", "T": "threads", "L": "layer"}


def rows(path):
    data = json.load(open(path))["benchmarks"]
    has_median = any(b.get("aggregate_name") == "median" for b in data)
    for b in data:
        if has_median and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        if (a.rate or a.size) not in b or (a.family and not name.startswith(a.family + "/")):
            continue
        parts = [p for p in name.split("/") if not p.startswith(("real_time", "min_time"))]
        args = {}
        while parts and ":" in parts[-1]:  # named arguments, e.g. N:1/T:2/L:3
            k, v = parts.pop().split(":", 1)
            args[NAMED.get(k, k)] = int(v)
        nums = []
        while parts and parts[-1].lstrip("-").isdigit():
            nums.insert(0, int(parts.pop()))
        args.update(zip(arg_names[-len(nums):] if nums else [], nums))
        args.pop("_", None)  # an argument named _ in --args is not plotted
        # family/library[/variant], or family/layer name/library when the layer is an argument
        lib = parts[-1] if "layer" in args and len(parts) > 2 else "/".join(parts[1:]) or parts[0]
        if a.bars:  # one bar per run name: the family and the library
            lib = "/".join(parts)
        if a.rate:
            yield lib, args, 0.0, float(b[a.rate]) * a.scale
            continue
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        t = (b["cpu_time"] if args.get("threads", 1) == 1 else b["real_time"]) * unit
        yield lib, args, float(b[a.size]), float(b[a.size]) * 1e-3 / t


series = defaultdict(dict)  # (panel, lib) -> {layer or size: metric}
by_layer = False
for path in a.json:
    for lib, args, size, metric in rows(path):
        panel = ", ".join(f"{k} {v}" for k, v in args.items() if k not in ("layer", a.x))
        by_layer = by_layer or "layer" in args
        series[(panel, lib)][args.get(a.x or "layer", size)] = metric

panels = sorted({p for p, _ in series})
if not panels:
    raise SystemExit(f"plot_bench.py: no rows with counter {a.size}")
cols = min(len(panels), 2)
nrows = (len(panels) + cols - 1) // cols
fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.6 * nrows), squeeze=False)
for i, panel in enumerate(panels):
    ax = axes[i // cols][i % cols]
    if a.bars:
        libs = sorted(lib for p, lib in series if p == panel)
        vals = [next(iter(series[(panel, lib)].values())) for lib in libs]
        kf = [("kfuse" in lib or lib.startswith("fused")) for lib in libs]  # kfuse's bars in color
        ax.barh(libs, vals, color=["C0" if k else "C7" for k in kf])
        ax.set_title(f"{a.title}: {panel}" if panel else a.title, fontsize=10)
        ax.set_xlabel(a.rate if "/" in a.rate else a.rate + "/s")
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3, axis="x")
        continue
    for (p, lib), pts in sorted(series.items()):
        if p != panel:
            continue
        xs = sorted(pts)
        ax.plot(xs, [pts[x] for x in xs], marker="o", ms=3,
                lw=2.2 if lib.startswith("kfuse") else 1.2, label=lib)
    xs_all = sorted({x for (p, _), pts in series.items() if p == panel for x in pts})
    if by_layer:
        ax.set_xticks(xs_all)
    elif a.x:  # a run argument such as a sequence length: log 2, its values as ticks
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs_all, [str(x) for x in xs_all])
    else:
        ax.set_xscale("log")
    ax.set_title(f"{a.title}: {panel}" if panel else a.title, fontsize=10)
    ax.set_xlabel(a.x or ("layer (the benchmark's order)" if by_layer else a.size + " per call"))
    rate_label = a.rate if "/" in a.rate else a.rate + "/s"  # Google Benchmark rates: per second
    ax.set_ylabel(rate_label if a.rate else
                  {"MFLOP": "GFLOP/s", "MB": "GB/s"}.get(a.size, a.size + " / ms"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
for j in range(len(panels), nrows * cols):
    axes[j // cols][j % cols].axis("off")
fig.tight_layout()
fig.savefig(a.out, dpi=110)
print(f"wrote {a.out}")
