#!/usr/bin/env bash
# The march matrix: builds every example for every -march variant and runs it, then prints
#   example | variant | xsimd arch | hwy target | checksum | ok
# x86 variants (x86-64-v2, -v3, -v4, native) come from a host build; the aarch64 variants
# (armv8-a: xsimd only; armv8.2-a+fp16+dotprod+crypto: xsimd + Highway NEON) from a cross build
# with cmake/toolchains/aarch64-linux-gnu.cmake, run under qemu-aarch64-static.
# A variant is ok when the program passes its own checks (expected xsimd arch and Highway target,
# every backend against a double reference) and its checksum matches the first variant's within
# the tolerance the program prints.
#
#   scripts/examples_matrix.sh            # JOBS=1 by default; JOBS=2 on an idle machine
#   NO_AARCH64=1 scripts/examples_matrix.sh
#   BUILD_X86=build/ci REUSE_X86=1 scripts/examples_matrix.sh   # x86 examples of that build
# Env: BUILD_X86 (build-ex-x86), BUILD_A64 (build-ex-a64), JOBS, NO_AARCH64, CMAKE_BUILD_TYPE,
#      REUSE_X86 (1: BUILD_X86 is an existing build with KFUSE_BUILD_EXAMPLES=ON; not configured
#      again, only its examples are built: scripts/test.sh builds them with the tests, where the
#      demo links the kfuse::runtime the tests build anyway).
set -euo pipefail

start=$(date +%s)
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-1}
build_type=${CMAKE_BUILD_TYPE:-Release}
bx=${BUILD_X86:-$root/build-ex-x86}
ba=${BUILD_A64:-$root/build-ex-a64}
common=(-G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DKFUSE_BUILD_EXAMPLES=ON -DKFUSE_BUILD_TESTS=OFF
        -DKFUSE_BUILD_BENCH=OFF -DKFUSE_INSTALL=OFF -DKFUSE_BUILD_RUNTIME=OFF)

host_arch=$(uname -m)
builds=()
if [[ $host_arch == x86_64 ]]; then
  if [[ ${REUSE_X86:-0} != 1 ]]; then
    cmake -S "$root" -B "$bx" "${common[@]}" >/dev/null
  fi
  builds+=("$bx|")
fi
if [[ -z ${NO_AARCH64:-} ]]; then
  if [[ $host_arch == aarch64 ]]; then
    cmake -S "$root" -B "$ba" "${common[@]}" >/dev/null
    builds+=("$ba|")
  elif command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64-static >/dev/null; then
    cmake -S "$root" -B "$ba" "${common[@]}" \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" >/dev/null
    builds+=("$ba|qemu-aarch64-static")
  else
    echo "note: no aarch64-linux-gnu-g++ / qemu-aarch64-static: aarch64 variants skipped" >&2
  fi
fi

for b in "${builds[@]}"; do
  dir=${b%%|*}
  echo "== building $dir (-j$jobs)" >&2
  if ! ninja -C "$dir" -j"$jobs" >"$dir/examples_matrix_build.log" 2>&1; then
    grep -E -A5 "FAILED|error" "$dir/examples_matrix_build.log" | head -n 60 >&2
    echo "examples_matrix: build failed in $dir (log: $dir/examples_matrix_build.log)" >&2
    exit 1
  fi
done

field() { sed -n "s/^$1: *//p" <<<"$2" | head -n1; }

declare -A first_checksum
status=0
rows=()
# Order: example, then x86 variants, then aarch64 variants.
for ex in $(cd "$root/examples" && ls -d [0-9][0-9]_* | sort); do
  [[ -f $root/examples/$ex/CMakeLists.txt ]] && continue  # own build (03_dispatch): below
  exe_base="ex${ex}"
  for b in "${builds[@]}"; do
    dir=${b%%|*}
    emu=${b#*|}
    for v in v2 v3 v4 native armv8a armv82a; do
      exe="$dir/examples/${exe_base}_$v"
      [[ -x $exe ]] || continue
      set +e
      out=$(timeout 300 $emu "$exe" 2>&1)
      rc=$?
      set -e
      variant=$(field variant "$out")
      xs=$(field "xsimd arch" "$out" | cut -d' ' -f1)
      hw=$(field "hwy target" "$out")
      sum=$(field checksum "$out")
      tol=$(field "checksum tolerance" "$out")
      ok=yes
      if [[ $rc -eq 132 ]]; then
        ok="skip (cpu lacks ${v})"
      elif [[ $rc -ne 0 || $(field result "$out") != ok ]]; then
        ok="NO (rc=$rc)"
        status=1
        echo "---- $exe failed:" >&2
        echo "$out" >&2
      elif [[ -z ${first_checksum[$ex]:-} ]]; then
        first_checksum[$ex]=$sum
      elif ! awk -v a="$sum" -v b="${first_checksum[$ex]}" -v t="${tol:-0}" \
             'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; then
        ok="NO (checksum differs from ${first_checksum[$ex]} by more than ${tol:-0})"
        status=1
      fi
      rows+=("$ex|${variant:-$v}|${xs:-?}|${hw:-?}|${sum:-?}|$ok")
    done
  done
done

printf '\n%-16s | %-17s | %-11s | %-10s | %-12s | %s\n' example variant "xsimd arch" "hwy target" checksum ok
printf '%s\n' "-----------------+-------------------+-------------+------------+--------------+----"
for r in "${rows[@]}"; do
  IFS='|' read -r e v x h s o <<<"$r"
  printf '%-16s | %-17s | %-11s | %-10s | %-12s | %s\n' "$e" "$v" "$x" "$h" "$s" "$o"
done

# 03_dispatch is one binary per platform (every arch inside, picked at run time), not a variant.
for b in "${builds[@]}"; do
  dir=${b%%|*}
  emu=${b#*|}
  exe="$dir/examples/03_dispatch/ex03_dispatch"
  [[ -x $exe ]] || continue
  set +e
  out=$(timeout 300 $emu "$exe" 2>&1)
  rc=$?
  set -e
  r=$(field result "$out")
  [[ $rc -eq 0 && $r == ok ]] || { status=1; echo "$out" >&2; }
  echo "03_dispatch ($(basename "$dir")): $(field dispatched "$out") -> ${r:-FAILED (rc=$rc)}"
done

echo
echo "examples_matrix: $([[ $status -eq 0 ]] && echo all ok || echo FAILED), wall time $(( $(date +%s) - start )) s"
exit $status
