#!/usr/bin/env bash
# grad_kernels.sh PROGRAM - the generated kernels of every elementwise
# gradient step in every dtype (tests/grad_kernels_src.c prints them as
# one file) compiled by nvcc for sm_80 and sm_90, as NVRTC would compile
# each after the prelude. Skipped (77) without nvcc; needs no GPU.
set -u
prog=$1
. "$(dirname "$0")/find_nvcc.sh"
[ -n "$nvcc" ] || { echo "no nvcc: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
if ! "$prog" >"$tmp/grad.cu"; then
  echo "FAIL: $prog" >&2
  failed=$((failed + 1))
fi
kernels=$(grep -c '^extern "C" __global__' "$tmp/grad.cu")
for arch in sm_80 sm_90; do
  if log=$("$nvcc" -std=c++17 -arch="$arch" -c -o "$tmp/grad.o" \
    "$tmp/grad.cu" 2>&1); then
    passed=$((passed + 1))
  else
    echo "FAIL: nvcc $arch: $kernels gradient kernels:" >&2
    echo "$log" | grep -i error | head -10 >&2
    failed=$((failed + 1))
  fi
done
echo "ein-test-summary: grad_kernels: $passed passed, $failed failed" \
  "($kernels kernels)"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
