#!/usr/bin/env bash
# cuda_libs_cli.sh EINC MAJOR - `einc eval --backend cuda` when the CUDA
# libraries cannot be loaded (EINC_CUDA_LIBS_DISABLE, EINC_CUDART naming a
# missing file): exit status 1, like any other device failure, and a message
# that names the library and how to install it. Planning for CUDA and CPU
# evaluation need no CUDA library. With the libraries, the run ends as the
# machine allows: a result on a GPU, else "no CUDA device". cuBLAS and
# NVRTC are opened by the first plan that needs them, so without them a
# backend still opens: a transpose runs without cuBLAS, a GEMM fails
# naming it; with an empty kernel cache a transpose fails naming NVRTC.
set -u
EINC=${1:?usage: cuda_libs_cli.sh path/to/einc MAJOR}
MAJOR=${2:?usage: cuda_libs_cli.sh path/to/einc MAJOR}
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# zeros_npy ROWS COLS FILE: a float32 .npy of zeros.
zeros_npy() {
  local h="{'descr': '<f4', 'fortran_order': False, 'shape': ($1, $2), }"
  while [ $(((10 + ${#h} + 1) % 64)) != 0 ]; do h="$h "; done
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((${#h} + 1)))\\x00"
    printf '%s\n' "$h"; head -c $(($1 * $2 * 4)) /dev/zero; } >"$3"
}
zeros_npy 2 3 "$work/a.npy"
zeros_npy 256 256 "$work/m.npy" # 2 * 256^3 flops: a cuBLAS GEMM

# check WHAT STATUS STDERR-PATTERN -- ARGS...   (grep -E; '' : no stderr)
check() {
  local what=$1 want=$2 pattern=$3
  shift 4
  rm -f "$work/o.npy"
  "$EINC" "$@" >"$work/out" 2>"$work/err"
  local status=$?
  local err_ok
  if [ -z "$pattern" ]; then [ ! -s "$work/err" ]; else
    grep -qE -- "$pattern" "$work/err"; fi && err_ok=1 || err_ok=0
  if [ "$status" = "$want" ] && [ "$err_ok" = 1 ] &&
     { [ "$want" = 0 ] || [ ! -e "$work/o.npy" ]; }; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL: %s: einc %s\n  status %s (want %s)\n  stderr: %s\n' \
      "$what" "$*" "$status" "$want" "$(cat "$work/err")" >&2
  fi
}

eval_cuda=(eval --backend cuda 'i j -> j i' "$work/a.npy" -o "$work/o.npy")
rt="libcudart\\.so\\.$MAJOR"
EINC_CUDA_LIBS_DISABLE=1 check "disabled" 1 \
  "^einc: error: the CUDA backend needs $rt \(the CUDA runtime, from CUDA $MAJOR\), which could not be loaded: loading is disabled by EINC_CUDA_LIBS_DISABLE=1; install the CUDA $MAJOR toolkit, or .pip install .*nvidia-cuda-runtime.* and add its lib directory to LD_LIBRARY_PATH" \
  -- "${eval_cuda[@]}"
EINC_CUDART=$work/missing/libcudart.so check "EINC_CUDART" 1 \
  "needs $rt .*: $work/missing/libcudart\\.so: cannot open shared object file.*\(named by EINC_CUDART\)" \
  -- "${eval_cuda[@]}"
EINC_CUDA_LIBS_DISABLE=1 check "plan without libraries" 0 \
  "^einc: note: predicted times are for h100: no CUDA GPU found" \
  -- plan --backend cuda 'i j -> j i' 2x3
EINC_CUDA_LIBS_DISABLE=1 check "CPU eval without libraries" 0 "" \
  -- eval 'i j -> j i' "$work/a.npy" -o "$work/o.npy"
gemm_cuda=(eval --backend cuda 'i j, j k -> i k' "$work/m.npy" "$work/m.npy"
           -o "$work/o.npy")
no_blas=$work/missing/libcublas.so no_nvrtc=$work/missing/libnvrtc.so
empty_cache=$work/empty-cache
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  check "GPU eval" 0 "" -- "${eval_cuda[@]}"
  EINC_CUBLAS=$no_blas check "transpose without cuBLAS" 0 "" -- "${eval_cuda[@]}"
  EINC_CUBLAS=$no_blas check "GEMM without cuBLAS" 1 \
    "^einc: error: the CUDA backend needs libcublas\\.so\\.$MAJOR .*EINC_CUBLAS" \
    -- "${gemm_cuda[@]}"
  EINC_NVRTC=$no_nvrtc EINC_CACHE_DIR=$empty_cache \
    check "kernel compile without NVRTC" 1 \
    "^einc: error: the CUDA backend needs libnvrtc\\.so\\.$MAJOR .*EINC_NVRTC" \
    -- "${eval_cuda[@]}"
else
  no_gpu="^einc: error: (no usable CUDA device|CUDA device 0 does not exist)"
  check "no GPU" 1 "$no_gpu" -- "${eval_cuda[@]}"
  # The backend asks for cuBLAS and NVRTC only when a plan needs them.
  EINC_CUBLAS=$no_blas check "no GPU, no cuBLAS" 1 "$no_gpu" \
    -- "${gemm_cuda[@]}"
  EINC_NVRTC=$no_nvrtc check "no GPU, no NVRTC" 1 "$no_gpu" \
    -- "${eval_cuda[@]}"
fi

echo "ein-test-summary: cuda_libs_cli: $passed passed, $failed failed"
[ "$failed" = 0 ]
