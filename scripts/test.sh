#!/usr/bin/env bash
# The one test command (README; .ci/run calls exactly this).
#   scripts/test.sh          install deps, check format and words (scripts/check_words.sh), build,
#                            run the covering set (ctest -L ci), an AddressSanitizer+UBSan build
#                            of it, a ThreadSanitizer build of the threading tests, the -march
#                            example matrix and the aarch64 smoke tests
#   scripts/test.sh --full   additionally builds and runs the full product (ctest -L full)
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
[[ "${1:-}" == "--full" ]] && full=1
jobs=${KFUSE_JOBS:-$(nproc)}
total_start=$(date +%s)
phase_start=$total_start
declare -a report=()
phase() {  # phase NAME: closes the previous phase and prints its time
  local now
  now=$(date +%s)
  if [[ -n "${current:-}" ]]; then
    report+=("$(printf '%-28s %5ds' "$current" $((now - phase_start)))")
    echo "=== phase '$current' took $((now - phase_start)) s"
  fi
  current=${1:-}
  phase_start=$now
  [[ -n "$current" ]] && echo "=== phase '$current'"
  return 0
}

phase "setup"
scripts/setup.sh

phase "format check"
files=$(git ls-files '*.hpp' '*.cpp' '*.h' | grep -v '^tests/compile_fail/cases/' || true)
if [[ -n "$files" ]]; then
  # shellcheck disable=SC2086
  clang-format --dry-run -Werror $files
fi
echo "format: $(echo "$files" | wc -w) files clean"
scripts/check_words.sh
scripts/check_layers.sh
# catch_discover_tests splits a test name at ';' and ctest then runs a filter that matches
# nothing, which Catch2 v2 reports as "No tests ran" with exit code 0: such a test never runs.
if git grep -nE '(TEST_CASE|SECTION)\("[^"]*;' -- tests; then
  echo "format: test names must not contain ';' (ctest would silently skip them)" >&2
  exit 1
fi

# The most extended arch this machine runs: kfuse::runtime's arch in the main build, and the
# arch the sanitized phases test (an AVX2-only runner gets avx2, not a run of skipped tests).
host=$(cmake -P cmake/kfuse_host_arch.cmake)

# The sanitized set (tests labelled "sanitize": SANITIZE ci in their *_tests.cmake) runs on the
# most extended arch this machine runs (each of its TUs also runs the generic arch). CI's main
# build leaves those host-arch executables out (KFUSE_SANITIZED_ELSEWHERE): they run once, in the
# AddressSanitizer + UBSan build, with every check on; their other archs' copies run in the main
# build. That saves ~240 CPU-s of compiling the same tests twice; --full builds both, and
# sanitizes the rest of the set too (SANITIZE full: sanitized -O0 TUs of 1-2 CPU-minutes each).

phase "build (Release, every x86 arch this machine runs)"
# The benchmarks are not run by tests. The examples are built here (the -march matrix phase
# runs them): the demo links kfuse::runtime, which this build has anyway, instead of compiling
# the plan compiler in its own TU (~3.5 CPU-minutes). kfuse::runtime holds the host's tier,
# built with the tests' flags, whose objects are the graph tests' plan compiler for that arch
# (KFUSE_RUNTIME_TEST_FLAGS: one instance instead of two), and the sse4 and avx2 tiers that
# kfuse-run picks under qemu's Nehalem and Haswell CPUs (onnx:kfuse_run_qemu_*).
# The per-arch tests are built for the archs this machine runs (an arch it lacks would only
# report "skipped"; the -march matrix still compiles the examples for every arch, and --full
# builds them all): on an AVX2-only runner that saves ~5 CPU-minutes of avx2_vnni / AVX-512 TUs.
# The sse4 and avx2 tiers hold f32 kernels only (KFUSE_RUNTIME_PRECISIONS; the host tier, the
# graph tests' plan compiler, keeps every precision): the qemu tests run f32 models, and the
# int8 / bf16 lowerings of those archs compile in --full (their kernels' tests run here). They
# also hold only the op families the qemu tests' models use (KFUSE_RUNTIME_OPS; the host tier
# keeps every one): the CNN then runs its channel gate and its RGB stem on the dense conv kernels
# there, and a model with a family left out fails naming it (onnx:kfuse_run_dispatch_without_*).
test_archs=""
[[ $full == 1 ]] || test_archs=$(cmake -DKFUSE_PRINT=runnable -P cmake/kfuse_host_arch.cmake)
echo "test: per-arch tests for ${test_archs:-every arch}"
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BUILD_EXAMPLES=ON \
  -DKFUSE_BUILD_BENCH=OFF -DKFUSE_FULL_TESTS=$([[ $full == 1 ]] && echo ON || echo OFF) \
  -DKFUSE_ARCHS="$test_archs" -DKFUSE_RUNTIME_ARCHS="sse4;avx2;$host" -DKFUSE_RUNTIME_TEST_FLAGS=ON \
  -DKFUSE_RUNTIME_PRECISIONS="$([[ $full == 1 ]] && echo "f32;bf16;int8" || echo f32)" \
  -DKFUSE_RUNTIME_OPS="$([[ $full == 1 ]] && echo all || echo "attention;conv2d;conv2d_depthwise;linear;norm;pool")" \
  -DKFUSE_SANITIZED_ELSEWHERE="$([[ $full == 1 ]] || echo "$host")" >/dev/null
