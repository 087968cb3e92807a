#!/usr/bin/env bash
# scripts/gpu_check.sh - the CUDA backend's checks on a machine with a GPU:
# builds einc (release, -Werror) outside the source tree, runs the test
# suite, the GPU tests (device faults, threads, a random-expression run on
# the GPU), the random run under compute-sanitizer memcheck and racecheck,
# a CLI round trip CPU vs CUDA followed by the first call's phase times
# (einc eval -v: cold and warm kernel cache) in gpu_check.cli.log, and,
# where einc's wheel is carried in .device/wheels, the Python suite of
# torch/CuPy/JAX CUDA tensors (python_cuda). Prints one line per step with
# its elapsed seconds and ends with "gpu_check: N passed, N failed".
#
# It must finish within one device-tool command (10 minutes): every step
# runs under `timeout`, no step gets more than the time left of
# GPU_CHECK_BUDGET seconds (default 560), and a step that times out or is
# not reached counts as failed. Each step's log is $OUT/gpu_check.NAME.log
# when OUT is set (one file a step), else in a temporary directory named
# at the start.
#
# The device tool's machine has no re2c and no libdlpack-dev: put the
# re2c binary in .device/re2c and the DLPack header in
# .device/include/dlpack/dlpack.h (git-ignored), and name .device in carry.
# Meson takes that include directory only as a path relative to the
# source tree (it refuses absolute paths inside it).
# Environment: EIN_CASES (default 1100: about 1000 compared),
# SANITIZER_CASES (default 100), RACECHECK_CASES (default 40),
# GPU_CHECK_BUILD (default /tmp/einc-gpu-check).
set -u
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
[ -x .device/re2c ] && export PATH="$root/.device:$PATH"
dl=
[ -f /usr/include/dlpack/dlpack.h ] || dl=-Ddlpack_include=.device/include
build=${GPU_CHECK_BUILD:-/tmp/einc-gpu-check}
export dl build
budget=${GPU_CHECK_BUDGET:-560}
if [ -n "${OUT:-}" ]; then logs=$OUT; else logs=$(mktemp -d); fi
echo "gpu_check: build in $build, logs in $logs"
pass=0 fail=0

# step NAME LIMIT CMD...: CMD (a program; the functions below run through
# bash -c) under a timeout of LIMIT seconds, less if less of the budget is
# left, its output in $logs/gpu_check.NAME.log.
step() {
  local name=$1 limit=$2; shift 2
  local log="$logs/gpu_check.$name.log" left=$((budget - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    fail=$((fail + 1)); echo "FAIL $name (not run: the time budget is spent)"
    return 1
  fi
  local t0=$SECONDS rc=0
  timeout -k 10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - t0))
  if [ "$rc" = 0 ]; then
    pass=$((pass + 1)); echo "PASS $name (${took} s)"
    grep -E "ein-test-summary|compared|skipped|ERROR SUMMARY|^Ok:|^Fail:" \
      "$log" | tail -n 4
  else
    fail=$((fail + 1))
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "FAIL $name (${took} s: timed out after ${limit} s)"
    else
      echo "FAIL $name (${took} s, exit $rc)"
    fi
    tail -n 30 "$log"
  fi
  return "$rc"
}

configure_and_build() {
  local reconf=()
  [ -d "$build/meson-private" ] && reconf=(--reconfigure)
  meson setup "${reconf[@]}" "$build" -Dbuildtype=release -Dwerror=true \
    ${dl:+"$dl"} && ninja -C "$build"
}

