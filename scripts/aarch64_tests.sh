#!/usr/bin/env bash
# aarch64 tests: one cross build with cmake/toolchains/aarch64-linux-gnu.cmake, its smoke tests
# run under qemu-aarch64-static (through CMAKE_CROSSCOMPILING_EMULATOR). The archs (A64_ARCHS):
#   neon          -march=armv8-a: xsimd only (Highway 1.0.3's NEON target needs +crypto)
#   neon_dotprod  -march=armv8.2-a+fp16+dotprod+crypto: xsimd and Highway NEON
# The scalar arch's own test executables are not built here: it is the same source as on x86,
# whose CI runs them, and most NEON test TUs (eltwise, stages, math, convert, vec) run it on
# aarch64 as their reference. -O2, not -O3: aarch64-linux-gnu-g++ 12.2 hits an internal compiler
# error (cunrolli, gimple_duplicate_bb) on gemm.hpp's tile lambda at -O3 with
# -march=armv8.2-a+...+dotprod. No sanitizers (not under qemu). Needs g++-aarch64-linux-gnu and
# qemu-user-static.
#
#   scripts/aarch64_tests.sh                      # both NEON tiers; JOBS=2 by default
#   A64_ARCHS=neon_dotprod scripts/aarch64_tests.sh
# Env: BUILD_ROOT (the repo), JOBS, CMAKE_BUILD_TYPE (Release), CTEST_LABEL (smoke), A64_ARCHS.
set -euo pipefail

start=$(date +%s)
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-2}
build_root=${BUILD_ROOT:-$root}
label=${CTEST_LABEL:-smoke}
for tool in aarch64-linux-gnu-g++ qemu-aarch64-static cmake ninja; do
  command -v "$tool" >/dev/null || {
    echo "aarch64_tests: $tool not found (apt-get install g++-aarch64-linux-gnu qemu-user-static)" >&2
    exit 2
  }
done

archs=${A64_ARCHS:-neon;neon_dotprod}
dir=$build_root/build-a64
echo "== $dir: KFUSE_ARCHS=$archs"
cmake -S "$root" -B "$dir" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DKFUSE_ARCHS="$archs" -DKFUSE_SANITIZE= \
  -DKFUSE_BUILD_TESTS=ON -DKFUSE_BUILD_EXAMPLES=OFF -DKFUSE_BUILD_BENCH=OFF -DKFUSE_INSTALL=OFF \
  -DKFUSE_BUILD_RUNTIME=OFF \
  >/dev/null
ninja -C "$dir" -j"$jobs" kfuse_tests_smoke  # only what the smoke label runs
status=0
ctest --test-dir "$dir" -L "$label" -j"$jobs" --output-on-failure --timeout 600 || status=1
echo "aarch64_tests: $([[ $status -eq 0 ]] && echo passed || echo FAILED), wall time $(( $(date +%s) - start )) s"
exit $status