cmake --build build/ci -j "$jobs"

phase "tests (ctest -L ci)"
ctest --test-dir build/ci -L ci -j "$jobs" --output-on-failure

if [[ $full == 1 ]]; then
  phase "full product (ctest -L full)"
  ctest --test-dir build/ci -L full -j "$jobs" --output-on-failure
fi

echo "test: sanitizer phases test arch $host"

phase "asan+ubsan build + tests"
# The sanitized set above (kfuse_tests_sanitize; --full: kfuse_tests_sanitize_full). -O0: the sanitized TUs compile fastest there (-Og: the gemm test 74 ->
# 115 s, conv2d 35 -> 53 s; -O1 about twice -O0) and the tests still run in seconds. CI
# sanitizes one TU per kernel family and the executor; --full adds the rest. -g1 (line tables:
# reports still name file and line): the sanitized compiler instance builds ~12% faster than
# with -g here, ~40% under TSan below.
# Use-after-scope checks are off in CI (--full keeps them): at -O0 they poison and unpoison every
# local of the always_inline kernel code, which made this build 1.75x longer (1450 -> 830
# CPU-s on Zen 4; the eltwise TU 426 -> 127 s, gemm 146 -> 74 s). Out-of-bounds, use-after-free
# and UBSan's checks stay.
# UBSan's alignment, null and pointer-overflow checks are left out of the kernel-heavy TUs in CI
# (KFUSE_UBSAN_SKIP; --full keeps them): at -O0 they guard every pointer use and every pointer
# step of the inlined kernel code, and UBSan costs more there than ASan (the sanitized gemm
# test: 65 s with ASan alone, 135 s with UBSan, 99 s without alignment and null; the plan
# compiler 353 -> 205 s, Zen 5; the eltwise test 41 -> 35 s without pointer-overflow too, Xeon).
# ASan still reports a null dereference and any access out of bounds, and the plain tests (the
# .npy reader's typed views) and the ONNX importer keep every check.
asan_flags="-g1"
ubsan_skip=""
[[ $full == 1 ]] || {
  asan_flags="-g1 -fno-sanitize-address-use-after-scope"
  ubsan_skip="alignment,null,pointer-overflow"
}
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$asan_flags" \
  -DKFUSE_SANITIZE=address -DKFUSE_UBSAN_SKIP="$ubsan_skip" -DKFUSE_TEST_OPT_FLAGS=-O0 \
  -DKFUSE_ARCHS="$host" -DKFUSE_BUILD_BENCH=OFF \
  -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
# The TSan build (next phase) compiles beside this one: its plan compiler is one TU of ~90 s,
# which on its own left a core idle for a third of that phase.
# The tests labelled threads (kfuse_tests_threads): the thread pool and the executor (graph_exec
# runs plans on 1 and 2 threads; graph_threading pinned to one core, against a busy loop, and one
# replay buffer on two threads).
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DKFUSE_SANITIZE=thread \
  -DKFUSE_ARCHS="$host" -DKFUSE_BUILD_BENCH=OFF -DKFUSE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/tsan -j "$jobs" --target kfuse_tests_threads >build/tsan-build.log 2>&1 &
tsan_build=$!
cmake --build build/asan -j "$jobs" --target kfuse_tests_sanitize$([[ $full == 1 ]] && echo _full)
ctest --test-dir build/asan -L sanitize -j "$jobs" --output-on-failure

phase "tsan build (its rest) + threading tests"
wait $tsan_build || { cat build/tsan-build.log; echo "test: the TSan build failed" >&2; exit 1; }
tail -n 1 build/tsan-build.log
ctest --test-dir build/tsan -L threads -j "$jobs" --output-on-failure

if [[ -x scripts/examples_matrix.sh ]]; then
  phase "examples -march matrix"
  BUILD_X86=build/ci REUSE_X86=1 JOBS=$jobs scripts/examples_matrix.sh
fi

if [[ -x build/ci/examples/04_models/ex04_models ]]; then
  # Built with the tests. The README's main job at CI size: MLP + ResNet block through
  # compile / record / replay in fp32, bf16 and int8, checked against a double reference.
  phase "end-to-end demo (ex04_models --small)"
  build/ci/examples/04_models/ex04_models --small | tee build/ci/demo.log | tail -n 5
  grep -q "^result: ok" build/ci/demo.log
fi

if [[ -x scripts/aarch64_tests.sh ]]; then
  phase "aarch64 smoke (qemu)"
  # CI: the neon_dotprod tier (xsimd and Highway NEON, dotprod, fp16); the armv8-a tier (xsimd
  # only, the same NEON code without those extensions) is in the -march matrix's examples above
  # and, with its smoke tests, under --full (~75 s of CI's 20-minute budget).
  a64_archs="neon_dotprod"
  [[ $full == 1 ]] && a64_archs="neon;neon_dotprod"
  A64_ARCHS=$a64_archs JOBS=$jobs scripts/aarch64_tests.sh
fi

phase ""
echo
echo "=== per-phase times"
printf '%s\n' "${report[@]}"
echo "total $(( $(date +%s) - total_start )) s"
