#!/usr/bin/env bash
# scripts/mutation_test.sh [WORK_DIR] - proof that the emulated-device
# suite can fail: breaks the CUDA path on purpose, one mutant at a time, in
# a copy of the source tree, and checks that the random suite on `--backend
# emu` reports failures for each. The mutants are the bugs a GPU would
# punish and a CPU run would not see: a swapped cuBLAS leading dimension, a
# removed __syncthreads, an off-by-one loop bound in a kernel template, and
# a wrong shuffle mask. Prints one summary line in the format of the test
# programs, "ein-test-summary: mutation: N passed, N failed" (a mutant the
# suite catches, by failures or by dying on a signal, is a pass).
#
# One build of the copy; each mutant is applied, rebuilt incrementally,
# run on EIN_CASES cases (default 300), and reverted.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
work=${1:-$(mktemp -d)}
cases=${EIN_CASES:-300}
mkdir -p "$work"
copy=$work/src
rm -rf "$copy"
mkdir -p "$copy"
tar --exclude='./build*' --exclude=./.git --exclude='./.device' -cf - . |
  tar -xf - -C "$copy"

if ! meson setup "$work/build" "$copy" -Dbuildtype=debugoptimized \
    >"$work/setup.log" 2>&1 ||
   ! ninja -C "$work/build" tests/test_eval_random_emu >"$work/build.log" 2>&1
then
  cat "$work/setup.log" "$work/build.log" | tail -40
  echo "ein-test-summary: mutation: 0 passed, 1 failed"
  exit 1
fi

passed=0 failed=0
# mutant NAME FILE OLD NEW: OLD must occur in FILE exactly once.
mutant() {
  local name=$1 file=$copy/$2 old=$3 new=$4 log=$work/$1.log
  if ! python3 - "$file" "$old" "$new" <<'PY'; then
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit("mutant does not apply: %r occurs %d times in %s"
             % (old, text.count(old), path))
open(path, "w").write(text.replace(old, new))
PY
    failed=$((failed + 1))
    echo "FAIL  $name: the mutant no longer applies (update this script)"
    return
  fi
  if ! ninja -C "$work/build" tests/test_eval_random_emu >"$log" 2>&1; then
    failed=$((failed + 1))
    echo "FAIL  $name: the mutant does not build"
  else
    EINC_CACHE_DIR=$work/cache EIN_CASES=$cases EIN_LARGE_CASES=20 \
      EIN_COMPLEX_CASES=60 EIN_COMPLEX_LARGE_CASES=4 \
      "$work/build/tests/test_eval_random_emu" --backend emu >>"$log" 2>&1
    local rc=$? summary
    summary=$(grep -E '^ein-test-summary' "$log" | tail -1)
    if echo "$summary" | grep -qE ', [1-9][0-9]* failed'; then
      passed=$((passed + 1))
      echo "ok    $name caught: ${summary#*: *: }"
    elif [ "$rc" -gt 128 ]; then
      # the suite died under the mutant (a leading dimension swapped makes
      # the emulated cuBLAS read past a buffer: on some heaps a crash
      # before the summary, on others wrong values): it fails all the same
      passed=$((passed + 1))
      echo "ok    $name caught: the suite died (signal $((rc - 128)))"
    else
      failed=$((failed + 1))
      echo "FAIL  $name NOT caught: ${summary:-no summary}"
    fi
  fi
  cp "$root/$2" "$file" # revert
}

mutant swapped-leading-dimension src/codegen/cuda_program.c \
  '  out->lda = call.ldb;
  out->ldb = call.lda;' \
  '  out->lda = call.lda;
  out->ldb = call.ldb;'
mutant removed-barrier src/codegen/kernels/reduce.cuh \
  '        part[threadIdx.y / rows][threadIdx.x] = acc;
      __syncthreads();' \
  '        part[threadIdx.y / rows][threadIdx.x] = acc;'
mutant off-by-one-bound src/codegen/kernels/reduce.cuh \
  'idx r0 = 0, r1 = Step::nred;' 'idx r0 = 0, r1 = Step::nred - 1;'
mutant wrong-shuffle-mask src/codegen/kernels/reduce.cuh \
  '__shfl_down_sync(0xffffffffu, acc, off)' \
  '__shfl_down_sync(0x0000ffffu, acc, off)'

echo "ein-test-summary: mutation: $passed passed, $failed failed"
[ "$failed" = 0 ]
