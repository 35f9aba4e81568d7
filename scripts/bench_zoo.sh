#!/usr/bin/env bash
# The classification zoo against ONNX Runtime in the same run: every architecture family of
# torchvision 0.14 (scripts/make_zoo_models.py: random weights, fixed seed, ONNX opset 17; the
# largest at a reduced resolution, stated in the table). Per model:
#   accuracy  kfuse-run f32 on the model's batch-1 input (--expect against ONNX Runtime's output,
#             from bench/ort/ort_run.js --output-dir): max |kfuse - ORT| over the range of ORT's
#             output (target <= 1e-4), and the top-1 class of both;
#   timing    kfuse-run (f32, its defaults: --layout auto, --split auto) and ONNX Runtime (npm
#             onnxruntime-node, intraOpNumThreads = the same count) in alternated rounds
#             (KFUSE_BENCH_ROUNDS, default 3; the engine that goes first alternates too), batch 1
#             and 8, 1 and 2 threads; each engine's figure is the median of its rounds' medians.
#             Round 0 runs kfuse-run's --layout auto, the later rounds the layout it picked (the
#             trial of both layouts costs more than the timing on the largest models). Replays
#             per round are scaled by the model's batch-1 time so that a round takes about
#             KFUSE_ZOO_ROUND_MS (default 2500) ms of replays (2 to 40 replays).
# Writes raw logs and zoo.json (per model, per cell: kfuse ms, ORT ms, ratio; the accuracy) to
# $build/zoo-results/ and prints the table; scripts/zoo_table.py turns zoo.json into
# docs/benchmarks/zoo.md and docs/plots/zoo.png. Targets (f32): each cell <= 1.0x ONNX Runtime's
# time, the geometric mean per thread count <= 0.75x; accuracy <= 1e-4 of ORT's output range.
#   scripts/bench_zoo.sh [--quick] [--accuracy] [name ...]   (default: the whole zoo,
#                                                             make_zoo_models.py --list)
# --quick: batch 1 on 1 thread only, 2 rounds of at most 10 replays. --accuracy: the accuracy
# step only (minutes for the whole zoo, not hours).
# KFUSE_RUN=/path/to/kfuse-run uses that binary instead of building it in $build (first build of
# kfuse-run: 15-30 minutes on 2 cores). The whole zoo: one to two hours on 2 cores.
# Needs the peers (scripts/setup.sh --peers). Serialized with flock on /tmp/kfuse_bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 timing=1
while [[ ${1:-} == --* ]]; do
  case $1 in
    --quick) quick=1 ;;
    --accuracy) timing=0 ;;
    *) echo "usage: scripts/bench_zoo.sh [--quick] [--accuracy] [name ...]" >&2; exit 2 ;;
  esac
  shift
