#!/usr/bin/env bash
# Real ONNX models, kfuse-run against ONNX Runtime in the same run: MobileNetV3-small, ResNet-18,
# a MobileNetV3-small at 1x3x48x192 (a text-line classifier) and the small U-Net (made by
# scripts/make_real_models.py: torchvision, random weights, fixed seed), batch 1 and 8, 1 and 2
# threads, fp32. kfuse runs its plan in NCHW and in NHWC (--layout); ONNX Runtime (npm
# onnxruntime-node via bench/ort/ort_run.js, intraOpNumThreads = the same count) gets the same
# shape. Prints the CPU, ONNX Runtime's per-call overhead from node, and a markdown table of
# medians with the ratio to the target (issue 14: kfuse <= 1.0x ONNX Runtime's time in fp32).
#   scripts/bench_onnx.sh [model ...]
# Needs the peers (scripts/setup.sh --peers). Serialized with flock on /tmp/kfuse_bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh
kfuse_bench_configure -DKFUSE_ONNX=ON
cmake --build "$build" --target kfuse_run -j "${KFUSE_JOBS:-1}"
run=$build/src/tools/kfuse-run
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(mobilenet_v3_small resnet18 mobilenet_v3_textline unet_small)
/usr/bin/python3 scripts/make_real_models.py "$build/models" "${models[@]}" >/dev/null 2>&1
/usr/bin/python3 scripts/make_models.py "$build/models" >/dev/null 2>&1  # tiny.onnx
out=$build/onnx-results
mkdir -p "$out"
rm -f "$out"/*.txt
(
  flock 9
  node bench/ort/ort_run.js "$build/models/tiny.onnx" --shape x=1,1 --threads 1 --reps 2000 \
    --warmup 100 >"$out/ort_tiny.txt"
  for m in "${models[@]}"; do
    shape=$(/usr/bin/python3 -c "import numpy; print(','.join(map(str, numpy.load('$build/models/$m.input.npy').shape[1:])))")
    for b in 1 8; do
      for t in 1 2; do
        reps=$([[ $m == resnet18 && $b == 8 ]] && echo 15 || echo 40)
        for l in nchw nhwc; do
          "$run" "$build/models/$m.onnx" --dim batch=$b --threads $t --layout $l --reps $reps \
            --warmup 5 >"$out/kfuse_${m}_b${b}_t${t}_$l.txt" 2>&1 || true
        done
        node bench/ort/ort_run.js "$build/models/$m.onnx" --shape "x=$b,$shape" --threads $t \
          --reps $reps --warmup 5 >"$out/ort_${m}_b${b}_t${t}.txt" 2>&1 || true
      done
    done
  done
) 9>/tmp/kfuse_bench.lock
/usr/bin/python3 - "$out" "${models[@]}" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_report import field, header, median
out, models = sys.argv[1], sys.argv[2:]
header(out)
print("| model | batch | threads | kfuse NCHW | kfuse NHWC | ONNX Runtime | kfuse best / ORT | target | met | load + compile |")
print("|---|---|---|---|---|---|---|---|---|---|")
notes = []
for m in models:
    for b in (1, 8):
        for t in (1, 2):
            kn, en = median(f"{out}/kfuse_{m}_b{b}_t{t}_nchw.txt")
            kh, eh = median(f"{out}/kfuse_{m}_b{b}_t{t}_nhwc.txt")
            o, eo = median(f"{out}/ort_{m}_b{b}_t{t}.txt")
            best = min([x for x in (kn, kh) if x is not None], default=None)
            ratio = f"{best / o:.2f}" if best and o else "-"
            met = ("yes" if best / o <= 1.0 else "no") if best and o else "-"
            f = f"{out}/kfuse_{m}_b{b}_t{t}_nhwc.txt"
            lc = f"{field(f, 'load'):.0f} + {field(f, 'compile'):.0f} ms" if field(f, "load") is not None else "-"
            cell = lambda v: f"{v:.3f} ms" if v is not None else "fails"
            print(f"| {m} | {b} | {t} | {cell(kn)} | {cell(kh)} | {cell(o)} | {ratio} | <= 1.0 | {met} | {lc} |")
            for e in (en, eh, eo):
                if e and e not in notes: notes.append(e)
for n in notes:
    print(f"\n{n}")
PY
