#!/usr/bin/env bash
# Transformer encoders, kfuse-run against ONNX Runtime in the same run: the
# MiniLM-L6- and BERT-base-shaped encoders of scripts/make_transformer_models.py (random weights,
# fixed seed), int64 token ids and a padding mask from .npy files, sequence 128 and 384, batch 1
# and 8, 1 and 2 threads; kfuse in fp32, bf16 and int8 (calibrated on the run's own input: the
# linears in int8, attention in f32), ONNX Runtime (npm onnxruntime-node via
# bench/ort/ort_run.js, intraOpNumThreads = the same count) in fp32 on the same inputs. Prints the
# CPU, ONNX Runtime's per-call overhead from node, and a markdown table of medians with the
# ratios next to the targets (fp32 <= 0.9x ONNX Runtime's time, bf16 <= 0.5x, int8 <= 0.4x), and
# plots the ratios in docs/plots/transformers.png (python3-matplotlib).
#   scripts/bench_transformers.sh [model ...]        (default: bert_layer minilm_l6 bert_base)
# bert_layer is one BERT-base encoder layer.
# BERT-base's batch-8 sequence-384 rows take 3 repetitions (one call is seconds on one core).
# Needs the peers (scripts/setup.sh --peers). Serialized with flock on /tmp/kfuse_bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh
kfuse_bench_kfuse_run
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(bert_layer minilm_l6 bert_base)
md=$build/models
/usr/bin/python3 scripts/make_transformer_models.py "$md" "${models[@]}" >/dev/null 2>&1
/usr/bin/python3 scripts/make_models.py "$md" >/dev/null 2>&1  # tiny.onnx
out=$build/transformer-results
mkdir -p "$out"
rm -f "$out"/*.txt
(
  flock 9
  node bench/ort/ort_run.js "$md/tiny.onnx" --shape x=1,1 --threads 1 --reps 2000 \
    --warmup 100 >"$out/ort_tiny.txt"
  for m in "${models[@]}"; do
    for s in 128 384; do
      for b in 1 8; do
        in="$md/$m.s$s.b$b"
        reps=$([[ $b == 8 || $s == 384 || $m == bert_base ]] && echo 7 || echo 30)
        warm=3
        [[ $m == bert_base && $s == 384 && $b == 8 ]] && reps=3 warm=1
        for t in 1 2; do
          for p in f32 bf16 int8; do
            "$run" "$md/$m.onnx" --dim batch=$b --dim sequence=$s --input "input_ids=$in.input_ids.npy" \
              --input "attention_mask=$in.attention_mask.npy" --prec $p --threads $t --reps $reps \
              --warmup $warm >"$out/kfuse_${m}_s${s}_b${b}_t${t}_$p.txt" 2>&1 || true
          done
          node bench/ort/ort_run.js "$md/$m.onnx" --input "input_ids=$in.input_ids.npy" \
            --input "attention_mask=$in.attention_mask.npy" --threads $t --reps $reps --warmup $warm \
            >"$out/ort_${m}_s${s}_b${b}_t${t}.txt" 2>&1 || true
        done
      done
    done
  done
) 9>/tmp/kfuse_bench.lock
/usr/bin/python3 - "$out" "${models[@]}" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_report import field, header, median, ratio_plot
out, models = sys.argv[1], sys.argv[2:]
header(out)
print("| model | seq | batch | threads | kfuse f32 | kfuse bf16 | kfuse int8 | ONNX Runtime f32 | f32 / ORT (target <= 0.9) | bf16 / ORT (target <= 0.5) | int8 / ORT (target <= 0.4) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
notes = []
labels, bars = [], {"f32": [], "bf16": [], "int8": []}
for m in models:
    for s in (128, 384):
        for b in (1, 8):
            for t in (1, 2):
                k32, e1 = median(f"{out}/kfuse_{m}_s{s}_b{b}_t{t}_f32.txt")
                k16, e2 = median(f"{out}/kfuse_{m}_s{s}_b{b}_t{t}_bf16.txt")
                k8, e4 = median(f"{out}/kfuse_{m}_s{s}_b{b}_t{t}_int8.txt")
                o, e3 = median(f"{out}/ort_{m}_s{s}_b{b}_t{t}.txt")
                cell = lambda v: f"{v:.2f} ms" if v is not None else "fails"
                def ratio(k, target):
                    if k is None or o is None: return "-"
                    r = k / o
                    return f"{r:.2f} ({'met' if r <= target else 'not met'})"
                labels.append(f"{m} s{s} b{b} t{t}")
                for name, k in (("f32", k32), ("bf16", k16), ("int8", k8)):
                    bars[name].append(k / o if k is not None and o is not None else None)
                print(f"| {m} | {s} | {b} | {t} | {cell(k32)} | {cell(k16)} | {cell(k8)} | {cell(o)} | {ratio(k32, 0.9)} | {ratio(k16, 0.5)} | {ratio(k8, 0.4)} |")
                for e in (e1, e2, e3, e4):
                    if e and e not in notes: notes.append(e)
for n in notes:
    print(f"\n{n}")
ratio_plot("docs/plots/transformers.png", "transformer encoders, kfuse-run vs ONNX Runtime f32", labels,
           bars, {"f32": 0.9, "bf16": 0.5, "int8": 0.4},
           "kfuse time / ONNX Runtime f32 time (lower is better; dashed: each precision's target)")
PY
