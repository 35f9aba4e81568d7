#!/usr/bin/env bash
# Compile time of typical user TUs and of the default package, written as docs/benchmarks/compile_time_latest.md
# (with the CPU and compiler). Usage:
#   scripts/compile_times.sh [--out docs/benchmarks/compile_time_latest.md]
# User TUs: g++ -std=c++20 -march=native -I include, one compile at a time. The package: a clean
# build folder (Release; tests, benchmarks and examples off) built with ninja -j2, each
# translation unit's time read from ninja's log. The machine should be otherwise idle.
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/benchmarks/compile_time_latest.md
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--out file.md]" >&2; exit 2 ;;
  esac
done
cxx=${CXX:-g++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-std=c++20 -march=native -Iinclude -pthread)

# seconds <out-var> <command...>: wall time of one run.
seconds() {
  local var=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  printf -v "$var" '%.1f' "$(echo "$t1 - $t0" | bc)"
}
verdict() { # verdict <seconds> <target>
  if [ "$(echo "$1 <= $2" | bc)" = 1 ]; then echo "met"; else echo "**not met**"; fi
}

# The default package, from an empty folder, at -j2.
cmake -S . -B "$work/pkg" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_TESTS=OFF \
  -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
seconds t_pkg ninja -C "$work/pkg" -j2 >/dev/null
lib=$(find "$work/pkg" -name libkfuse_runtime.a | head -1)
# Per TU: ninja's log holds start and end (ms) of each edge; objects only.
awk 'NR > 1 && $4 ~ /\.o$/ { printf "%.1f %s\n", ($2 - $1) / 1000, $4 }' "$work/pkg/.ninja_log" |
  sort -rn >"$work/tus"
t_cpu=$(awk '{ s += $1 } END { printf "%.0f", s }' "$work/tus")
t_rt_max=$(grep kfuse_plan_compiler "$work/tus" | head -1 | cut -d' ' -f1)

ct=bench/compile_time
printf '#include <functional>\n#include <iostream>\n#include <map>\n#include <string>\n#include <vector>\nint main() {}\n' >"$work/std.cpp"
seconds t_std "$cxx" "${flags[@]}" -O0 -c "$work/std.cpp" -o "$work/std.o"
seconds t_inc "$cxx" "${flags[@]}" -O0 -c $ct/include_only.cpp -o "$work/inc.o"
seconds t_gemm "$cxx" "${flags[@]}" -O2 -c $ct/fused_gemm.cpp -o "$work/g.o"
seconds t_sel "$cxx" "${flags[@]}" -O3 -DKFUSE_CT_SELECTIVE=1 -c $ct/mlp_snippet.cpp -o "$work/sel.o"
seconds t_rt "$cxx" "${flags[@]}" -O3 -DKFUSE_CT_RUNTIME=1 -c $ct/mlp_snippet.cpp -o "$work/rt.o"
seconds t_hdr "$cxx" "${flags[@]}" -O3 -c $ct/mlp_snippet.cpp -o "$work/hdr.o"
# Each must link and run (the MLP's softmax sums to 1).
"$cxx" "${flags[@]}" "$work/sel.o" -o "$work/sel" && "$work/sel"
"$cxx" "${flags[@]}" "$work/rt.o" "$lib" -o "$work/rt" && "$work/rt"
"$cxx" "${flags[@]}" "$work/hdr.o" -o "$work/hdr" && "$work/hdr"

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
ver=$("$cxx" --version | head -1)
{
  echo "# Compile time"
  echo
  echo "Produced by \`scripts/compile_times.sh\` on $(date -u +%Y-%m-%d): $cpu, $(nproc) CPUs, $ver."
  echo "Wall seconds of one run; a busy machine adds noise (re-run it to compare)."
  echo
  echo "## What a user's translation unit costs"
  echo
  echo "\`g++ -std=c++20 -march=native\`, one compile at a time; the probes are \`bench/compile_time/*.cpp\`."
  echo "The MLP is the README's executor snippet (linear, relu, softmax; compile, record, replay)."
  echo
  echo "| translation unit | seconds | target |"
  echo "|---|---|---|"
  echo "| yardstick: \`<functional> <iostream> <map> <string> <vector>\` only, -O0 | $t_std | |"
  echo "| \`kfuse/kfuse.hpp\` alone, -O0 | $t_inc | |"
  echo "| one fused gemm (\`gemm<f32, native, epilogue<bias, gelu_tanh, quantize<i8>>>\`), -O2 | $t_gemm | <= 10: $(verdict "$t_gemm" 10) |"
  echo "| MLP on \`kfuse/runtime.hpp\` + \`kfuse::runtime\`, -O3 | $t_rt | <= 15: $(verdict "$t_rt" 15) |"
  echo "| MLP selective: \`compile<ops<linear, eltwise, softmax>::in<f32>>\`, -O3 | $t_sel | <= 20: $(verdict "$t_sel" 20) |"
  echo "| MLP header-only, every op (\`kfuse/graph/compile.hpp\`), -O3 | $t_hdr | <= 300: $(verdict "$t_hdr" 300) |"
  echo
  echo "## The default package"
  echo
  echo "kfuse, \`kfuse::runtime\` (\`KFUSE_RUNTIME_ARCHS\` default: sse4, avx2, avx512, avx512_bf16), the ONNX"
  echo "importer and kfuse-run, Release, from an empty build folder: **$t_pkg s wall at -j2** (target:"
  echo "at most 360 s: $(verdict "$t_pkg" 360)), $t_cpu s"
  echo "summed over its translation units; the largest runtime TU $t_rt_max s (target: none over 60 s:"
  echo "$(verdict "$t_rt_max" 60))."
  echo
  echo "| translation unit | seconds (under -j2) |"
  echo "|---|---|"
  # "sse4/conv2d.cpp": kfuse::runtime's tier sse4; other rows are the importer and kfuse-run.
  sed -E 's|^([0-9.]+) .*/([^/]+/[^/]+)\.o$|\| \2 \| \1 \||' "$work/tus"
} >"$out.new"
# The hand-written sections after the generated tables stay.
if [ -f "$out" ] && grep -q '^<!-- end of generated tables -->' "$out"; then
  sed -n '/^<!-- end of generated tables -->/,$p' "$out" >>"$out.new"
else
  echo '<!-- end of generated tables -->' >>"$out.new"
fi
mv "$out.new" "$out"
cat "$out"
