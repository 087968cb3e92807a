#!/usr/bin/env bash
# scripts/gpu_check.sh - everything a GPU machine can check of einc, in one
# command of at most 8 minutes on one H100 or H200 (issue 34 item 7),
# with one results file:
#   build      release, -Werror, outside the source tree
#   suite      meson test with CUDA present (all but the GPU suite's tests,
#              which run below with their own arguments)
#   cuda_faults, random_cuda, threads_cuda   the GPU suite's tests
#   grad_cuda  gradient programs run on the GPU (test_grad on CUDA)
#   memcheck, racecheck   compute-sanitizer on a sample of random cases
#   cli        CPU vs CUDA round trip, then the first call's phases
#   fp8, fp8_cli   fp8 through cuBLASLt (the C test, then the CLI)
#   devices    a sliced plan over every GPU, where there are several
#   python     torch CUDA tensors through the custom operator and the
#              lowering (torch.compile), CuPy, JAX's FFI on the GPU stream
#              (tests/python/test_cuda_frameworks.py, test_jax_trace_cuda.py)
#   bench      bench/run.py --target gpu: einc against torch,
#              torch.compile and JAX (what installs), cliff cases first
#   kernel_model, predicted   the per-kernel model's time (computed on the
#              CPU beside the other steps) against the measured time per
#              case: bench/predicted.py --target gpu --kernel-model, so the
#              run calibrates the model
#
#   bash scripts/gpu_check.sh              on the GPU machine
#   bash scripts/gpu_check.sh --rehearse --build DIR
#       the same script on the emulated device (no GPU): the steps that
#       need real CUDA say SKIP, the others run with --backend emu at small
#       sizes, in DIR's existing build (the meson test gpu_check_rehearsal
#       runs this in CI, about a minute)
#
# The results file, gpu_check.results.md, holds the step table, the bench
# and predicted tables and the end of every step's log; the logs
# themselves go to gpu_check.logs.tar.gz beside it. Both land in $OUT
# when the device tool sets it (it brings back at most 8 files), else in
# the log directory named at the start.
#
# Every step runs under `timeout`: none gets more than its limit, nor more
# than the time left of GPU_CHECK_BUDGET seconds (default 470, or 240 for
# a rehearsal); a step that times out or is not reached counts as failed.
# The order puts what only a GPU can tell first. Ends with
# "gpu_check: N passed, N failed, N skipped".
#
# From a clean clone, the README's build needs only meson, ninja, a C
# compiler and the DLPack header. The device machine has no re2c (the
# committed src/lexer/lexer_re2c.c serves) and no libdlpack-dev: the
# script takes dlpack/dlpack.h from .device/include, or else from the
# DLPack header torch or CuPy ship (as a path outside the source tree,
# which Meson accepts). The Python steps build the extension with
# -Dpython=enabled (meson >= 1.3, as pip brings) and import it from the
# build, or install a wheel carried in .device/wheels.
# Environment: EIN_CASES (default 400), SANITIZER_CASES (40),
# RACECHECK_CASES (20), GPU_CHECK_BENCH_CASES (the cases bench runs),
# GPU_CHECK_BUILD (default /tmp/einc-gpu-check).
set -u
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
[ -x .device/re2c ] && export PATH="$root/.device:$PATH" # carried, if any
rehearse=0 prebuilt=
while [ $# -gt 0 ]; do
  case $1 in
    --rehearse) rehearse=1 ;;
    --build) prebuilt=$2; shift ;;
    *) echo "usage: gpu_check.sh [--rehearse] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done
