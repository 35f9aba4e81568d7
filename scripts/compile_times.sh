#!/usr/bin/env bash
# Compile time of typical user TUs, measured one at a time, and written as the table of
# docs/compile_time.md (with the CPU and compiler). Usage:
#   scripts/compile_times.sh [--runtime-lib <path to libkfuse_runtime.a>] [--out docs/compile_time.md]
# Flags are a user's: g++ -std=c++20 -march=native -I include, at -O0 and -O2. The runtime rows
# link against kfuse::runtime (built for -march=native): without --runtime-lib the script builds
# the library's one TU itself and reports its cost (paid once, when kfuse is built).
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/compile_time.md
lib=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime-lib) lib="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--runtime-lib lib.a] [--out file.md]" >&2; exit 2 ;;
  esac
done
cxx=${CXX:-g++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-std=c++20 -march=native -Iinclude -pthread)

# seconds <out-var> <command...>: wall time of one run (the machine should be otherwise idle).
seconds() {
  local var=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  printf -v "$var" '%.1f' "$(echo "$t1 - $t0" | bc)"
}

ct=bench/compile_time
# The machine's yardstick: a TU of common standard headers only (compare machines by it).
printf '#include <functional>\n#include <iostream>\n#include <map>\n#include <string>\n#include <vector>\nint main() {}\n' >"$work/std.cpp"
seconds t_std "$cxx" "${flags[@]}" -O0 -c "$work/std.cpp" -o "$work/std.o"
seconds t_inc "$cxx" "${flags[@]}" -O0 -c $ct/include_only.cpp -o "$work/inc.o"
seconds t_gemm0 "$cxx" "${flags[@]}" -O0 -c $ct/fused_gemm.cpp -o "$work/g0.o"
seconds t_gemm2 "$cxx" "${flags[@]}" -O2 -c $ct/fused_gemm.cpp -o "$work/g2.o"
seconds t_hdr0 "$cxx" "${flags[@]}" -O0 -c $ct/graph_compile.cpp -o "$work/h0.o"
seconds t_hdr2 "$cxx" "${flags[@]}" -O2 -c $ct/graph_compile.cpp -o "$work/h2.o"
seconds t_rt0 "$cxx" "${flags[@]}" -O0 -DKFUSE_CT_RUNTIME=1 -c $ct/graph_compile.cpp -o "$work/r0.o"
seconds t_rt2 "$cxx" "${flags[@]}" -O2 -DKFUSE_CT_RUNTIME=1 -c $ct/graph_compile.cpp -o "$work/r2.o"
t_lib="(prebuilt)"
if [ -z "$lib" ]; then
  seconds t_lib "$cxx" "${flags[@]}" -O2 -c src/runtime/compile.cpp -o "$work/runtime.o"
  ar rcs "$work/libkfuse_runtime.a" "$work/runtime.o"
  lib="$work/libkfuse_runtime.a"
fi
# The runtime TU must link and run: its plan is the same as the header-only one's.
"$cxx" "${flags[@]}" "$work/r2.o" "$lib" -o "$work/rt" && "$work/rt"
"$cxx" "${flags[@]}" "$work/h2.o" -o "$work/hdr" && "$work/hdr"

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
ver=$("$cxx" --version | head -1)
verdict() { # verdict <seconds> <target>
  if [ "$(echo "$1 <= $2" | bc)" = 1 ]; then echo "met"; else echo "**not met**"; fi
}
{
  echo "# Compile time"
  echo
  echo "Produced by \`scripts/compile_times.sh\` on $(date -u +%Y-%m-%d): $cpu, $(nproc) CPUs, $ver,"
  echo "\`-std=c++20 -march=native\`, one compile at a time (wall seconds of one run; a"
  echo "busy machine adds noise: re-run it to compare). The probes are \`bench/compile_time/*.cpp\`."
  echo
  echo "| translation unit | -O0 | -O2 | target |"
  echo "|---|---|---|---|"
  echo "| yardstick: \`<functional> <iostream> <map> <string> <vector>\` only | $t_std s | | |"
  echo "| \`kfuse/kfuse.hpp\` alone | $t_inc s | | |"
  echo "| one fused gemm (\`gemm<f32, native, epilogue<bias, gelu_tanh, quantize<i8>>>\`) | $t_gemm0 s | $t_gemm2 s | <= 10 s: $(verdict "$t_gemm2" 10) |"
  echo "| builds a CNN graph and compiles a plan, \`kfuse/graph/compile.hpp\` (header-only) | $t_hdr0 s | $t_hdr2 s | |"
  echo "| the same TU on \`kfuse/runtime.hpp\` + \`kfuse::runtime\` | $t_rt0 s | $t_rt2 s | <= 15 s: $(verdict "$t_rt2" 15) |"
  echo "| \`kfuse::runtime\` itself (\`src/runtime/compile.cpp\`, once per arch, when kfuse is built) | | $t_lib s | |"
  echo
  echo "The header-only route stays: \`compile.hpp\` instantiates every kernel a plan may call (each"
  echo "op's rule in \`graph/ops/\`) in the TU that includes it. \`kfuse/runtime.hpp\` declares the same"
  echo "\`kfuse::compile<arch::native, backend::xsimd>\` as an explicit instantiation that"
  echo "\`kfuse::runtime\` defines, one object per arch of \`KFUSE_RUNTIME_ARCHS\` (default: the build"
  echo "machine's tier); the TU then compiles the graph builder and the replay buffer only."
  echo
  echo "The targets (issue 13) are absolute seconds that were set from measurements on a faster"
  echo "machine (\`kfuse/kfuse.hpp\` alone took 0.9 s there); compare machines by the yardstick row."
} > "$out"
cat "$out"
