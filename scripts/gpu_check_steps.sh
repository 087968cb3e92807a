# shellcheck shell=bash disable=SC2154
# scripts/gpu_check_steps.sh - the steps of scripts/gpu_check.sh, sourced
# by it (not run alone): each function is one step or a group of steps.
# The ones a step runs through `bash -c` are exported at the end. They
# read $build, $be (cuda, or emu in a rehearsal), $rehearse, $logs and
# $root, and call step and skip from gpu_check.sh.

# The DLPack header's directory: .device/include (carried), the system's,
# or the copy torch or CuPy ship (outside the source tree, so Meson takes
# the absolute path). Prints nothing where the system has it.
dlpack_option() {
  [ -f /usr/include/dlpack/dlpack.h ] && return 0
  if [ -f .device/include/dlpack/dlpack.h ]; then
    echo "-Ddlpack_include=.device/include" # relative: Meson refuses
    return 0                                # absolute paths inside the tree
  fi
  # torch's ATen/dlpack.h is the same header under another name: copied
  # to dlpack/dlpack.h in a directory of its own
  python3 - <<'PY'
import glob, importlib.util, os, shutil, tempfile
where = (("torch", "include/dlpack/dlpack.h"),
         ("cupy", "_core/include/cupy/dlpack/dlpack.h"),
         ("jaxlib", "include/dlpack/dlpack.h"),
         ("torch", "include/ATen/dlpack.h"))
for mod, sub in where:
    spec = importlib.util.find_spec(mod)
    if spec is None or not spec.submodule_search_locations:
        continue
    for base in spec.submodule_search_locations:
        for h in glob.glob(os.path.join(base, sub)):
            d = tempfile.mkdtemp(prefix="einc-dlpack-")
            os.mkdir(os.path.join(d, "dlpack"))
            shutil.copy(h, os.path.join(d, "dlpack", "dlpack.h"))
            print("-Ddlpack_include=" + d)
            raise SystemExit
PY
}

configure_and_build() {
  local reconf=() dl
  dl=$(dlpack_option)
  [ -d "$build/meson-private" ] && reconf=(--reconfigure)
  meson setup "${reconf[@]}" "$build" -Dbuildtype=release -Dwerror=true \
    ${dl:+"$dl"} && ninja -C "$build"
}

# CLI round trip: CPU and the device give the same result on random .npy
# files (smaller in a rehearsal: the emulated device runs on the host).
cli_round_trip() {
  local tmp e='b h i d, b h j d -> b h i j' s=4x8x64x32
  [ "$rehearse" = 1 ] && s=2x2x16x8
  tmp=$(mktemp -d)
  python3 scripts/random_npy.py "$tmp/q.npy" $s f4 1 &&
    python3 scripts/random_npy.py "$tmp/k.npy" $s f4 2 &&
    "$build/einc" eval "$e" "$tmp/q.npy" "$tmp/k.npy" -o "$tmp/cpu.npy" &&
    "$build/einc" eval -v --backend "$be" "$e" "$tmp/q.npy" "$tmp/k.npy" \
      -o "$tmp/dev.npy" &&
    python3 scripts/npy_diff.py "$tmp/cpu.npy" "$tmp/dev.npy" 1e-5
}
# Where the first call's time goes (einc eval -v's phases, issue 16 item
# 4), each a new process: a kernel-only plan and a GEMM plan, with a cold
# kernel cache and then warm (disk hits). Printed into the cli step's log.
first_call_phases() {
  local tmp cache e x=64x256x64x64 a=512x512
  [ "$rehearse" = 1 ] && x=2x8x16x16 a=64x64
  tmp=$(mktemp -d)
  python3 scripts/random_npy.py "$tmp/x.npy" $x f4 3 &&
    python3 scripts/random_npy.py "$tmp/a.npy" $a f4 4 || return 1
  cache=$(mktemp -d)
  for temp in cold warm; do
    for e in "b c (h h2) (w w2) -> b c h w|x.npy|-D h2=2 -D w2=2 --reduce mean" \
             "i j, j k -> i k|a.npy a.npy|"; do
      IFS='|' read -r expr files flags <<<"$e"
      echo "== first call, $temp kernel cache: $expr"
      # shellcheck disable=SC2086
      (cd "$tmp" && EINC_CACHE_DIR=$cache "$build/einc" eval -v \
        --backend "$be" "$expr" $files $flags -o "$tmp/out.npy") || return 1
    done
  done
}
# fp8 (issue 28): e4m3fn and e5m2 bytes with scales, f32 and bf16 out, CPU
# vs the device (cuBLASLt: the same f32 evaluation, equal to 1e-5; bf16
# output to 2e-2).
fp8_round_trip() {
  local tmp e='b i j, b j k -> b i k' od
  tmp=$(mktemp -d)
  python3 scripts/random_npy.py "$tmp/a.npy" 4x64x96 e4m3 8 &&
    python3 scripts/random_npy.py "$tmp/b.npy" 4x96x32 e5m2 9 || return 1
  for od in f32 bf16; do
    for b in cpu "$be"; do
      "$build/einc" eval "$e" "$tmp/a.npy" "$tmp/b.npy" --backend "$b" \
        --dtype float8_e4m3fn,float8_e5m2 --scale 0.37,2.5 --out-dtype $od \
        -o "$tmp/$b.npy" || return 1
    done
    python3 scripts/npy_diff.py "$tmp/cpu.npy" "$tmp/$be.npy" \
      "$([ $od = f32 ] && echo 1e-5 || echo 2e-2)" $od || return 1
  done
}
# A sliced plan spread over every device (ein_options.devices), against
# the CPU: the inputs copied to each device, the partials summed on
# device 0. A rehearsal uses two emulated devices.
several_devices() {
  local tmp n e='i j, j k -> i k'
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  [ "$rehearse" = 1 ] && n=2 && export EINC_EMU_DEVICES=2
  tmp=$(mktemp -d)
  local j=$((64 * n)) # 2n slices of 32, whatever n
  python3 scripts/random_npy.py "$tmp/a.npy" "96x$j" f4 5 &&
    python3 scripts/random_npy.py "$tmp/b.npy" "${j}x64" f4 6 &&
    "$build/einc" eval "$e" "$tmp/a.npy" "$tmp/b.npy" -o "$tmp/cpu.npy" &&
    "$build/einc" eval "$e" "$tmp/a.npy" "$tmp/b.npy" --backend "$be" \
      --slice "j:$((2 * n))" --devices "$n" -o "$tmp/dev.npy" &&
    python3 scripts/npy_diff.py "$tmp/cpu.npy" "$tmp/dev.npy" 1e-5 \
      "$n devices:"
}