# CLI round trip: CPU and CUDA give the same result on random .npy files.
cli_round_trip() {
  local tmp e='b h i d, b h j d -> b h i j'
  tmp=$(mktemp -d)
  python3 scripts/random_npy.py "$tmp/q.npy" 4x8x64x32 f4 1 &&
    python3 scripts/random_npy.py "$tmp/k.npy" 4x8x64x32 f4 2 &&
    "$build/einc" eval "$e" "$tmp/q.npy" "$tmp/k.npy" -o "$tmp/cpu.npy" &&
    "$build/einc" eval -v --backend cuda "$e" "$tmp/q.npy" "$tmp/k.npy" \
      -o "$tmp/cuda.npy" &&
    python3 - "$tmp/cpu.npy" "$tmp/cuda.npy" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
err = np.linalg.norm(a - b) / np.linalg.norm(a)
print("relative difference", err)
sys.exit(0 if err < 1e-5 else 1)
PY
}
# Where the first call's time goes (einc eval -v's phases, issue 16 item
# 4), each a new process: a kernel-only plan and a GEMM plan, with a cold
# kernel cache and then warm (disk hits). Printed into the cli step's log.
first_call_phases() {
  local tmp cache e
  tmp=$(mktemp -d)
  python3 scripts/random_npy.py "$tmp/x.npy" 64x256x64x64 f4 3 &&
    python3 scripts/random_npy.py "$tmp/a.npy" 512x512 f4 4 || return 1
  cache=$(mktemp -d)
  for temp in cold warm; do
    for e in "b c (h h2) (w w2) -> b c h w|x.npy|-D h2=2 -D w2=2 --reduce mean" \
             "i j, j k -> i k|a.npy a.npy|"; do
      IFS='|' read -r expr files flags <<<"$e"
      echo "== first call, $temp kernel cache: $expr"
      # shellcheck disable=SC2086
      (cd "$tmp" && EINC_CACHE_DIR=$cache "$build/einc" eval -v --backend cuda \
        "$expr" $files $flags -o "$tmp/out.npy") || return 1
    done
  done
}
# fp8 (issue 28): e4m3fn and e5m2 bytes with scales, f32 and bf16 out, CPU
# vs CUDA (the same f32 evaluation: equal to 1e-5; bf16 output to 2e-2).
fp8_round_trip() {
  local tmp e='b i j, b j k -> b i k' od
  tmp=$(mktemp -d)
  python3 - "$tmp" <<'PY' || return 1
import sys, numpy as np
rng = np.random.default_rng(8)
a = rng.integers(0, 256, (4, 64, 96), dtype=np.uint8)
a[(a & 0x7f) == 0x7f] = 0x38  # no e4m3fn NaN
b = rng.integers(0, 256, (4, 96, 32), dtype=np.uint8)
b[(b & 0x7c) == 0x7c] = 0x3c  # no e5m2 inf/NaN
np.save(sys.argv[1] + "/a.npy", a)
np.save(sys.argv[1] + "/b.npy", b)
PY
  for od in f32 bf16; do
    for be in cpu cuda; do
      "$build/einc" eval "$e" "$tmp/a.npy" "$tmp/b.npy" --backend $be \
        --dtype float8_e4m3fn,float8_e5m2 --scale 0.37,2.5 --out-dtype $od \
        -o "$tmp/$be.npy" || return 1
    done
    python3 - "$tmp/cpu.npy" "$tmp/cuda.npy" $od <<'PY' || return 1
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
if sys.argv[3] == "bf16":  # '<V2' bits: widen to f32 by hand
    a, b = [(x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            for x in (a, b)]
err = np.linalg.norm(a - b) / np.linalg.norm(a)
print(sys.argv[3], "relative difference", err)
sys.exit(0 if err < (1e-5 if sys.argv[3] == "f32" else 2e-2) else 1)
PY
  done
}
export -f configure_and_build cli_round_trip first_call_phases fp8_round_trip

nvidia-smi -L || true
step build 300 bash -c configure_and_build || {
  echo "gpu_check: $pass passed, $fail failed in $SECONDS s"; exit 1; }
EINC_CACHE_DIR=$(mktemp -d)
export EINC_CACHE_DIR
# The GPU suite's tests run below with their own arguments, once each.
step suite 180 meson test -C "$build" --print-errorlogs --no-rebuild \
  --no-suite gpu
step cuda_faults 60 "$build/tests/test_cuda_faults"
step threads_cuda 90 "$build/tests/test_threads_cuda" --cuda 400
step random_cuda 150 env EIN_CASES="${EIN_CASES:-1100}" \
  "$build/tests/test_eval_random_cuda" --cuda
if command -v compute-sanitizer >/dev/null; then
  step memcheck 150 env EIN_CASES="${SANITIZER_CASES:-100}" \
    EIN_LARGE_CASES=8 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$build/tests/test_eval_random_cuda" --cuda
  step racecheck 100 env EIN_CASES="${RACECHECK_CASES:-40}" \
    EIN_LARGE_CASES=4 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$build/tests/test_eval_random_cuda" --cuda
fi
step cli 60 bash -c 'cli_round_trip && first_call_phases'
# fp8 inputs with scales (issue 28): the C test with CUDA required, and a
# CLI round trip CPU vs CUDA on fp8 bytes (no ml_dtypes needed).
step fp8 60 env EIN_FP8_REQUIRE_CUDA=1 "$build/tests/test_fp8"
step fp8_cli 60 bash -c fp8_round_trip

# ---- Python: CUDA tensors of torch, CuPy and JAX (issue 17) -------------
# tests/python/test_cuda_frameworks.py on einc's wheel, carried because the
# machine has no network (here: python -m build --wheel -o .device/wheels
# -Csetup-args=-Dxla_ffi_include=DIR, DIR from jax.ffi.include_dir(), so
# the wheel has the XLA FFI handler), in a venv that sees the image's
# torch/CuPy/JAX; what is missing skips. test_jax_trace_cuda.py runs
# einc under jax.jit/grad/vmap on the GPU (the FFI handler on XLA's
# stream, issue 25).
python_cuda() {
  python3 -m venv --system-site-packages /tmp/einc-gpu-venv &&
    /tmp/einc-gpu-venv/bin/pip install -q --no-deps --no-index \
      --force-reinstall .device/wheels/einc-*.whl &&
    /tmp/einc-gpu-venv/bin/python -m pytest -q -rs -p no:cacheprovider \
      tests/python/test_cuda_frameworks.py tests/python/test_jax_trace_cuda.py
}
export -f python_cuda
if ls .device/wheels/einc-*.whl >/dev/null 2>&1 &&
   python3 -c 'import pytest, numpy' 2>/dev/null; then
  step python_cuda 120 bash -c python_cuda
else
  echo "SKIP python_cuda (no .device/wheels/einc-*.whl, or no pytest/numpy)"
fi
# ---- end of the Python step ---------------------------------------------
echo "gpu_check: $pass passed, $fail failed in $SECONDS s"
[ "$fail" = 0 ]
