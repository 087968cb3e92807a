#!/usr/bin/env bash
# tests/run.sh - the test command of the README and of CI.
#
# Builds einc three times (-Werror; ASan+UBSan; ThreadSanitizer) and runs
# the whole suite in the first two (the CUDA path included, on the
# emulated device) and the shared-context thread test in the third; checks
# that the emulated-device suite catches deliberate bugs in the CUDA path
# (scripts/mutation_test.sh). Then runs the CPU test programs under valgrind when it is
# installed, and the three libFuzzer targets (their regressions, then a
# bounded time each) when clang can build them, and the Python package's
# pytest suite (tests/python) on einc installed by pip into the venv
# build-ci/venv (scripts/python_env.sh), and einops' own tests on
# einc.einops (tests/peers/run_einops_suite.sh). Ends with one line
# "N passed, N failed[, N skipped]" that adds up the cases of every test
# program (a program that dies without its summary line counts as one
# failure).
#
# Environment: EINC_FUZZ_SECONDS per target (default 30; 0 skips fuzzing);
# EINC_VALGRIND=0 skips the valgrind run.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
fuzz_seconds=${EINC_FUZZ_SECONDS:-30}
status=0

build() { # DIR ARGS...
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; return 1; }
  fi
  ninja -C "$dir" >"$dir.build.log" 2>&1 || { cat "$dir.build.log"; return 1; }
}

suite() { # DIR LABEL [TEST...]
  local dir=$1 label=$2
  shift 2
  echo "== $label"
  meson test -C "$dir" --print-errorlogs --no-rebuild "$@" 2>&1 |
    grep -E '^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:|FAIL' || true
}

echo "== build: -Werror"
if build build-ci -Dwerror=true -Dbuildtype=debugoptimized; then
  suite build-ci "tests"
else
  echo "build failed"; status=1
fi

# Mutation test: the emulated-device suite must catch deliberate bugs in
# the CUDA path (scripts/mutation_test.sh).
rm -f build-ci/mutation.log
if [ -x build-ci/tests/test_eval_random_emu ]; then
  echo "== mutants of the CUDA path against the emulated-device suite"
  bash scripts/mutation_test.sh build-ci/mutation >build-ci/mutation.log 2>&1
  grep -E '^(ok|FAIL) ' build-ci/mutation.log
fi

echo "== build: ASan + UBSan"
if build build-asan -Dwerror=true -Dbuildtype=debug \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dc_args=-fno-sanitize-recover=all -fno-omit-frame-pointer"; then
  # allocator_may_return_null: an allocation too large for ASan's allocator
  # returns NULL, as malloc does, instead of aborting, so the tests of
  # einc's out-of-memory path (a 3e15-element output: exit 1) run here too.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    suite build-asan "tests under ASan+UBSan"
else
  echo "sanitizer build failed"; status=1
fi

echo "== build: ThreadSanitizer"
# libgomp's barriers are invisible to TSan, so this build has no OpenMP;
# OpenBLAS runs on the calling thread.
if build build-tsan -Dwerror=true -Dbuildtype=debug -Db_sanitize=thread \
    -Db_lundef=false -Dopenmp=disabled; then
  # units: a sliced plan's units from 3 threads at once (CPU cases only
  # there). With the CUDA backend, also 8 threads opening the CUDA
  # libraries at once.
  tsan_tests=(threads units plan_cache)
  [ -x build-tsan/tests/test_cuda_libs ] && tsan_tests+=(cuda_libs_race)
  OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 \
    suite build-tsan "8 threads on one context under TSan" "${tsan_tests[@]}"
else
  echo "tsan build failed"; status=1
fi

# valgrind memcheck over the CPU test programs (the random suites on a
# sample: scripts/valgrind.sh).
rm -f build-ci/valgrind.log
if [ "${EINC_VALGRIND:-1}" != 0 ] && command -v valgrind >/dev/null &&
   [ -x build-ci/tests/test_plan ]; then
  echo "== valgrind memcheck (CPU test programs and examples)"
  bash scripts/valgrind.sh build-ci >build-ci/valgrind.log 2>&1
  grep -E '^(ok|FAIL) ' build-ci/valgrind.log | grep -c '^ok' |
    sed 's/$/ programs clean/'
  grep -A40 '^FAIL ' build-ci/valgrind.log || true
