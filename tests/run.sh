#!/usr/bin/env bash
# tests/run.sh - the test command of the README and of CI.
#
# Builds einc three times (-Werror; ASan+UBSan; ThreadSanitizer), runs the
# whole suite in the first two and the shared-context thread test in the
# third, runs the libFuzzer target for a bounded time when clang can build
# it, and ends with one line "N passed, N failed[, N skipped]" that adds up
# the cases of every test program (a program that dies without its summary
# line counts as one failure).
#
# Environment: EINC_FUZZ_SECONDS (default 30; 0 skips fuzzing).
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

echo "== build: ASan + UBSan"
if build build-asan -Dwerror=true -Dbuildtype=debug \
    -Db_sanitize=address,undefined -Db_lundef=false \
    "-Dc_args=-fno-sanitize-recover=all -fno-omit-frame-pointer"; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
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
  OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 \
    suite build-tsan "8 threads on one context under TSan" threads
else
  echo "tsan build failed"; status=1
fi

fuzz_result=""
if [ "$fuzz_seconds" != 0 ] && command -v clang >/dev/null; then
  echo "== fuzz: fuzz_parser for ${fuzz_seconds}s"
  if CC=clang build build-fuzz -Dfuzz=true -Dtests=false -Dbuildtype=debug; then
    corpus=$(mktemp -d)
    if build-fuzz/fuzz/fuzz_parser "$corpus" fuzz/corpus \
        -max_total_time="$fuzz_seconds" -max_len=512 >build-fuzz/fuzz.log 2>&1; then
      fuzz_result=pass
      tail -n 1 build-fuzz/fuzz.log
    else
      fuzz_result=fail
      tail -n 40 build-fuzz/fuzz.log
    fi
    rm -rf "$corpus"
  else
    echo "fuzz target did not build (clang without libFuzzer runtime?)"
    fuzz_result=skip
  fi
fi

python3 - "$root" "$fuzz_result" "$status" <<'PY'
import json, re, sys, os
root, fuzz, build_status = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
if fuzz == 'pass': passed += 1
elif fuzz == 'fail': failed += 1
elif fuzz == 'skip': skipped += 1
failed += build_status
line = f"{passed} passed, {failed} failed"
if skipped: line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
PY
