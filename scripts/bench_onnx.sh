#!/usr/bin/env bash
# Real CNNs, kfuse-run against ONNX Runtime in the same run: MobileNetV3-small
# and -large, EfficientNet-B0, ResNet-18, a MobileNetV3-small at 1x3x48x192 (a text-line
# classifier) and the small U-Net (made by scripts/make_real_models.py: torchvision, random
# weights, fixed seed), batch 1 and 8, 1 and 2 threads. kfuse runs f32 plans in NCHW and in NHWC
# (--layout), a bf16 plan and an int8 plan (calibrated on its input, top-1 agreement with its own
# f32 plan from --compare-fp32) in NHWC; ONNX Runtime (npm onnxruntime-node via
# bench/ort/ort_run.js, intraOpNumThreads = the same count) runs f32 on the same shape. Prints
# the CPU, kfuse's probed limits, ONNX Runtime's per-call overhead from node, and a markdown
# table of medians with the ratios next to the targets (fp32 <= 0.8x ONNX Runtime's time,
# bf16 <= 0.5x, int8 <= 0.35x). kfuse-run's default --split auto runs batch 8 on 2 threads as two
# one-thread parts of batch 4 where that is faster ("(split)" in the cell; the parts' compile
# time is added to the last column), and plots the ratios in docs/plots/cnn.png (python3-matplotlib).
#   scripts/bench_onnx.sh [model ...]
# Needs the peers (scripts/setup.sh --peers). Serialized with flock on /tmp/kfuse_bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh
kfuse_bench_kfuse_run
models=("$@")
[[ ${#models[@]} -gt 0 ]] ||
  models=(mobilenet_v3_small mobilenet_v3_large efficientnet_b0 resnet18 mobilenet_v3_textline unet_small)
/usr/bin/python3 scripts/make_real_models.py "$build/models" "${models[@]}" >/dev/null 2>&1
/usr/bin/python3 scripts/make_models.py "$build/models" >/dev/null 2>&1  # tiny.onnx
out=$build/onnx-results
mkdir -p "$out"
rm -f "$out"/*.txt
(
  flock 9
  node bench/ort/ort_run.js "$build/models/tiny.onnx" --shape x=1,1 --threads 1 --reps 2000 \
    --warmup 100 >"$out/ort_tiny.txt"
  "$run" "$build/models/tiny.onnx" --shape x=1,1 --reps 3 --profile >"$out/limits.txt" 2>&1 || true
  for m in "${models[@]}"; do
    shape=$(/usr/bin/python3 -c "import numpy; print(','.join(map(str, numpy.load('$build/models/$m.input.npy').shape[1:])))")
    for b in 1 8; do
      for t in 1 2; do
        reps=$([[ $b == 8 && $m =~ resnet18|efficientnet|large ]] && echo 12 || echo 40)
        for l in nchw nhwc; do
          "$run" "$build/models/$m.onnx" --dim batch=$b --threads $t --layout $l --reps $reps \
            --warmup 5 >"$out/kfuse_${m}_b${b}_t${t}_$l.txt" 2>&1 || true
        done
        for p in bf16 int8; do
          "$run" "$build/models/$m.onnx" --dim batch=$b --threads $t --layout nhwc --prec $p \
            --reps $reps --warmup 3 --compare-fp32 >"$out/kfuse_${m}_b${b}_t${t}_$p.txt" 2>&1 || true
        done
        node bench/ort/ort_run.js "$build/models/$m.onnx" --shape "x=$b,$shape" --threads $t \
          --reps $reps --warmup 5 >"$out/ort_${m}_b${b}_t${t}.txt" 2>&1 || true
      done
    done
  done
) 9>/tmp/kfuse_bench.lock
/usr/bin/python3 - "$out" "${models[@]}" <<'PY'
import os
import re
import sys
sys.path.insert(0, "scripts")
from bench_report import field, header, median, ratio_plot
out, models = sys.argv[1], sys.argv[2:]
header(out)
lim = re.search(r"limits \(\w+\): (.*)", open(f"{out}/limits.txt").read())
print(f"kfuse probed limits: {lim.group(1) if lim else '?'}\n")
print("| model | batch | threads | kfuse f32 NCHW | kfuse f32 NHWC | ONNX Runtime f32 | f32 / ORT (target <= 0.8) | kfuse bf16 | bf16 / ORT (<= 0.5) | kfuse int8 | int8 / ORT (<= 0.35) | int8 top-1 vs f32 | load + compile |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
notes = []
labels, bars = [], {"f32": [], "bf16": [], "int8": []}
def cell(v, log=None):
    # "(split)": kfuse-run ran the batch as one-thread parts at once (--split auto took it).
    if v is None:
        return "fails"
    split = log is not None and os.path.exists(log) and "split: on" in open(log).read()
    return f"{v:.3f} ms" + (" (split)" if split else "")
def ratio(k, o, target):
    if k is None or o is None:
        return "-"
    return f"{k / o:.2f} ({'met' if k / o <= target else 'no'})"
for m in models:
    for b in (1, 8):
        for t in (1, 2):
            base = f"{out}/kfuse_{m}_b{b}_t{t}"
            kn, en = median(f"{base}_nchw.txt")
            kh, eh = median(f"{base}_nhwc.txt")
            kb, eb = median(f"{base}_bf16.txt")
            k8, e8 = median(f"{base}_int8.txt")
            o, eo = median(f"{out}/ort_{m}_b{b}_t{t}.txt")
            best = min([x for x in (kn, kh) if x is not None], default=None)
            t8 = open(f"{base}_int8.txt").read() if k8 is not None else ""
            top1 = re.search(r"top-1 (\d+/\d+)", t8)
            f32_int8 = "int8:" in t8 and "no int8 dot product" in t8
            int8_cell = "f32 (no int8 dot)" if f32_int8 else cell(k8, f"{base}_int8.txt")
            int8_ratio = "n/a" if f32_int8 else ratio(k8, o, 0.35)
            f = f"{base}_nhwc.txt"
            lc = f"{field(f, 'load'):.0f} + {field(f, 'compile'):.0f} ms" if field(f, "load") is not None else "-"
            sc = field(f, "split compile") if os.path.exists(f) and "split: on" in open(f).read() else None
            lc += f" (+ {sc:.0f} split)" if sc is not None else ""
            labels.append(f"{m} b{b} t{t}")
            for name, k in (("f32", best), ("bf16", kb), ("int8", None if f32_int8 else k8)):
                bars[name].append(k / o if k is not None and o is not None else None)
            print(f"| {m} | {b} | {t} | {cell(kn, f'{base}_nchw.txt')} | {cell(kh, f)} | {cell(o)} | {ratio(best, o, 0.8)} | "
                  f"{cell(kb, f'{base}_bf16.txt')} | {ratio(kb, o, 0.5)} | {int8_cell} | {int8_ratio} | "
                  f"{top1.group(1) if top1 else '-'} | {lc} |")
            for e in (en, eh, eb, e8, eo):
                if e and e not in notes: notes.append(e)
for n in notes:
    print(f"\n{n}")
ratio_plot("docs/plots/cnn.png", "CNNs, kfuse-run vs ONNX Runtime f32", labels, bars,
           {"f32": 0.8, "bf16": 0.5, "int8": 0.35},
           "kfuse time / ONNX Runtime f32 time (lower is better; dashed: each precision's target)")
PY