gpu_steps() {
  if [ "$rehearse" = 1 ]; then
    skip cuda_faults "rehearsal: device faults need a GPU"
    # the same program as the suite's eval_random_emu, whose 420 named
    # evaluations alone take most of a minute on CI's machine
    skip random_cuda "rehearsal: CI's eval_random_emu runs this program"
    skip grad_cuda "rehearsal: CI's grad_emu runs this program"
    return
  fi
  step cuda_faults 40 "$build/tests/test_cuda_faults"
  step random_cuda 90 env EIN_CASES="${EIN_CASES:-400}" \
    "$build/tests/test_eval_random_cuda" --cuda
  # gradient programs on the GPU (ein_grad_execute: every step a CUDA
  # plan, temporaries from the stream-ordered pool), as grad_emu checks
  # them on the emulated device
  step grad_cuda 60 env EIN_GRAD_BACKEND=cuda EIN_CASES=150 \
    "$build/tests/test_grad"
}

sanitizer_steps() {
  if ! command -v compute-sanitizer >/dev/null; then
    skip memcheck "no compute-sanitizer"
    skip racecheck "no compute-sanitizer"
    return
  fi
  step memcheck 60 env EIN_CASES="${SANITIZER_CASES:-40}" \
    EIN_LARGE_CASES=4 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$build/tests/test_eval_random_cuda" --cuda
  step racecheck 45 env EIN_CASES="${RACECHECK_CASES:-20}" \
    EIN_LARGE_CASES=2 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$build/tests/test_eval_random_cuda" --cuda
}

# ---- Python: CUDA tensors of torch, CuPy and JAX (issues 17, 25) --------
# einc's extension built with -Dpython=enabled (meson >= 1.3; with XLA's
# FFI header where jax imports, so einc runs under jax.jit on XLA's
# stream), assembled with the package's modules in $build-py/site; or a
# wheel carried in .device/wheels. The image's python3 has torch, CuPy
# and JAX; what is missing skips.
python_build() {
  local dir=$build-py dl reconf=()
  dl=$(dlpack_option)
  [ -d "$dir/meson-private" ] && reconf=(--reconfigure)
  meson setup "${reconf[@]}" "$dir" -Dbuildtype=release -Dpython=enabled \
    -Dtests=false ${dl:+"$dl"} && ninja -C "$dir" python/_einc.abi3.so &&
    rm -rf "$dir/site" && mkdir -p "$dir/site" &&
    cp -r python/einc "$dir/site/" && cp "$dir"/python/_einc*.so "$dir/site/einc/"
}
python_cuda() {
  local site=$build-py/site
  if ls .device/wheels/einc-*.whl >/dev/null 2>&1; then
    site=/tmp/einc-gpu-site
    python3 -m pip install -q --no-deps --no-index --target "$site" \
      --upgrade .device/wheels/einc-*.whl || return 1
  fi
  PYTHONPATH=$site EINC_CLI=$build/einc python3 -m pytest -q -rs \
    -p no:cacheprovider tests/python/test_cuda_frameworks.py \
    tests/python/test_jax_trace_cuda.py
}
python_steps() {
  if [ "$rehearse" = 1 ]; then
    skip python "rehearsal: needs CUDA tensors (CI tests the package itself)"
    return
  fi
  if ! python3 -c 'import pytest, numpy' 2>/dev/null; then
    skip python "no pytest or numpy"
    return
  fi
  if ! ls .device/wheels/einc-*.whl >/dev/null 2>&1; then
    step python_build 120 bash -c python_build || return
  fi
  step python 120 bash -c python_cuda
}

