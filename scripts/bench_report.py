"""Shared by the benchmark scripts' report steps: the CPU line, the median latency a kfuse-run
or ort_run.js log reports, and ONNX Runtime's per-call overhead from node."""
import os
import re
import subprocess


def cpu_line():
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = re.search(r"Model name:\s*(.*)", lscpu).group(1)
    flags = re.search(r"Flags:\s*(.*)", lscpu).group(1).split()
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16")
           if f in flags]
    return f"CPU: {cpu}, {os.cpu_count()} CPUs ({', '.join(isa)})"


def median(f):
    """(median ms, None) from a log's latency line, or (None, why)."""
    if not os.path.exists(f):
        return None, "missing"
    t = open(f).read()
    m = re.search(r"latency: median ([0-9.]+) ms", t)
    if m:
        return float(m.group(1)), None
    err = [line for line in t.splitlines() if "error" in line]
    return None, (err[0] if err else "no latency line")[:160]


def field(f, key):
    """A `KEY: X ms` figure of a kfuse-run log (load, compile), or None."""
    if not os.path.exists(f):
        return None
    m = re.search(key + r": ([0-9.]+) ms", open(f).read())
    return float(m.group(1)) if m else None


def ort_overhead_line(tiny_log):
    tiny, _ = median(tiny_log)
    return (f"ONNX Runtime per-call overhead from node (x + 1 on one float): {tiny * 1000:.0f} us, "
            "inside every ORT figure\n")


def header(out_dir):
    """The lines above every same-run table: the CPU and ONNX Runtime's per-call overhead."""
    print(cpu_line())
    print(ort_overhead_line(f"{out_dir}/ort_tiny.txt"))


def ratio_plot(path, title, labels, series, targets, xlabel, footer=None):
    """A horizontal bar chart of same-run ratios (kfuse time / peer time): one group of bars per
    label (a model and its setting), one bar per series (name -> one ratio or None per label),
    a vertical line per target (name -> value, colored as its series; black for a name that is
    no series). `footer`: the gray line at the bottom (default: this machine's CPU). Writes PNG
    `path`; prints a note instead when matplotlib is missing (scripts/setup.sh --peers installs
    it)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\n(no plot: python3-matplotlib is missing; {path} not written)")
        return
    names = list(series)
    h = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(8, 1.4 + len(labels) * (0.18 + 0.1 * len(names))))
    colors = {}
    for i, name in enumerate(names):
        ys = [j + (i - (len(names) - 1) / 2) * h for j in range(len(labels))]
        xs = [v if v is not None else 0 for v in series[name]]
        bars = ax.barh(ys, xs, height=h, label=name)
        colors[name] = bars.patches[0].get_facecolor() if bars.patches else "black"
    for name, value in targets.items():
        ax.axvline(value, color=colors.get(name, "black"), linewidth=1, linestyle="--")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    fig.text(0.01, 0.005, footer or cpu_line(), fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"\nplot: {path}")
