#!/usr/bin/env bash
# LLM generation, kfuse-generate against llama.cpp's llama-bench in the same run: random-weight
# models in the shapes of Qwen2.5-0.5B (tied f16 head) and Llama-3.2-1B, in Q8_0, Q4_0 and Q4_K_M
# (scripts/llm/make_gguf.py with llama.cpp's real vocabularies; Q4_K_M by llama-quantize), pp512
# and tg128 on 1 and 2 threads (and pp512 with --fast-prefill, llama.cpp's one-level activations),
# rounds alternating the two tools; medians, ratios next to the targets, the probed read
# bandwidth and each tg row's share of the bandwidth bound (bandwidth / bytes read per token).
#   scripts/bench_llm.sh [rounds] [model ...]   (default 3 rounds; models qwen05-q8_0 qwen05-q4_0
#                                               qwen05-q4_k_m llama1b-q8_0 llama1b-q4_0)
# Needs the peers (scripts/setup.sh --peers builds llama-bench). Serialized with flock on
# /tmp/kfuse_bench.lock. Writes the table to docs/benchmarks/llm.md and the raw lines to
# build/bench/llm-results/ (and llm.json, drawn as docs/plots/llm.png).
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${KFUSE_LLAMA_DIR:-$HOME/.cache/kfuse/llama}
bench=$llama/llama.cpp/build/bin/llama-bench
[[ -x $bench ]] || { echo "no llama-bench in $llama: scripts/setup.sh --peers" >&2; exit 2; }
rounds=${1:-3}
shift || true
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(qwen05-q8_0 qwen05-q4_0 qwen05-q4_k_m llama1b-q8_0 llama1b-q4_0)
build=${KFUSE_BENCH_BUILD:-build/bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_RUNTIME=OFF -DKFUSE_ONNX=OFF >/dev/null
cmake --build "$build" --target kfuse_generate -j "${KFUSE_JOBS:-2}" >/dev/null
gen=$build/src/llm/kfuse-generate
md=${KFUSE_LLM_MODELS:-$HOME/.cache/kfuse/llm-models}
mkdir -p "$md"
for m in "${models[@]}"; do
  [[ -f $md/$m.gguf ]] && continue
  shape=${m%-*}
  type=${m#*-}
  case $shape in
    qwen05) args=(--shape qwen2.5-0.5b --vocab "$llama/llama.cpp/models/ggml-vocab-qwen2.gguf") ;;
    llama1b) args=(--shape llama-3.2-1b --vocab "$llama/llama.cpp/models/ggml-vocab-llama-bpe.gguf") ;;
    *) echo "unknown model $m" >&2; exit 2 ;;
  esac
  echo "making $md/$m.gguf"
  if [[ $type == q4_k_m ]]; then  # K-quants come from llama-quantize, on an f16 file
    PYTHONPATH=$llama/llama.cpp/gguf-py /usr/bin/python3 scripts/llm/make_gguf.py "$md/$shape-f16.gguf" "${args[@]}" --type f16 >/dev/null
    "$llama/llama.cpp/build/bin/llama-quantize" "$md/$shape-f16.gguf" "$md/$m.gguf" Q4_K_M >/dev/null 2>&1
    rm -f "$md/$shape-f16.gguf"
  else
    PYTHONPATH=$llama/llama.cpp/gguf-py /usr/bin/python3 scripts/llm/make_gguf.py "$md/$m.gguf" "${args[@]}" --type "$type" >/dev/null
  fi
done
out=$build/llm-results
mkdir -p "$out" docs/benchmarks
rm -f "$out"/*.txt
(
  flock 9
  "$gen" --probe 1 >"$out/bandwidth_1.txt"
  "$gen" --probe 2 >"$out/bandwidth_2.txt"
  for r in $(seq 1 "$rounds"); do
    for m in "${models[@]}"; do
      for t in 1 2; do
        "$bench" -m "$md/$m.gguf" -p 512 -n 128 -r 1 -t "$t" -o md >>"$out/llama_${m}_$t.txt" 2>/dev/null
        "$gen" "$md/$m.gguf" --bench -p 512 -n 128 -r 1 -t "$t" >>"$out/kfuse_${m}_$t.txt"
        "$gen" "$md/$m.gguf" --bench -p 512 -n 0 -r 1 -t "$t" --fast-prefill >>"$out/kfuse_fast_${m}_$t.txt"
        # Load: wall time of a process that loads the model and decodes one token.
        /usr/bin/time -f "%e" -a -o "$out/llama_load_${m}_$t.txt" "$bench" -m "$md/$m.gguf" -p 0 -n 1 -r 1 -t "$t" >/dev/null 2>&1
        /usr/bin/time -f "%e" -a -o "$out/kfuse_load_${m}_$t.txt" "$gen" "$md/$m.gguf" --bench -p 0 -n 1 -r 1 -t "$t" >/dev/null
      done
    done
  done
  "$bench" -m "$md/${models[0]}.gguf" -p 0 -n 1 -r 1 -t 1 2>&1 | grep -E "^build:" | head -1 >"$out/llama_build.txt" || true
) 9>/tmp/kfuse_bench.lock
# docs/benchmarks/llm.md: its heading, this run, then the earlier runs (newest first).
/usr/bin/python3 scripts/llm/bench_table.py "$out" "$md" "${models[@]}" | tee "$out/table.md"
mkdir -p docs/plots
/usr/bin/python3 scripts/plot_llm.py docs/plots/llm.png "$out/llm.json"
log=docs/benchmarks/llm.md
{
  echo "# LLM generation: kfuse-generate against llama.cpp (llama-bench), same run"
  echo
  echo "Runs of \`scripts/bench_llm.sh\`, newest first. Only ratios within one run compare."
  echo
  cat "$out/table.md"
  [[ -f $log ]] && sed -n '/^## /,$p' "$log" | sed '1s/^/\n/'
} >"$log.new"
mv "$log.new" "$log"
