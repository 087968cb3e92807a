#!/usr/bin/env bash
# scripts/valgrind.sh [BUILD_DIR] - the CPU test programs and the examples
# under valgrind memcheck: any memory error or definite/indirect leak fails.
# (Leaks of libgomp's and OpenBLAS's thread pools are "possibly lost" or
# "still reachable" and are not einc's.) Prints one summary line in the
# format of the test programs, "ein-test-summary: valgrind: N passed, N
# failed", with one case per program.
set -u
dir=${1:-build-ci}
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  echo "valgrind is not installed"
  exit 77
fi
programs="test_lexer test_parser test_errors test_shapes test_shape_check
  test_random test_eval_random test_plan test_disk_cache test_alloc_fail
  test_threads test_bad_inputs test_grad test_cpu_half"
# (not the MPI example: it runs under mpirun, and MPI's own allocations
# are not einc's to answer for)
examples=$(ls "$dir"/examples/ 2>/dev/null | grep -v -e '\.p$' -e mpi || true)
passed=0 failed=0
run() { # LABEL PROGRAM ARGS...
  local label=$1 log
  shift
  log=$(mktemp)
  if valgrind -q --error-exitcode=99 --leak-check=full \
      --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect \
      --suppressions=scripts/valgrind.supp "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "ok    $label"
  else
    failed=$((failed + 1))
    echo "FAIL  $label"
    tail -n 40 "$log"
  fi
  rm -f "$log"
}
# The random suites run a sample here (their whole runs are the plain
# and ASan builds'): valgrind is 20-50x slower.
for p in $programs; do
  [ -x "$dir/tests/$p" ] && EIN_CASES=200 EIN_LARGE_CASES=10 \
    EIN_COMPLEX_CASES=40 EIN_COMPLEX_LARGE_CASES=4 run "$p" "$dir/tests/$p"
done
# fp8 (issue 28) on the CPU: valgrind cannot follow the emulated
# device's fibers
[ -x "$dir/tests/test_fp8" ] && EIN_FP8_CPU_ONLY=1 run test_fp8 "$dir/tests/test_fp8"
for e in $examples; do
  [ -x "$dir/examples/$e" ] && run "examples/$e" "$dir/examples/$e"
done
echo "ein-test-summary: valgrind: $passed passed, $failed failed"
[ "$failed" = 0 ]
