#!/usr/bin/env python3
"""The LLM benchmark's table (scripts/bench_llm.sh): medians of the alternated rounds of
llama-bench and kfuse-generate --bench, ratios next to the targets, bandwidth bounds."""
import os
import re
import statistics
import subprocess
import sys

out, models_dir, models = sys.argv[1], sys.argv[2], sys.argv[3:]


def rows(path):
    """{test: [t/s, ...]} of llama-bench markdown lines."""
    found = {}
    if not os.path.exists(path):
        return found
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"(pp|tg)\d+", cells[-2]):
            found.setdefault(cells[-2], []).append(float(cells[-1].split()[0]))
    return found


def numbers(path):
    return [float(x) for x in open(path).read().split()] if os.path.exists(path) else []


def bandwidth(threads):
    text = open(os.path.join(out, f"bandwidth_{threads}.txt")).read()
    return float(re.search(r"([0-9.]+) GB/s", text).group(1))


cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
isa = "AVX-512 VNNI" if "avx512_vnni" in flags else "AVX2" if "avx2" in flags else "SSE"
import datetime
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
print(f"## {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {cpu}, code of {commit}\n")
print(f"CPU: {cpu} ({isa}), {os.cpu_count()} logical CPUs. Probed read bandwidth: "
      f"{bandwidth(1):.1f} GB/s (1 thread), {bandwidth(2):.1f} GB/s (2 threads).")
build = open(os.path.join(out, "llama_build.txt")).read().strip() if os.path.exists(os.path.join(out, "llama_build.txt")) else ""
print(f"llama.cpp: node-llama-cpp 3.22.1's tree, native build without AMX (setup.sh). {build}\n")
print("Medians of alternated rounds; t/s = tokens per second. Targets: tg128 >= 1.15x llama.cpp and "
      ">= 85% of the bandwidth bound; pp512 >= 1.0x; load (process wall time to load the model and "
      "decode one token) no slower.\n")
results = []  # the rows again as JSON (llm.json, read by scripts/plot_llm.py)
print("| model | threads | test | llama.cpp t/s | kfuse t/s | ratio | target | met | bound t/s | % of bound |")
print("|---|---:|---|---:|---:|---:|---:|---|---:|---:|")
for m in models:
    size = os.path.getsize(os.path.join(models_dir, m + ".gguf"))
    for t in (1, 2):
        ll = rows(os.path.join(out, f"llama_{m}_{t}.txt"))
        kf = rows(os.path.join(out, f"kfuse_{m}_{t}.txt"))
        for test in ("pp512", "tg128"):
            if test not in ll or test not in kf:
                continue
            a, b = statistics.median(ll[test]), statistics.median(kf[test])
            target = 1.15 if test.startswith("tg") else 1.0
            bound = pct = ""
            ok = b / a >= target
            if test.startswith("tg"):
                bpt = float(open(os.path.join(out, f"kfuse_{m}_{t}.txt")).read().split("bytes/token: ")[1].split()[0]) \
                    if "bytes/token: " in open(os.path.join(out, f"kfuse_{m}_{t}.txt")).read() else size
                bnd = bandwidth(t) * 1e9 / bpt
                bound, pct = f"{bnd:.1f}", f"{100 * b / bnd:.0f}%"
                ok = ok and b / bnd >= 0.85
            print(f"| {m} | {t} | {test} | {a:.1f} | {b:.1f} | {b / a:.2f}x | {target:.2f}x | {'yes' if ok else 'no'} | {bound} | {pct} |")
            results.append({"model": m, "threads": t, "test": test, "llama.cpp": a, "kfuse": b,
                            "bound": float(bound) if bound else None})
            fast = rows(os.path.join(out, f"kfuse_fast_{m}_{t}.txt"))
            if test == "pp512" and "pp512" in fast:
                f = statistics.median(fast["pp512"])
                print(f"| {m} | {t} | pp512 --fast-prefill | {a:.1f} | {f:.1f} | {f / a:.2f}x | 1.00x | {'yes' if f >= a else 'no'} | | |")
                results.append({"model": m, "threads": t, "test": "pp512 --fast-prefill",
                                "llama.cpp": a, "kfuse": f, "bound": None})
        la, ka = numbers(os.path.join(out, f"llama_load_{m}_{t}.txt")), numbers(os.path.join(out, f"kfuse_load_{m}_{t}.txt"))
        if la and ka:
            a, b = statistics.median(la), statistics.median(ka)
            print(f"| {m} | {t} | load s | {a:.2f} | {b:.2f} | {a / b:.2f}x | 1.00x | {'yes' if b <= a else 'no'} | | |")
            results.append({"model": m, "threads": t, "test": "load s", "llama.cpp": a, "kfuse": b,
                            "bound": None})
import json
json.dump({"cpu": cpu, "commit": commit, "rows": results}, open(os.path.join(out, "llm.json"), "w"), indent=1)