fi

# Fuzzing: each libFuzzer target replays its regressions (inputs that once
# crashed it), then runs for a bounded time from its seed corpus.
fuzz_pass=0 fuzz_fail=0 fuzz_skip=0
# libfuzzer_links: whether this clang has the libFuzzer runtime, so that a
# fuzz build failing for einc's own code counts as failed, and only a
# machine without the runtime skips.
libfuzzer_links() {
  local probe
  probe=$(mktemp -d) || return 1
  printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {' \
    '  (void)d; (void)n; return 0; }' >"$probe/p.c"
  clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" >/dev/null 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}
if [ "$fuzz_seconds" != 0 ] && command -v clang >/dev/null &&
   ! libfuzzer_links; then
  echo "fuzzing skipped: clang has no libFuzzer runtime"
  fuzz_skip=3
elif [ "$fuzz_seconds" != 0 ] && command -v clang >/dev/null; then
  # -Werror here too: the library is also built by clang, whose warnings
  # differ from GCC's.
  if CC=clang build build-fuzz -Dfuzz=true -Dtests=false -Dbuildtype=debug \
      -Dwerror=true -Db_lundef=false; then
    for target in parser bind npy; do
      echo "== fuzz: fuzz_$target for ${fuzz_seconds}s"
      seeds=fuzz/corpus-$target
      corpus=$(mktemp -d)
      log=build-fuzz/fuzz-$target.log
      regressions=$(ls fuzz/regressions/$target/* 2>/dev/null || true)
      if { [ -z "$regressions" ] ||
           build-fuzz/fuzz/fuzz_$target $regressions >"$log" 2>&1; } &&
         build-fuzz/fuzz/fuzz_$target "$corpus" "$seeds" \
           -max_total_time="$fuzz_seconds" -max_len=2048 \
           -artifact_prefix="build-fuzz/$target-" >>"$log" 2>&1; then
        fuzz_pass=$((fuzz_pass + 1))
        tail -n 1 "$log"
      else
        fuzz_fail=$((fuzz_fail + 1))
        tail -n 40 "$log"
      fi
      rm -rf "$corpus"
    done
  else
    echo "fuzz targets did not build (clang has the libFuzzer runtime)"
    fuzz_fail=3
  fi
fi

# The Python package: pip install . into a venv, then its pytest suite
# (its report plans are compared with build-ci's einc CLI). The venv is
# made fresh each run, as a new user makes one (python -m venv; jax and
# torch from PyPI; pip install . with no option: issue 38), and the line
# after the install says whether JAX and torch support came with it.
rm -rf build-ci/venv
rm -f build-ci/pytest.xml build-ci/peers.log
echo "== Python package: fresh venv, pip install . and pytest tests/python"
if bash scripts/python_env.sh build-ci/venv --test >build-ci/python-env.log 2>&1; then
  build-ci/venv/bin/python -c 'import einc, jax, torch
print("einc with jax", jax.__version__, "(FFI targets:",
      ", ".join(einc._einc.xla_ffi_targets()) + ") and torch",
      torch.__version__)' || echo "jax or torch missing from the fresh venv"
  EINC_CLI=$root/build-ci/einc build-ci/venv/bin/python -m pytest -q \
    -p no:cacheprovider --junitxml=build-ci/pytest.xml tests/python \
    >build-ci/pytest.log 2>&1
  tail -n 1 build-ci/pytest.log
  grep -E '^(FAILED|ERROR) ' build-ci/pytest.log || true
  # numpy's and opt_einsum's own tests on einc.numpy / einc.opt_einsum,
  # every call also run by the peer and compared (issue 27)
  echo "== peers' own test suites on einc's drop-ins"
  build-ci/venv/bin/python tests/peers/run_peer_suites.py \
    >build-ci/peers.log 2>&1
  grep -E '^(  (numpy|opt_einsum): |  FAILED|  mismatch)' build-ci/peers.log || true
else
  echo "the Python package did not install:"; tail -n 30 build-ci/python-env.log
fi

# einops' own test files on einc.einops (issue 27): einops 0.8.2's sdist
# from the package index, every call also compared with einops' own.
rm -f build-ci/einops-suite.log
if [ -x build-ci/venv/bin/python ]; then
  echo "== einops 0.8.2's tests on einc.einops (tests/peers/run_einops_suite.sh)"
  bash tests/peers/run_einops_suite.sh "$root/build-ci/venv/bin/python" \
    build-ci >build-ci/einops-suite.log 2>&1
  grep -E '^(FAILED|ERROR) |^einc-einops-compare|^ein-test-summary' \
    build-ci/einops-suite.log
fi

# Mutation testing, sampled (scripts/mutants.py): mutants of the C core
# drawn with the commit as the seed, each built into a copy of the tree
# (build-mut) and run against the tests that execute its line. A survivor
# of a file listed in tests/mutants/gate.tsv, not marked equivalent, fails;
# the budget keeps the leg within 10 minutes (mutants not reached by then
# are not run). The full run: python3 scripts/mutants.py (docs/design.md, "Mutation testing").
rm -f build-ci/mutants.log
if [ "${EINC_MUTANTS:-12}" != 0 ] && command -v gcov >/dev/null; then
  echo "== mutants of the C core: ${EINC_MUTANTS:-12}, seeded by the commit"
  python3 scripts/mutants.py --gate --sample "${EINC_MUTANTS:-12}" \
    --seed "$(git rev-parse HEAD 2>/dev/null || echo 0)" --budget 540 \
    --work build-mut --folders src/lexer src/binder src/planner src/api runtime/cpu \
    >build-ci/mutants.log 2>&1
  grep -E '^(SURVIVED|budget|report|ein-test-summary)' build-ci/mutants.log
fi

python3 - "$root" "$fuzz_pass" "$fuzz_fail" "$fuzz_skip" "$status" <<'PY'
import json, re, sys, os
import xml.etree.ElementTree as ET
root = sys.argv[1]
fuzz_pass, fuzz_fail, fuzz_skip, build_status = map(int, sys.argv[2:6])
passed = failed = skipped = 0
pat = re.compile(r'^ein-test-summary: (\S+): (\d+) passed, (\d+) failed', re.M)
for d in ('build-ci', 'build-asan', 'build-tsan'):
    log = os.path.join(root, d, 'meson-logs', 'testlog.json')
    if not os.path.exists(log):
        failed += 1
        continue
    for line in open(log):
        t = json.loads(line)
        res, out = t.get('result'), t.get('stdout', '') or ''
        m = pat.findall(out)
        if res == 'SKIP':
            skipped += 1
        elif m:
            p = sum(int(x[1]) for x in m); f = sum(int(x[2]) for x in m)
            passed += p
            failed += f
            if res != 'OK' and f == 0:
                failed += 1  # died after printing its summary
        elif res == 'OK':
            passed += 1
        else:
            failed += 1
for extra in ('valgrind.log', 'mutation.log', 'peers.log', 'einops-suite.log',
              'mutants.log'):
    path = os.path.join(root, 'build-ci', extra)
    if os.path.exists(path):
        m = pat.findall(open(path).read())
        if m:
            passed += int(m[-1][1]); failed += int(m[-1][2])
        else:
            failed += 1  # the script died before its summary
junit = os.path.join(root, 'build-ci', 'pytest.xml')
if os.path.exists(junit):  # pytest's counts, case by case
    for suite in ET.parse(junit).getroot().iter('testsuite'):
        n, s = int(suite.get('tests')), int(suite.get('skipped'))
        f = int(suite.get('failures')) + int(suite.get('errors'))
        passed += n - s - f
        failed += f
        skipped += s
else:
    failed += 1  # the package did not install, or pytest did not run
passed += fuzz_pass
failed += fuzz_fail
skipped += fuzz_skip
failed += build_status
line = f"{passed} passed, {failed} failed"
if skipped: line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
PY