# ---- Speed: the bench against the peers, the model against the clock ----
# The per-kernel model runs on the CPU (the emulated device counts every
# kernel at the case's full size: minutes a large case), so it starts in
# the background at once and the predicted step reads what it finished.
# A rehearsal prices two cuBLAS cases only (no kernel to count at full
# size on a 2-core machine): the plumbing, not the figures.
start_kernel_model() {
  local cases=() lim=$((budget - SECONDS - 60))
  [ "$rehearse" = 1 ] && cases=(--cases gemm moe) lim=60
  [ "$lim" -lt 30 ] && return
  # its own duration into kernel_model.seconds: wait only says when
  # the steps before it were done
  {
    local t0 rc=0
    t0=$(date +%s)
    EINC_EMU_THREADS=2 timeout -k 5 "$lim" python3 bench/predicted.py \
      --target gpu --einc "$build/einc" --kernel-model-only \
      "$logs/kernel_model.json" --jobs 4 --time-limit $((lim - 10)) \
      "${cases[@]}" >"$logs/gpu_check.kernel_model.log" 2>&1 || rc=$?
    echo $(($(date +%s) - t0)) >"$logs/kernel_model.seconds"
    exit $rc
  } &
  model_pid=$!
}
# The background model's result as a step of its own.
finish_kernel_model() {
  local rc=0
  if [ -z "${model_pid:-}" ]; then
    skip kernel_model "no time left to start it"
    return
  fi
  wait "$model_pid" || rc=$?
  local n took
  took=$(cat "$logs/kernel_model.seconds" 2>/dev/null || echo '?')
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' \
    "$logs/kernel_model.json" 2>/dev/null || echo 0)
  if [ "$rc" = 0 ] && [ "$n" -gt 0 ]; then
    pass=$((pass + 1)); echo "PASS kernel_model ($took s, $n cases priced)"
    table+=("| kernel_model | PASS | $took | $n cases priced |")
  else
    fail=$((fail + 1)); echo "FAIL kernel_model ($took s, exit $rc, $n cases)"
    table+=("| kernel_model | FAIL | $took | exit $rc, $n cases priced |")
  fi
}
bench_steps() {
  if [ "$rehearse" = 1 ]; then
    step bench 30 python3 -m py_compile bench/run.py bench/torch_ref.py \
      bench/predicted.py bench/cases.py
    finish_kernel_model
    skip predicted "rehearsal: einc bench needs a GPU"
    return
  fi
  # The cases that had cliffs first, so a short budget still sees them.
  # shellcheck disable=SC2086
  step bench 150 python3 bench/run.py --target gpu --einc "$build/einc" \
    --runs 10 --out "$logs/bench.md" --cases ${GPU_CHECK_BENCH_CASES:-gemm \
    qkv_split bilinear tn5 pool_mean colmax outer nchw_nhwc diag patchify}
  finish_kernel_model
  step predicted 90 python3 bench/predicted.py --target gpu \
    --einc "$build/einc" --runs 10 --out "$logs/predicted.md" \
    --kernel-model-from "$logs/kernel_model.json" \
    --note "gpu_check.sh on $(nvidia-smi -L 2>/dev/null | head -n 1)"
}

# ---- The results file ---------------------------------------------------
write_results() {
  local r="$logs/gpu_check.results.md" f
  {
    echo "# gpu_check $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Mode: $([ "$rehearse" = 1 ] && echo 'rehearsal (emulated device)' || echo GPU);" \
      "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?');" \
      "$SECONDS s of a $budget s budget; $pass passed, $fail failed," \
      "$skipped skipped."
    echo
    sed 's/^/    /' "$logs/gpu_check.gpus.log"
    echo
    echo "| step | result | s | note |"
    echo "|---|---|---|---|"
    printf '%s\n' "${table[@]}"
    for f in bench predicted; do
      [ -f "$logs/$f.md" ] && { echo; sed 's/^# /## /' "$logs/$f.md"; }
    done
    for f in "$logs"/gpu_check.*.log; do
      echo; echo "## $(basename "$f" .log | sed 's/^gpu_check\.//') (log, last 40 lines)"
      echo; echo '```'; tail -n 40 "$f"; echo '```'
    done
  } >"$r"
  (cd "$logs" && tar -czf gpu_check.logs.tar.gz \
    --exclude=gpu_check.logs.tar.gz --exclude=gpu_check.results.md -- *)
  if [ -n "${OUT:-}" ]; then
    cp "$r" "$logs/gpu_check.logs.tar.gz" "$OUT"/
    r="$OUT/gpu_check.results.md"
  fi
  echo "gpu_check: $pass passed, $fail failed, $skipped skipped in" \
    "$SECONDS s; results in $r"
}

export -f dlpack_option configure_and_build cli_round_trip first_call_phases \
  fp8_round_trip several_devices python_build python_cuda
