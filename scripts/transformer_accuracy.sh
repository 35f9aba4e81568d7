#!/usr/bin/env bash
# The encoders' accuracy on this CPU: the encoders of scripts/make_transformer_models.py at batch 1,
# sequence 128 and 384. fp32: kfuse-run's outputs against ONNX Runtime's (npm
# onnxruntime-node, the golden outputs), max |kfuse - ORT| over the output's max |ORT| (target
# <= 1e-4); bf16 and int8 plans (int8 calibrated on the same input): `kfuse-run --compare-fp32`,
# the cosine of each output against kfuse's own f32 plan (targets: pooled >= 0.999 bf16, >= 0.99
# int8). The plans run on this CPU's instructions (vdpbf16ps, vpdpbusd where it has them).
#   scripts/transformer_accuracy.sh [model ...]     (default: minilm_l6 bert_base)
# Needs the peers (scripts/setup.sh --peers).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh
kfuse_bench_kfuse_run
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(minilm_l6 bert_base)
md=$build/models
/usr/bin/python3 scripts/make_transformer_models.py "$md" "${models[@]}" >/dev/null 2>&1
out=$build/transformer-accuracy
rm -rf "$out"
mkdir -p "$out"
for m in "${models[@]}"; do
  for s in 128 384; do
    in="$md/$m.s$s.b1"
    args=(--input "input_ids=$in.input_ids.npy" --input "attention_mask=$in.attention_mask.npy")
    d=$out/${m}_s$s
    mkdir -p "$d/ort" "$d/f32"
    node bench/ort/ort_run.js "$md/$m.onnx" "${args[@]}" --threads 2 --reps 1 --warmup 0 \
      --output-dir "$d/ort" >/dev/null
    "$run" "$md/$m.onnx" --dim sequence=$s "${args[@]}" --threads 2 --reps 1 --warmup 0 \
      --output-dir "$d/f32" >/dev/null
    for p in bf16 int8; do
      "$run" "$md/$m.onnx" --dim sequence=$s "${args[@]}" --threads 2 --reps 1 --warmup 0 \
        --prec $p --compare-fp32 >"$d/$p.txt" 2>&1
    done
  done
done
lscpu | grep -m1 "Model name" || true
/usr/bin/python3 - "$out" "${models[@]}" <<'PY'
import re, sys
import numpy as np
out, models = sys.argv[1], sys.argv[2:]
print("| model | seq | output | fp32: max abs diff / max abs (ORT) (target <= 1e-4) | bf16 cosine | int8 cosine |")
print("|---|---|---|---|---|---|")
for m in models:
    for s in (128, 384):
        d = f"{out}/{m}_s{s}"
        cos = {}
        for p in ("bf16", "int8"):
            for name, c in re.findall(r"^\s+(\S+): max abs .* cosine ([0-9.]+)", open(f"{d}/{p}.txt").read(), re.M):
                cos[(p, name)] = c
        for name in ("hidden", "pooled"):
            ref = np.load(f"{d}/ort/{name}.npy").astype(np.float64)
            got = np.load(f"{d}/f32/{name}.npy").astype(np.float64)
            rel = np.abs(got - ref).max() / np.abs(ref).max()
            print(f"| {m} | {s} | {name} | {rel:.1e} ({'met' if rel <= 1e-4 else 'not met'}) | "
                  f"{cos.get(('bf16', name), '-')} | {cos.get(('int8', name), '-')} |")
PY
