#!/usr/bin/env bash
# no_cuda_needed.sh FILE... - fails when a binary lists a CUDA library
# (cudart, cuBLAS, NVRTC, the driver) among its NEEDED entries: einc opens
# them at run time (runtime/cuda/cuda_libs.h), so that libein.so and einc
# load on machines without them. Skipped (77) without readelf.
set -u
command -v readelf >/dev/null || { echo "no readelf: skipped"; exit 77; }
passed=0 failed=0
for f in "$@"; do
  needed=$(readelf -d "$f" 2>&1 | grep '(NEEDED)')
  if [ -z "$needed" ]; then
    echo "FAIL: readelf -d $f lists no NEEDED entry (not a dynamic binary?)" >&2
    failed=$((failed + 1))
  elif cuda=$(grep -iE 'cuda|cublas|nvrtc' <<<"$needed"); then
    echo "FAIL: $f needs a CUDA library:" >&2
    echo "$cuda" >&2
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done
echo "ein-test-summary: no_cuda_needed: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
