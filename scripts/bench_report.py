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
