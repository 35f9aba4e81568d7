#!/usr/bin/env bash
# kfuse-generate's teacher-forced logits against llama.cpp's on the same GGUF file: 128 positions
# of a tokenized English text, per position the cosine of the two logit vectors and whether their
# top-1 tokens agree. Random-weight models (scripts/llm/make_gguf.py) have flat logits whose top
# two often differ by less than either tool's rounding, so the cosine is the sharper measure.
#   scripts/llm_accuracy.sh [model ...]   (default: qwen05-q8_0 qwen05-q4_0, in $KFUSE_LLM_MODELS)
# Needs the peers (scripts/setup.sh --peers builds dump_logits) and the models (bench_llm.sh makes
# them). Writes docs/benchmarks/llm_accuracy.md.
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${KFUSE_LLAMA_DIR:-$HOME/.cache/kfuse/llama}
dump=$llama/dump_logits
[[ -x $dump ]] || { echo "no dump_logits in $llama: scripts/setup.sh --peers" >&2; exit 2; }
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(qwen05-q8_0 qwen05-q4_0)
md=${KFUSE_LLM_MODELS:-$HOME/.cache/kfuse/llm-models}
build=${KFUSE_BENCH_BUILD:-build/bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_RUNTIME=OFF -DKFUSE_ONNX=OFF >/dev/null
cmake --build "$build" --target kfuse_generate -j "${KFUSE_JOBS:-2}" >/dev/null
gen=$build/src/llm/kfuse-generate
out=$build/llm-accuracy
mkdir -p "$out"
text="The quick brown fox jumps over the lazy dog. Memory bandwidth bounds the speed of token \
generation on a CPU: every new token reads each weight of the model once, so a model of one \
gigabyte on a machine that streams twenty gigabytes per second makes at most twenty tokens per \
second. Quantizing the weights to eight or four bits per value raises that bound in proportion, \
and the arithmetic that unpacks them has to stay hidden behind the memory traffic. In 2024, \
llama.cpp ran such models on laptops, phones and servers; its file format, GGUF, holds the \
weights, the tokenizer and the metadata in one file that can be mapped into memory."
{
  echo "# LLM logits: kfuse-generate against llama.cpp, same file"
  echo
  echo "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) CPUs; $(date -u +%Y-%m-%d)."
  echo "Teacher-forced logits of the first 128 tokens of an English text (\`scripts/llm_accuracy.sh\`):"
  echo "kfuse-generate \`--tokens --logits\` (one prefill) against llama.cpp's \`llama_decode\` one token at"
  echo "a time (scripts/llm/dump_logits.cpp). Random weights in the model's shape."
  echo
  echo "| model | positions | top-1 agreement | cosine: min | median | each top-1 in the other's top 5 |"
  echo "|---|---:|---:|---:|---:|---:|"
} >"$out/table.md"
for m in "${models[@]}"; do
  f=$md/$m.gguf
  [[ -f $f ]] || { echo "no $f: scripts/bench_llm.sh makes it" >&2; exit 2; }
  ids=$("$gen" "$f" --tokenize -p "$text" | tr -d '[],' | tr ' ' '\n' | grep -v '^$' | head -128 | tr '\n' ' ')
  "$gen" "$f" --tokens -p "$ids" --logits "$out/$m.kfuse.npy" -t 2 >/dev/null
  # shellcheck disable=SC2086
  "$dump" "$f" "$out/$m.llama.f32" $ids 2>/dev/null
  /usr/bin/python3 - "$out/$m.kfuse.npy" "$out/$m.llama.f32" "$m" >>"$out/table.md" <<'PY'
import sys
import numpy as np
k = np.load(sys.argv[1]).astype(np.float64)
n, v = k.shape[0], k.shape[-1]
k = k.reshape(n, v)
l = np.fromfile(sys.argv[2], dtype=np.float32).astype(np.float64).reshape(-1, v)[:n]
cos = (k * l).sum(1) / np.linalg.norm(k, axis=1) / np.linalg.norm(l, axis=1)
top_k, top_l = k.argmax(1), l.argmax(1)
top5_l = np.argsort(-l, axis=1)[:, :5]
top5_k = np.argsort(-k, axis=1)[:, :5]
near = np.mean([top_k[i] in top5_l[i] and top_l[i] in top5_k[i] for i in range(n)])
print(f"| {sys.argv[3]} | {n} | {np.mean(top_k == top_l) * 100:.1f}% | {cos.min():.6f} | "
      f"{np.median(cos):.6f} | {near * 100:.1f}% |")
PY
done
cp "$out/table.md" docs/benchmarks/llm_accuracy.md
cat docs/benchmarks/llm_accuracy.md
