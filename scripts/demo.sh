#!/usr/bin/env bash
# The main job (README): install the dependencies, build the end-to-end models demo for this machine
# (-O3 -march=native) and run it: an MLP and a ResNet basic block compiled into fp32, bf16 and
# int8 plans, their agreement with fp32, the fusion report, the profiler table and a batch sweep.
#   scripts/demo.sh                     # budget 5 ms, all cores
#   scripts/demo.sh --budget-ms 2 --threads 1 --trace trace.json
# Arguments go to the demo (ex04_models --help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# kfuse::runtime for this machine's tier only (KFUSE_RUNTIME_ARCHS=native: a quarter of the
# default package's tiers), with the op families the demo's models use (KFUSE_RUNTIME_OPS: the
# MLP's linears and softmax, the block's NHWC convs and pooling; eltwise and data movement are
# always built), compiled in parallel.
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_EXAMPLES=ON -DKFUSE_RUNTIME_ARCHS=native \
  -DKFUSE_RUNTIME_OPS="conv2d;linear;norm;pool" >/dev/null
cmake --build build/demo --target ex04_models
if [[ $# -eq 0 ]]; then set -- --budget-ms 5; fi
build/demo/examples/04_models/ex04_models "$@"
