#!/usr/bin/env bash
# The randomized differential test of the graph executor, run longer than CI runs it
# (docs/robustness.md, "Randomized differential test"): builds robustness_graph_fuzz in its own
# build folder and runs it for many seeds, then prints the totals.
#
#   scripts/fuzz_graphs.sh [--asan] [--build-dir DIR] [--seeds N] [--first-seed S] [--count C]
#                          [--known-bugs MASK]
#
#   --asan        the AddressSanitizer+UBSan -O0 build CI uses (build/fuzz_asan; ~10x slower)
#                 instead of Release (build/fuzz)
#   --build-dir   another build folder (configured here as above)
#   --seeds N     base seeds to run (default 20), from --first-seed (default 1)
#   --count C     valid and invalid cases per seed (default 2000; CI runs 1 seed of 1200)
#   --known-bugs  also generate the patterns of these known bugs (bit mask, gfuzz::bug in
#                 tests/robustness/graph_fuzz.hpp); they fail or crash until fixed
# KFUSE_JOBS sets the build's parallelism (default 1: the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."

asan=0 seeds=20 first=1 count=2000 bugs=0 dir=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --asan) asan=1 ;;
    --build-dir) dir=$2; shift ;;
    --seeds) seeds=$2; shift ;;
    --first-seed) first=$2; shift ;;
    --count) count=$2; shift ;;
    --known-bugs) bugs=$2; shift ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "fuzz_graphs.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
# The test is built for the most extended arch this CPU runs (avx512_bf16 on the CI machines).
arch=$(cmake -P cmake/kfuse_host_arch.cmake)

if [[ $asan == 1 ]]; then
  dir=${dir:-build/fuzz_asan}
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKFUSE_SANITIZE=address \
    -DKFUSE_TEST_OPT_FLAGS=-O0 -DKFUSE_ARCHS=$arch -DKFUSE_BUILD_BENCH=OFF \
    -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
else
  dir=${dir:-build/fuzz}
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_ARCHS=$arch \
    -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
fi
build_start=$(date +%s)
nice -n 5 cmake --build "$dir" -j "${KFUSE_JOBS:-1}" --target robustness_graph_fuzz_$arch
echo "build: $(($(date +%s) - build_start)) s"
exe=$dir/tests/robustness_graph_fuzz_$arch
logs=$dir/fuzz_logs
mkdir -p "$logs"

declare -a failed=() run_logs=()
run_start=$(date +%s)
for ((s = first; s < first + seeds; ++s)); do
  log=$logs/seed_$s.log
  run_logs+=("$log")
  if KFUSE_FUZZ_SEED=$s KFUSE_FUZZ_COUNT=$count KFUSE_FUZZ_KNOWN_BUGS=$bugs "$exe" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$s")
  fi
  echo "seed $s: $status  $(grep -h '^FUZZ valid' "$log" | sed 's/ seed=[0-9]*//; s/ known_bugs=[0-9]*//')"
done
run_time=$(($(date +%s) - run_start))

# Totals over every seed's FUZZ lines (a crashed run has none for the part that crashed).
cat "${run_logs[@]}" | awk -v first="$first" -v last=$((first + seeds - 1)) -v t="$run_time" '
  function val(k,   i, a) { for (i = 1; i <= NF; ++i) { split($i, a, "="); if (a[1] == k) return a[2] } return 0 }
  /^FUZZ valid / { vt += val("tried"); vc += val("correct"); vm += val("mismatches");
                   vr += val("rejected"); vk += val("known_bug_rejections");
                   vw += val("wrong_exceptions"); vruns++ }
  /^FUZZ invalid / { it += val("tried"); ie += val("errors"); ia += val("accepted");
                     iw += val("wrong_exceptions"); iruns++ }
  /^FUZZ accepted-invalid/ { line = $0; sub(/^FUZZ accepted-invalid \(x[0-9]+\): /, "", line);
                             n = $3; gsub(/[(x):]/, "", n); acc[line] += n }
  END {
    printf "seeds %d..%d, %d s\n", first, last, t
    printf "valid:   tried %d, correct %d, mismatches %d, rejected %d (known bug: %d more), wrong exceptions %d (%d runs)\n", vt, vc, vm, vr, vk, vw, vruns
    printf "invalid: tried %d, errors %d, accepted invalid %d, wrong exceptions %d (%d runs)\n", it, ie, ia, iw, iruns
    for (k in acc) printf "  accepted invalid x%d: %s\n", acc[k], k
  }'
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED seeds (crash, mismatch or wrong exception): ${failed[*]} (logs in $logs)"
  exit 1
fi
echo "crashes 0, silent wrong results 0 (logs in $logs)"
