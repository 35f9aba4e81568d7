#!/usr/bin/env bash
# The zoo in int8: kfuse against ONNX Runtime's own int8 kernels on the same quantization, in
# the same run. Per model of scripts/make_zoo_models.py:
#   export    kfuse-run --prec int8 --calib (16 random samples, seed 1) --export-qdq: the model in
#             QDQ form with kfuse's calibration and int8 weights (kfuse::onnx::export_qdq);
#   accuracy  on 8 other random samples (seed 2): ONNX Runtime f32 on the original model (the
#             reference), kfuse int8 and ONNX Runtime int8 on the QDQ file: each one's top-1
#             agreement with f32, its largest error over the f32 output's range, and kfuse's
#             top-1 agreement with ORT int8; kfuse bf16 (--prec bf16) the same way against f32;
#   timing    kfuse-run --prec int8 on the original model and ONNX Runtime on the QDQ file, in
#             alternated rounds (KFUSE_BENCH_ROUNDS, default 3), batch 1 and 8, 1 and 2 threads;
#             replays sized as in bench_zoo.sh (KFUSE_ZOO_ROUND_MS, default 2500).
# Writes $build/zoo-int8-results/zoo_int8.json and prints the table (scripts/zoo_table.py --int8
# turns it into docs/benchmarks/zoo_int8.md). Target: kfuse int8 / ORT int8 geometric mean
# <= 0.8 on 1 and on 2 threads.
#   scripts/bench_zoo_int8.sh [--quick] [name ...]   (default: the CNNs of the zoo)
# --quick: batch 1 on 1 thread, 2 rounds. KFUSE_RUN=/path/to/kfuse-run as in bench_zoo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [[ ${1:-} == --quick ]]; then
  quick=1
  shift
