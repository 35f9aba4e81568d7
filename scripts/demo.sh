#!/usr/bin/env bash
# The main job: install the dependencies, build the eltwise demo for this machine and run it.
# (The end-to-end MLP / CNN demo of the executor issue will take this place.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/demo --target ex01_eltwise_native
build/demo/examples/ex01_eltwise_native
