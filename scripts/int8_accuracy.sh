#!/usr/bin/env bash
# The int8 accuracy of the benchmark models on any CPU:
# bench/int8_accuracy compiles each model's calibrated int8 plan for arch generic (kfuse's int8
# arithmetic without vpdpbusd, exact and arch-independent) and its f32 plan for this CPU, and
# prints cosine, errors and top-1 agreement per output. Models: the CNNs of
# scripts/make_real_models.py (batch 1, their .input.npy) and the encoders of
# scripts/make_transformer_models.py (sequence 128, batch 1). Calibration on the same input.
#   scripts/int8_accuracy.sh [model ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KFUSE_BENCH_BUILD:-build/bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF -DKFUSE_ONNX=ON >/dev/null
cmake --build "$build" --target int8_accuracy -j "${KFUSE_JOBS:-1}"
md=$build/models
cnns=(mobilenet_v3_small mobilenet_v3_large efficientnet_b0 resnet18 mobilenet_v3_textline)
encoders=(minilm_l6 bert_base)
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=("${cnns[@]}" "${encoders[@]}")
lscpu | grep -m1 "Model name" || true
for m in "${models[@]}"; do
  if [[ " ${encoders[*]} bert_layer " == *" $m "* ]]; then
    /usr/bin/python3 scripts/make_transformer_models.py "$md" "$m" >/dev/null 2>&1
    "$build/bench/int8_accuracy" "$md/$m.onnx" "input_ids=$md/$m.s128.b1.input_ids.npy" \
      "attention_mask=$md/$m.s128.b1.attention_mask.npy"
  else
    /usr/bin/python3 scripts/make_real_models.py "$md" "$m" >/dev/null 2>&1
    "$build/bench/int8_accuracy" "$md/$m.onnx" "x=$md/$m.input.npy"
  fi
done
