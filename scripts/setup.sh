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
)
if [[ "${1:-}" == "--peers" ]]; then
  # XNNPACK does not pull in the pthreadpool headers; dnnl's CMake config needs the OpenCL ICD dev files.
  packages+=(libdnnl-dev libopenblas-openmp-dev libxnnpack-dev libpthreadpool-dev ocl-icd-opencl-dev
    libtorch-dev python3-torch python3-torchvision python3-onnx python3-numpy util-linux)
  command -v node >/dev/null 2>&1 || packages+=(nodejs npm)
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

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  if [[ "${1:-}" == "--peers" ]]; then install_ort; fi
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