done
source scripts/bench_common.sh
mapfile -t zoo < <(/usr/bin/python3 scripts/make_zoo_models.py --list)
models=("$@")
((${#models[@]})) || models=("${zoo[@]}")
for m in "${models[@]}"; do
  printf '%s\n' "${zoo[@]}" | grep -qxF -- "$m" || { echo "unknown model $m; the zoo: ${zoo[*]}" >&2; exit 2; }
done
command -v node >/dev/null 2>&1 || { echo "no node on PATH: scripts/setup.sh --peers" >&2; exit 2; }
node -e "require('onnxruntime-node')" >/dev/null 2>&1 ||
  { echo "onnxruntime-node in $ort_dir does not load in node: scripts/setup.sh --peers" >&2; exit 2; }
if [[ -n ${KFUSE_RUN:-} ]]; then
  run=$KFUSE_RUN
  "$run" --help >/dev/null 2>&1 || { echo "KFUSE_RUN=$run does not run" >&2; exit 2; }
else
  kfuse_bench_kfuse_run
fi
md=$build/zoo-models
out=$build/zoo-results
rounds=${KFUSE_BENCH_ROUNDS:-3} round_ms=${KFUSE_ZOO_ROUND_MS:-2500} max_reps=40
batches=(1 8) threads=(1 2)
if ((quick)); then
  rounds=2 round_ms=1000 max_reps=10 batches=(1) threads=(1)
fi
# A model that does not export is skipped with a line on stderr and {"skipped": why} in its json.
/usr/bin/python3 scripts/make_zoo_models.py "$md" "${models[@]}" ||
  echo "bench_zoo: some models did not export (the lines above); their rows say why" >&2
/usr/bin/python3 scripts/make_models.py "$build/models" >/dev/null 2>&1  # tiny.onnx
rm -rf "$out"
mkdir -p "$out"
ort_run=bench/ort/ort_run.js


(
  flock 9
  cut -d' ' -f1-3 /proc/loadavg >"$out/load_start.txt"
  nice node "$ort_run" "$build/models/tiny.onnx" --shape x=1,1 --threads 1 --reps 2000 \
    --warmup 100 >"$out/ort_tiny.txt"
  for m in "${models[@]}"; do
    [[ -f $md/$m.onnx ]] || continue
    in=$md/$m.input.npy
    chw=$(/usr/bin/python3 -c "import numpy; print(','.join(map(str, numpy.load('$in').shape[1:])))")
    # (a) accuracy at batch 1: ONNX Runtime's output is the golden one.
    mkdir -p "$out/$m/ort" "$out/$m/kfuse"
    nice node "$ort_run" "$md/$m.onnx" --input "x=$in" --threads 1 --reps 1 --warmup 1 \
      --output-dir "$out/$m/ort" >"$out/acc_ort_$m.txt" 2>&1 || true
    if [[ -f $out/$m/ort/y.npy ]]; then
      rc=0
      nice "$run" "$md/$m.onnx" --input "x=$in" --expect "y=$out/$m/ort/y.npy" --threads 1 --reps 1 \
        --warmup 1 --output-dir "$out/$m/kfuse" >"$out/acc_kfuse_$m.txt" 2>&1 || rc=$?
    else
      rc=0
      nice "$run" "$md/$m.onnx" --input "x=$in" --threads 1 --reps 1 --warmup 1 \
        --output-dir "$out/$m/kfuse" >"$out/acc_kfuse_$m.txt" 2>&1 || rc=$?
    fi
    echo "$rc" >"$out/acc_kfuse_$m.rc"
    ((timing)) || continue
    # (b) timing. One batch-1 call on one thread, the slower engine's, sizes the replays.
    one=$(printf '%s\n%s\n' "$(ms_of "$out/acc_ort_$m.txt")" "$(ms_of "$out/acc_kfuse_$m.txt")" |
      sort -g | tail -1)
    for b in "${batches[@]}"; do
      for t in "${threads[@]}"; do
        read -r reps warm < <(round_size "${one:-0}" "$b" "$round_ms" "$max_reps")
        kcmd=(nice "$run" "$md/$m.onnx" --dim "batch=$b" --threads "$t" --reps "$reps" --warmup "$warm")
        ocmd=(nice node "$ort_run" "$md/$m.onnx" --shape "x=$b,$chw" --threads "$t" --reps "$reps" --warmup "$warm")
        alternated_rounds "$rounds" "$out/kfuse_${m}_b${b}_t${t}" "$out/ort_${m}_b${b}_t${t}"
        echo "$m b$b t$t: kfuse $(ms_of "$out/kfuse_${m}_b${b}_t${t}_r0.txt") ms," \
          "ORT $(ms_of "$out/ort_${m}_b${b}_t${t}_r0.txt") ms (round 0, $reps replays)" >&2
      done
    done
  done
  cut -d' ' -f1-3 /proc/loadavg >"$out/load_end.txt"
) 9>/tmp/kfuse_bench.lock

ort_version=$(sed -n 's/^ *"version": "\(.*\)",*$/\1/p' "$ort_dir/node_modules/onnxruntime-node/package.json" | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- include src 2>/dev/null || commit+=" (with uncommitted changes under include/ or src/)"
[[ -z ${KFUSE_RUN:-} ]] || commit="KFUSE_RUN=$KFUSE_RUN (its own build; the tree is at $commit)"
/usr/bin/python3 - "$out" "$md" "$quick" "$timing" "$rounds" "$ort_version" "$commit" "${models[@]}" <<'PY'
import datetime
import json
import os
import re
import statistics
import sys
import numpy as np
sys.path.insert(0, "scripts")
from bench_report import cpu_line, median
out, md, quick, timing, rounds, ort_version, commit = (sys.argv[1], sys.argv[2], sys.argv[3] == "1",
                                                       sys.argv[4] == "1", int(sys.argv[5]), sys.argv[6], sys.argv[7])
models = sys.argv[8:]
tiny, _ = median(f"{out}/ort_tiny.txt")
doc = {"date": datetime.date.today().isoformat(), "cpu": cpu_line(), "quick": quick, "timing": timing, "rounds": rounds,
       "onnxruntime_node": ort_version, "kfuse_commit": commit,
       "ort_overhead_us": round(tiny * 1000) if tiny else None,
       "load_average": [open(f"{out}/load_{w}.txt").read().strip() if os.path.exists(f"{out}/load_{w}.txt") else None
                        for w in ("start", "end")],
       "command": "scripts/bench_zoo.sh" + (" --quick" if quick else "") + (" --accuracy" if not timing else "")
                  + " " + " ".join(models),
       "models": {}}
def first_error(path):
    if not os.path.exists(path):
        return "missing"
    lines = open(path).read().splitlines()
    err = [l for l in lines if "error" in l.lower()]
    return (err[0] if err else (lines[-1] if lines else "no output"))[:200]
for m in models:
    meta_path = f"{md}/{m}.json"
    info = json.load(open(meta_path)) if os.path.exists(meta_path) else {"name": m, "skipped": "not exported"}
    entry = {k: info.get(k) for k in ("family", "resolution", "native_resolution", "gmacs", "params_m", "note")}
    doc["models"][m] = entry
    if "skipped" in info:
        entry["skipped"] = "export: " + info["skipped"]
        continue
    acc = {}
    ko, oo = f"{out}/{m}/kfuse/y.npy", f"{out}/{m}/ort/y.npy"
    rc = int(open(f"{out}/acc_kfuse_{m}.rc").read()) if os.path.exists(f"{out}/acc_kfuse_{m}.rc") else None
    if not os.path.exists(oo):
        acc["error"] = "ORT: " + first_error(f"{out}/acc_ort_{m}.txt")
    if not os.path.exists(ko):
        acc["error"] = "kfuse: " + first_error(f"{out}/acc_kfuse_{m}.txt")
    if "error" not in acc:
        k, o = np.load(ko).astype(np.float64), np.load(oo).astype(np.float64)
        rng = float(o.max() - o.min())
        diff = float(np.abs(k - o).max())
        acc.update(max_abs_diff=diff, ort_range=rng, rel_range=diff / rng if rng else None,
                   met=bool(rng and diff / rng <= 1e-4), top1_agree=bool((k.argmax(-1) == o.argmax(-1)).all()))
        t = f"{md}/{m}.torch.npy"
        if os.path.exists(t):  # the export itself, for a mismatch's diagnosis
            pt = np.load(t).astype(np.float64)
            acc["ort_vs_torch_rel_range"] = float(np.abs(pt - o).max() / rng) if rng else None
        line = re.search(r"^expect: .*$", open(f"{out}/acc_kfuse_{m}.txt").read(), re.M)
        acc["kfuse_expect"] = line.group(0) if line else None
        acc["kfuse_exit"] = rc
    entry["accuracy"] = acc
    cells = {}
    for b in (1, 8):
        for t in (1, 2):
            kl = [f"{out}/kfuse_{m}_b{b}_t{t}_r{r}.txt" for r in range(rounds)]
            ol = [f"{out}/ort_{m}_b{b}_t{t}_r{r}.txt" for r in range(rounds)]
            if not os.path.exists(kl[0]):
                continue
            kr, ors = [median(f)[0] for f in kl], [median(f)[0] for f in ol]
            kv, ov = [x for x in kr if x is not None], [x for x in ors if x is not None]
            c = {"kfuse_rounds_ms": kr, "ort_rounds_ms": ors,
                 "kfuse_ms": statistics.median(kv) if kv else None,
                 "ort_ms": statistics.median(ov) if ov else None}
            rep = re.search(r"\((\d+) runs", open(kl[0]).read())
            c["reps"] = int(rep.group(1)) if rep else None
            text = open(kl[0]).read()
            lay = re.search(r"^layout: auto -> (\w+)", text, re.M)
            c["layout"] = lay.group(1) if lay else None
            c["split"] = "split: on" in text
            if c["kfuse_ms"] is None:
                c["kfuse_error"] = median(kl[0])[1]
            if c["ort_ms"] is None:
                c["ort_error"] = median(ol[0])[1]
            c["ratio"] = c["kfuse_ms"] / c["ort_ms"] if c["kfuse_ms"] and c["ort_ms"] else None
            cells[f"b{b}_t{t}"] = c
    entry["cells"] = cells
json.dump(doc, open(f"{out}/zoo.json", "w"), indent=1)
print(f"wrote {out}/zoo.json", file=sys.stderr)
PY
/usr/bin/python3 scripts/zoo_table.py "$out/zoo.json" --stdout
