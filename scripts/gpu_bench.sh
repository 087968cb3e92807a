#!/usr/bin/env bash
# scripts/gpu_bench.sh - issue 5's GPU measurements in one command for the
# device tool: builds a release einc, prints the host overhead, runs the
# suite against torch, torch.compile and JAX (bench/run.py --target gpu),
# the device model's predicted times against the measured ones
# (bench/predicted.py --target gpu, issue 28), and copies the result files
# to $OUT when the device tool sets it. GPU_BENCH_PREDICTED_ONLY=1 runs
# only the last (a few minutes).
#
# As for gpu_check.sh: carry .device (re2c and the DLPack header).
# Arguments are passed to bench/run.py (e.g. --cases gemm outer).
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
[ -x .device/re2c ] && export PATH="$root/.device:$PATH"
dl=()
[ -f /usr/include/dlpack/dlpack.h ] || dl=(-Ddlpack_include=.device/include) # relative: Meson refuses absolute paths inside the tree
nvidia-smi -L || true
meson setup build-bench -Dbuildtype=release -Dtests=false "${dl[@]}" \
  >/tmp/gpu_bench.setup.log 2>&1 || { cat /tmp/gpu_bench.setup.log; exit 1; }
ninja -C build-bench einc host_overhead >/tmp/gpu_bench.build.log 2>&1 ||
  { tail -n 40 /tmp/gpu_bench.build.log; exit 1; }
export EINC_CACHE_DIR=$(mktemp -d)
build-bench/host_overhead 100000
status=0
if [ -z "${GPU_BENCH_PREDICTED_ONLY:-}" ]; then
  python3 bench/run.py --target gpu --einc build-bench/einc "$@"
  status=$?
fi
python3 bench/predicted.py --target gpu --einc build-bench/einc --runs 20 \
  --note "Measured on $(nvidia-smi -L 2>/dev/null | head -1)" || status=1
if [ -n "${OUT:-}" ]; then cp bench/results/*.md "$OUT"/ 2>/dev/null; fi
exit $status
