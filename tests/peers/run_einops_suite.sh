#!/usr/bin/env bash
# tests/peers/run_einops_suite.sh PYTHON [OUT_DIR] - runs einops 0.8.2's
# own test files (test_ops, test_einsum, test_packing, test_other, from
# its released sdist, downloaded into a temporary directory: never copied
# into this repository) with einops' functions replaced by einc.einops's
# (tests/peers/einops/einc_einops_plugin.py, which also runs einops' own
# function on every call and counts value, shape and dtype mismatches).
# PYTHON: a Python with einc installed, and einops, numpy, torch, jax,
# pytest. Leaves out the tests tests/peers/deselected_einops.txt lists.
# Prints "ein-test-summary: einops-suite: N passed, N failed": the
# suite's tests, plus one failure per mismatch (and one when the sdist
# cannot be had).
set -u
here=$(cd "$(dirname "$0")" && pwd)
python=${1:?usage: run_einops_suite.sh PYTHON [OUT_DIR]}
out=${2:-$(pwd)}
mkdir -p "$out"
out=$(cd "$out" && pwd) # the suite runs from the sdist's folder
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && "$python" -m pip download -q --no-binary :all: --no-deps \
      einops==0.8.2 -d . >/dev/null 2>&1 && tar xzf einops-0.8.2.tar.gz); then
  echo "einops 0.8.2's sdist could not be downloaded"
  echo "ein-test-summary: einops-suite: 0 passed, 1 failed"
  exit 1
fi
deselect=()
while read -r id _; do
  [ -n "$id" ] && [ "${id#\#}" = "$id" ] && deselect+=(--deselect "$id")
done <"$here/deselected_einops.txt"
# the frameworks this Python has (torch may not have installed)
backends=$("$python" -c '
import importlib.util as u
print(",".join(b for b in ("numpy", "torch", "jax") if u.find_spec(b)))')
# test_other's threading test runs `python` in a subprocess: this one
rm -f "$out/einops-suite.mismatches.txt"
cd "$work/einops-0.8.2" &&
  PATH="$(dirname "$python"):$PATH" EINOPS_TEST_BACKENDS=$backends \
  EINC_EINOPS_MISMATCHES="$out/einops-suite.mismatches.txt" \
  PYTHONPATH="$here/einops:$here" "$python" -m pytest -q -p no:cacheprovider \
    -p einc_einops_plugin --junitxml="$work/junit.xml" "${deselect[@]}" \
    einops/tests/test_ops.py einops/tests/test_einsum.py \
    einops/tests/test_packing.py einops/tests/test_other.py \
    >"$out/einops-suite.pytest.log" 2>&1
grep -E '^(FAILED|ERROR) |^einc-einops-compare: ' \
  "$out/einops-suite.pytest.log"
cat "$out/einops-suite.mismatches.txt" 2>/dev/null
tail -n 1 "$out/einops-suite.pytest.log"
"$python" - "$work/junit.xml" "$out/einops-suite.pytest.log" <<'PY'
import re, sys
import xml.etree.ElementTree as ET
passed = failed = 0
try:
    for s in ET.parse(sys.argv[1]).getroot().iter("testsuite"):
        n, k = int(s.get("tests")), int(s.get("skipped"))
        f = int(s.get("failures")) + int(s.get("errors"))
        passed += n - k - f
        failed += f
except (OSError, ET.ParseError):
    failed += 1  # pytest did not run
m = re.search(r"einc-einops-compare: \d+ calls, (\d+) mismatches",
              open(sys.argv[2]).read())
failed += int(m.group(1)) if m else 1
print(f"ein-test-summary: einops-suite: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