fi
source scripts/bench_common.sh
mapfile -t zoo < <(/usr/bin/python3 scripts/make_zoo_models.py --list)
models=("$@")
if ((${#models[@]} == 0)); then  # the transformers' int8 has its own benchmark
  for m in "${zoo[@]}"; do [[ $m == vit_* || $m == swin_* ]] || models+=("$m"); done
fi
for m in "${models[@]}"; do
  printf '%s\n' "${zoo[@]}" | grep -qxF -- "$m" || { echo "unknown model $m; the zoo: ${zoo[*]}" >&2; exit 2; }
done
node -e "require('onnxruntime-node')" >/dev/null 2>&1 ||
  { echo "onnxruntime-node in $ort_dir does not load in node: scripts/setup.sh --peers" >&2; exit 2; }
if [[ -n ${KFUSE_RUN:-} ]]; then
  run=$KFUSE_RUN
else
  kfuse_bench_kfuse_run
fi
md=$build/zoo-models
out=$build/zoo-int8-results
rounds=${KFUSE_BENCH_ROUNDS:-3} round_ms=${KFUSE_ZOO_ROUND_MS:-2500} max_reps=40
batches=(1 8) threads=(1 2)
((quick)) && rounds=2 round_ms=1000 max_reps=10 batches=(1) threads=(1)
/usr/bin/python3 scripts/make_zoo_models.py "$md" "${models[@]}" ||
  echo "bench_zoo_int8: some models did not export (the lines above)" >&2
/usr/bin/python3 scripts/make_models.py "$build/models" >/dev/null 2>&1  # tiny.onnx
rm -rf "$out"
mkdir -p "$out"
ort_run=bench/ort/ort_run.js

(
  flock 9
  nice node "$ort_run" "$build/models/tiny.onnx" --shape x=1,1 --threads 1 --reps 2000 \
    --warmup 100 >"$out/ort_tiny.txt"
  for m in "${models[@]}"; do
    [[ -f $md/$m.onnx ]] || continue
    d=$out/$m
    mkdir -p "$d/calib" "$d/k8" "$d/kb16" "$d/o8" "$d/o32"
    chw=$(/usr/bin/python3 - "$md/$m.input.npy" "$d" <<'PY'
import sys, numpy as np
x = np.load(sys.argv[1])
np.save(f"{sys.argv[2]}/calib/x.npy", np.random.default_rng(1).standard_normal((16,) + x.shape[1:]).astype(np.float32))
np.save(f"{sys.argv[2]}/eval.npy", np.random.default_rng(2).standard_normal((8,) + x.shape[1:]).astype(np.float32))
print(",".join(map(str, x.shape[1:])))
PY
)
    nice "$run" "$md/$m.onnx" --dim batch=8 --prec int8 --calib "$d/calib" --export-qdq "$d/qdq.onnx" \
      --input "x=$d/eval.npy" --output-dir "$d/k8" --threads 1 --reps 1 --warmup 1 >"$out/export_$m.txt" 2>&1 || true
    [[ -f $d/qdq.onnx ]] || continue
    nice "$run" "$md/$m.onnx" --dim batch=8 --prec bf16 --input "x=$d/eval.npy" --output-dir "$d/kb16" \
      --threads 1 --reps 1 --warmup 1 >"$out/bf16_$m.txt" 2>&1 || true
    nice node "$ort_run" "$md/$m.onnx" --input "x=$d/eval.npy" --threads 1 --reps 1 --warmup 1 \
      --output-dir "$d/o32" >"$out/acc_ort32_$m.txt" 2>&1 || true
    nice node "$ort_run" "$d/qdq.onnx" --input "x=$d/eval.npy" --threads 1 --reps 1 --warmup 1 \
      --output-dir "$d/o8" >"$out/acc_ort8_$m.txt" 2>&1 || true
    one=$(printf '%s\n%s\n' "$(ms_of "$out/acc_ort8_$m.txt")" "$(ms_of "$out/export_$m.txt")" | sort -g | tail -1)
    one=$(awk -v v="${one:-0}" 'BEGIN { print v / 8 }')  # those ran batch 8
    for b in "${batches[@]}"; do
      for t in "${threads[@]}"; do
        read -r reps warm < <(round_size "${one:-0}" "$b" "$round_ms" "$max_reps")
        kcmd=(nice "$run" "$md/$m.onnx" --prec int8 --dim "batch=$b" --threads "$t" --reps "$reps" --warmup "$warm")
        ocmd=(nice node "$ort_run" "$d/qdq.onnx" --shape "x=$b,$chw" --threads "$t" --reps "$reps" --warmup "$warm")
        alternated_rounds "$rounds" "$out/kfuse_${m}_b${b}_t${t}" "$out/ort_${m}_b${b}_t${t}"
        echo "$m b$b t$t: kfuse int8 $(ms_of "$out/kfuse_${m}_b${b}_t${t}_r0.txt") ms," \
          "ORT int8 $(ms_of "$out/ort_${m}_b${b}_t${t}_r0.txt") ms (round 0, $reps replays)" >&2
      done
    done
  done
) 9>/tmp/kfuse_bench.lock

ort_version=$(sed -n 's/^ *"version": "\(.*\)",*$/\1/p' "$ort_dir/node_modules/onnxruntime-node/package.json" | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- include src 2>/dev/null || commit+=" (with uncommitted changes under include/ or src/)"
/usr/bin/python3 - "$out" "$rounds" "$ort_version" "$commit" "$quick" "${models[@]}" <<'PY'
import datetime, json, os, re, statistics, sys
import numpy as np
sys.path.insert(0, "scripts")
from bench_report import cpu_line, median
out, rounds, ort_version, commit, quick = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1"
models = sys.argv[6:]
tiny, _ = median(f"{out}/ort_tiny.txt")
doc = {"date": datetime.date.today().isoformat(), "cpu": cpu_line(), "rounds": rounds, "quick": quick,
       "onnxruntime_node": ort_version, "kfuse_commit": commit,
       "ort_overhead_us": round(tiny * 1000) if tiny else None,
       "command": "scripts/bench_zoo_int8.sh" + (" --quick" if quick else "") + " " + " ".join(models), "models": {}}
def tail_error(path):
    if not os.path.exists(path):
        return "missing"
    lines = open(path).read().splitlines()
    err = [l for l in lines if "error" in l.lower()]
    return (err[0] if err else (lines[-1] if lines else "no output"))[:200]
for m in models:
    e = {}
    doc["models"][m] = e
    d = f"{out}/{m}"
    exp = f"{out}/export_{m}.txt"
    line = re.search(r"^export-qdq: .*$", open(exp).read(), re.M) if os.path.exists(exp) else None
    if not line:
        e["error"] = "export: " + tail_error(exp)
        continue
    e["export"] = line.group(0).split(": ", 2)[-1]
    paths = {"f32": f"{d}/o32/y.npy", "kfuse_int8": f"{d}/k8/y.npy", "ort_int8": f"{d}/o8/y.npy"}
    missing = [k for k, p in paths.items() if not os.path.exists(p)]
    if missing:
        e["error"] = "no output of " + ", ".join(missing) + ": " + tail_error(
            exp if missing[0] == "kfuse_int8" else f"{out}/acc_ort{'8' if missing[0] == 'ort_int8' else '32'}_{m}.txt")
    else:
        y = {k: np.load(p).astype(np.float64) for k, p in paths.items()}
        rng = float(y["f32"].max() - y["f32"].min()) or 1.0
        top = {k: v.argmax(-1) for k, v in y.items()}
        n = len(top["f32"])
        e["accuracy"] = {"samples": n,
                         "kfuse_top1_vs_f32": int((top["kfuse_int8"] == top["f32"]).sum()),
                         "ort_top1_vs_f32": int((top["ort_int8"] == top["f32"]).sum()),
                         "kfuse_top1_vs_ort_int8": int((top["kfuse_int8"] == top["ort_int8"]).sum()),
                         "kfuse_err_rel_range": float(np.abs(y["kfuse_int8"] - y["f32"]).max() / rng),
                         "ort_err_rel_range": float(np.abs(y["ort_int8"] - y["f32"]).max() / rng),
                         # random weights give near-ties: top-1 means little when f32's own
                         # top-2 margin is below the int8 error
                         "f32_margin_rel_range": float(np.median([np.diff(np.sort(r)[-2:])[0] for r in y["f32"]]) / rng)}
        if os.path.exists(f"{d}/kb16/y.npy"):
            b16 = np.load(f"{d}/kb16/y.npy").astype(np.float64)
            e["accuracy"].update(bf16_top1_vs_f32=int((b16.argmax(-1) == top["f32"]).sum()),
                                 bf16_err_rel_range=float(np.abs(b16 - y["f32"]).max() / rng))
    cells = {}
    for b in (1, 8):
        for t in (1, 2):
            kl = [f"{out}/kfuse_{m}_b{b}_t{t}_r{r}.txt" for r in range(rounds)]
            ol = [f"{out}/ort_{m}_b{b}_t{t}_r{r}.txt" for r in range(rounds)]
            if not os.path.exists(kl[0]):
                continue
            kv = [x for x in (median(f)[0] for f in kl) if x is not None]
            ov = [x for x in (median(f)[0] for f in ol) if x is not None]
            c = {"kfuse_ms": statistics.median(kv) if kv else None, "ort_ms": statistics.median(ov) if ov else None}
            c["ratio"] = c["kfuse_ms"] / c["ort_ms"] if c["kfuse_ms"] and c["ort_ms"] else None
            if not kv:
                c["kfuse_error"] = median(kl[0])[1]
            if not ov:
                c["ort_error"] = median(ol[0])[1]
            cells[f"b{b}_t{t}"] = c
    e["cells"] = cells
json.dump(doc, open(f"{out}/zoo_int8.json", "w"), indent=1)
print(f"wrote {out}/zoo_int8.json", file=sys.stderr)
PY
/usr/bin/python3 scripts/zoo_table.py --int8 "$out/zoo_int8.json" --stdout
