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
)
if [[ "${1:-}" == "--peers" ]]; then
  # XNNPACK does not pull in the pthreadpool headers; dnnl's CMake config needs the OpenCL ICD dev files.
  packages+=(libdnnl-dev libopenblas-openmp-dev libxnnpack-dev libpthreadpool-dev ocl-icd-opencl-dev
    libtorch-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
