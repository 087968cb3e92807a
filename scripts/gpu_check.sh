#!/usr/bin/env bash
# scripts/gpu_check.sh - the CUDA backend's checks on a machine with a GPU:
# builds einc (release, -Werror), runs the whole test suite including the
# GPU suite, a longer random-expression run on the GPU, the same under
# compute-sanitizer memcheck, and a CLI round trip CPU vs CUDA. Prints one
# line per check and ends with "gpu_check: N passed, N failed".
#
# The device tool's machine has no re2c and no libdlpack-dev: put the
# re2c binary in .device/re2c and the DLPack header in
# .device/include/dlpack/dlpack.h (git-ignored), and name .device in carry.
# Environment: EIN_CASES (default 3000), SANITIZER_CASES (default 300).
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
[ -x .device/re2c ] && export PATH="$root/.device:$PATH"
dl=()
[ -f /usr/include/dlpack/dlpack.h ] || dl=(-Ddlpack_include="$root/.device/include")
pass=0 fail=0
check() { # NAME CMD...
  local name=$1; shift
  if "$@" >"/tmp/gpu_check.$name.log" 2>&1; then
    pass=$((pass + 1)); echo "PASS $name"
  else
    fail=$((fail + 1)); echo "FAIL $name"; tail -n 30 "/tmp/gpu_check.$name.log"
  fi
  grep -E "ein-test-summary|compared|skipped|ERROR SUMMARY" "/tmp/gpu_check.$name.log" | tail -n 4
}
nvidia-smi -L || true
meson setup build-gpu -Dbuildtype=release -Dwerror=true "${dl[@]}" \
  >/tmp/gpu_check.setup.log 2>&1 || { cat /tmp/gpu_check.setup.log; exit 1; }
ninja -C build-gpu >/tmp/gpu_check.build.log 2>&1 ||
  { tail -n 40 /tmp/gpu_check.build.log; exit 1; }
export EINC_CACHE_DIR=$(mktemp -d)
check suite meson test -C build-gpu --print-errorlogs --no-rebuild
check cuda_faults build-gpu/tests/test_cuda_faults
check threads_cuda build-gpu/tests/test_threads_cuda --cuda 400
check random_cuda env EIN_CASES="${EIN_CASES:-3000}" \
  build-gpu/tests/test_eval_random_cuda --cuda
if command -v compute-sanitizer >/dev/null; then
  check memcheck env EIN_CASES="${SANITIZER_CASES:-300}" compute-sanitizer \
    --tool memcheck --error-exitcode 1 build-gpu/tests/test_eval_random_cuda --cuda
  check racecheck env EIN_CASES=100 compute-sanitizer --tool racecheck \
    --error-exitcode 1 build-gpu/tests/test_eval_random_cuda --cuda
fi
# CLI round trip: CPU and CUDA give the same result on random .npy files
tmp=$(mktemp -d)
python3 scripts/random_npy.py "$tmp/q.npy" 4x8x64x32 f4 1 &&
python3 scripts/random_npy.py "$tmp/k.npy" 4x8x64x32 f4 2 &&
check cli_cpu build-gpu/einc eval 'b h i d, b h j d -> b h i j' "$tmp/q.npy" "$tmp/k.npy" -o "$tmp/cpu.npy" &&
check cli_cuda build-gpu/einc eval -v --backend cuda 'b h i d, b h j d -> b h i j' "$tmp/q.npy" "$tmp/k.npy" -o "$tmp/cuda.npy" &&
check cli_same python3 - "$tmp/cpu.npy" "$tmp/cuda.npy" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
err = np.linalg.norm(a - b) / np.linalg.norm(a)
print("relative difference", err)
sys.exit(0 if err < 1e-5 else 1)
PY
echo "gpu_check: $pass passed, $fail failed"
[ "$fail" = 0 ]