be=cuda
[ "$rehearse" = 1 ] && be=emu
build=${prebuilt:-${GPU_CHECK_BUILD:-/tmp/einc-gpu-check}}
case $build in /*) ;; *) build=$root/$build ;; esac
budget=${GPU_CHECK_BUDGET:-$([ "$rehearse" = 1 ] && echo 240 || echo 470)}
[ -n "${TMPDIR:-}" ] && mkdir -p "$TMPDIR" # the meson test's, in the build
logs=$(mktemp -d)
export build be rehearse logs root
echo "gpu_check: mode $([ "$rehearse" = 1 ] && echo rehearsal || echo GPU)," \
  "build in $build, logs in $logs"
pass=0 fail=0 skipped=0
table=()

# step NAME LIMIT CMD...: CMD (a program; the functions below run through
# bash -c) under a timeout of LIMIT seconds, less if less of the budget is
# left, its output in $logs/gpu_check.NAME.log.
step() {
  local name=$1 limit=$2; shift 2
  local log="$logs/gpu_check.$name.log" left=$((budget - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    fail=$((fail + 1)); echo "FAIL $name (not run: the time budget is spent)"
    table+=("| $name | FAIL | 0 | not run: the time budget is spent |")
    return 1
  fi
  local t0=$SECONDS rc=0 note=
  timeout -k 10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - t0))
  if [ "$rc" = 0 ]; then
    pass=$((pass + 1)); echo "PASS $name (${took} s)"
    grep -E "ein-test-summary|compared|skipped|ERROR SUMMARY|^Ok:|^Fail:" \
      "$log" | tail -n 4
  else
    fail=$((fail + 1)) note="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && note="timed out after ${limit} s"
    echo "FAIL $name (${took} s, $note)"
    tail -n 30 "$log"
  fi
  table+=("| $name | $([ "$rc" = 0 ] && echo PASS || echo FAIL) | $took | $note |")
  return "$rc"
}

# skip NAME WHY: a step this run cannot take, said in the results.
skip() {
  skipped=$((skipped + 1))
  echo "SKIP $1 ($2)"
  echo "skipped: $2" >"$logs/gpu_check.$1.log"
  table+=("| $1 | SKIP | 0 | $2 |")
}
# shellcheck source=scripts/gpu_check_steps.sh
. "$root/scripts/gpu_check_steps.sh"

nvidia-smi -L >"$logs/gpu_check.gpus.log" 2>&1 || true
cat "$logs/gpu_check.gpus.log"
ngpu=$(grep -c '^GPU ' "$logs/gpu_check.gpus.log")
if [ "$rehearse" = 1 ] && [ -x "$build/einc" ]; then
  skip build "rehearsal: the existing build in $build"
else
  step build 240 bash -c configure_and_build || {
    write_results; exit 1; }
fi
EINC_CACHE_DIR=$(mktemp -d)
export EINC_CACHE_DIR
start_kernel_model
if [ "$rehearse" = 1 ]; then
  skip suite "rehearsal: CI runs the suite itself"
else
  # The emulated-device random suite (444 s on CI's 2 cores, the suite's
  # longest by far) runs the sanitizer builds' sample here: the GPU
  # itself runs the random cases below.
  step suite 150 env EIN_CASES=300 EIN_LARGE_CASES=18 EIN_COMPLEX_CASES=60 \
    EIN_COMPLEX_LARGE_CASES=6 EINC_EMU_THREADS=8 meson test -C "$build" \
    --print-errorlogs --no-rebuild --no-suite gpu --no-suite rehearsal
fi
gpu_steps
step cli 60 bash -c 'cli_round_trip && first_call_phases'
step fp8 40 env EIN_FP8_REQUIRE_CUDA=$((1 - rehearse)) "$build/tests/test_fp8"
step fp8_cli 40 bash -c fp8_round_trip
if [ "$rehearse" = 1 ] || [ "$ngpu" -gt 1 ]; then
  step devices 40 bash -c several_devices
else
  skip devices "one GPU"
fi
python_steps
bench_steps
if [ "$rehearse" = 0 ]; then
  step threads_cuda 60 "$build/tests/test_threads_cuda" --cuda 200
  sanitizer_steps
fi
write_results
[ "$fail" = 0 ]
