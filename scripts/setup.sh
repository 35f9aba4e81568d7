#!/usr/bin/env bash
# Installs everything kfuse needs from Debian packages (idempotent; skips apt when all present).
#   scripts/setup.sh           build + test dependencies (what CI needs)
#   scripts/setup.sh --peers   also the peer libraries the benchmarks compare against
set -euo pipefail

packages=(
  g++ cmake ninja-build clang-format
  libxsimd-dev libhwy-dev libeigen3-dev catch2 libbenchmark-dev
  g++-aarch64-linux-gnu qemu-user-static   # the aarch64 cross build runs under qemu
  binutils                                  # nm for the ODR check
  libonnx-dev libprotobuf-dev libonnx-testdata   # kfuse::onnx, kfuse-run and the ONNX conformance test
  git
)
# npm fetches llama.cpp's tokenizer test vocabularies (npm node-llama-cpp). A Node.js from another
# source (NodeSource) bundles npm and conflicts with Debian's npm package: install it only when absent.
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi
if [[ "${1:-}" == "--peers" ]]; then
  # XNNPACK does not pull in the pthreadpool headers; dnnl's CMake config needs the OpenCL ICD dev files.
  packages+=(libdnnl-dev libopenblas-openmp-dev libxnnpack-dev libpthreadpool-dev ocl-icd-opencl-dev
    libtorch-dev python3-torch python3-torchvision python3-onnx python3-numpy util-linux
    python3-matplotlib)   # python3-matplotlib: scripts/zoo_table.py's plot
  packages+=(python3-numpy)   # llama.cpp's gguf-py: the benchmark models
fi

# ONNX Runtime (npm onnxruntime-node, prebuilt CPU binaries; no install scripts run) for the
# same-run comparisons of scripts/bench_threading.sh, in $KFUSE_ORT_DIR.
install_ort() {
  local dir=${KFUSE_ORT_DIR:-$HOME/.cache/kfuse/ort}
  if [[ -d $dir/node_modules/onnxruntime-node ]]; then
    echo "setup: onnxruntime-node present in $dir"
    return 0
  fi
  echo "setup: installing onnxruntime-node@1.30.0 into $dir"
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-save --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null)
}

# llama.cpp's source tree (npm node-llama-cpp bundles it as a git bundle) in $KFUSE_LLAMA_DIR:
# its tokenizer vocabularies with expected tokenizations (models/ggml-vocab-*) are the
# tokenizer tests' data; --peers also builds llama-bench, llama-tokenize, llama-quantize and
# dump_logits, the same-run peer of the LLM benchmark (~15 min on 2 cores).
install_llama() {
  local dir=${KFUSE_LLAMA_DIR:-$HOME/.cache/kfuse/llama}
  if [[ ! -d $dir/llama.cpp/models ]]; then
    echo "setup: fetching llama.cpp's source tree (npm node-llama-cpp@3.22.1) into $dir"
    mkdir -p "$dir"
    if ! (cd "$dir" && echo '{"private":true}' >package.json &&
      npm install --no-save --ignore-scripts --no-audit --no-fund -E node-llama-cpp@3.22.1 >/dev/null &&
      git clone -q node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp 2>/dev/null); then
      echo "setup: WARNING: could not fetch llama.cpp (no npm registry?): the tokenizer tests will skip"
      return 0
    fi
  fi
  if [[ "${1:-}" == "--peers" && ! -x $dir/llama.cpp/build/bin/llama-bench ]]; then
    echo "setup: building llama-bench, llama-tokenize, llama-quantize (native) in $dir/llama.cpp/build"
    # Native, but without AMX: llama.cpp's AMX matmul dies with SIGILL (tilezero) on the Xeon VMs
    # here; its AVX-512 VNNI path is what runs (kfuse::llm does not use AMX either).
    local no_amx=""
    [[ $(uname -m) == x86_64 ]] && no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    cmake -S "$dir/llama.cpp" -B "$dir/llama.cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >/dev/null
    cmake --build "$dir/llama.cpp/build" --target llama-bench llama-tokenize llama-quantize >/dev/null
  fi
  if [[ "${1:-}" == "--peers" && ! -x $dir/dump_logits ]]; then
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    g++ -O2 -std=c++17 "$here/llm/dump_logits.cpp" -I"$dir/llama.cpp/include" -I"$dir/llama.cpp/ggml/include" \
      -L"$dir/llama.cpp/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$dir/llama.cpp/build/bin" -o "$dir/dump_logits"
  fi
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  if [[ "${1:-}" == "--peers" ]]; then install_ort; fi
  install_llama "${1:-}"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
if [[ "${1:-}" == "--peers" ]]; then install_ort; fi
install_llama "${1:-}"
