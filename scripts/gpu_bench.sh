#!/usr/bin/env bash
# scripts/gpu_bench.sh - issue 5's GPU measurements in one command for the
# device tool: builds a release einc, prints the host overhead, runs the
# suite against torch, torch.compile and JAX (bench/run.py --target gpu),
# and copies the result file to $OUT when the device tool sets it.
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
python3 bench/run.py --target gpu --einc build-bench/einc "$@"
status=$?
if [ -n "${OUT:-}" ]; then cp bench/results/*.md "$OUT"/ 2>/dev/null; fi
exit $status
