#!/usr/bin/env bash
# cuda_src_compiles.sh EINC - `einc cuda-src` prints one file that nvcc
# compiles (-c, for sm_80 and sm_90): programs of several kernels (a split
# reduction's two passes, several steps, vectorised variants) each define
# ein_main and struct ein_main_step, which the printout keeps apart.
# Skipped (77) without nvcc; needs no GPU.
set -u
einc=$1
. "$(dirname "$0")/find_nvcc.sh"
[ -n "$nvcc" ] || { echo "no nvcc: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
cases=(
  "b s d -> d|4x128x96|--reduce max --dtype f16"      # split: two passes
  "b s d -> d|4x4096x8|--reduce sum"                  # split, f32
  "b h s d -> b s h d|2x4x64x32|--dtype f16"          # transpose (+ vec)
  "i j -> j i|1023x1025|--dtype bf16"                 # odd pitch: runs
  "i j, j k -> i k|3x5 5x7|"                          # small: kernels
  "b i, b j -> b i j|8x16 8x32|--dtype bf16"          # outer product map
  "a b c -> c a|8x16x32|--reduce max"                 # reduce + transpose
  "i j, j k, k l -> i l|4x6 6x8 8x3|--dtype f64"      # several steps
)
n=0
for c in "${cases[@]}"; do
  IFS='|' read -r expr shapes opts <<<"$c"
  n=$((n + 1))
  # shellcheck disable=SC2086 # shapes and options are word lists
  if ! "$einc" cuda-src "$expr" $shapes $opts >"$tmp/k$n.cu" 2>"$tmp/err"; then
    echo "FAIL: einc cuda-src '$expr' $shapes $opts: $(cat "$tmp/err")" >&2
    failed=$((failed + 1))
    continue
  fi
  kernels=$(grep -c '^extern "C" __global__' "$tmp/k$n.cu")
  for arch in sm_80 sm_90; do
    if log=$("$nvcc" -std=c++17 -arch="$arch" -c -o "$tmp/k$n.o" \
      "$tmp/k$n.cu" 2>&1); then
      passed=$((passed + 1))
    else
      echo "FAIL: nvcc $arch: einc cuda-src '$expr' $shapes $opts" \
        "($kernels kernels):" >&2
      echo "$log" | grep -i error | head -5 >&2
      failed=$((failed + 1))
    fi
  done
done
echo "ein-test-summary: cuda_src_compiles: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
