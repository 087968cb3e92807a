#!/usr/bin/env bash
# setup.sh - install what einc needs, build it, and run the main job: the
# plan of an attention block (steps, FLOPs, predicted time on the device it targets) and its
# evaluation on random .npy inputs on the CPU, on the emulated CUDA device,
# and on GPU 0 when there is one (each checked against the CPU result).
# Also installs the Python package einc into the virtual environment
# build/venv (scripts/python_env.sh) and runs it once.
set -eu
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends meson ninja-build \
    pkg-config cmake re2c libdlpack-dev libopenblas-dev libdnnl-dev \
    python3 python3-dev python3-venv >/dev/null
fi
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
bash scripts/python_env.sh build/venv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in q k v; do
  python3 scripts/random_npy.py "$work/$t.npy" 4x8x256x64 f4 "$RANDOM"
done
set -x
build/einc plan 'b h i d, b h j d -> b h i j' 8x16x2048x128 8x16x2048x128 --dtype bf16
build/einc plan --backend cuda 'b s d -> b s' 32x4096x1024 --reduce sum --dtype bf16
build/einc plan 'b i, i j k, b j -> b k' 4096x256 256x256x256 4096x256
build/einc eval -v 'b h i d, b h j d -> b h i j' "$work/q.npy" "$work/k.npy" -o "$work/s.npy"
build/einc eval -v 'b h i j, b h j d -> b i (h d)' "$work/s.npy" "$work/v.npy" -o "$work/o.npy"
build/einc eval -v 'b i (h d) -> b h' "$work/o.npy" -D h=8 --reduce max -o "$work/m.npy"
build/examples/example_attention
build/venv/bin/python - <<'PY'
import numpy as np, einc
q = k = np.ones((4, 8, 256, 64), np.float32)
s = einc.einsum('b h i d, b h j d -> b h i j', q, k)
print('einc.einsum from Python:', s.shape, s.dtype, float(s[0, 0, 0, 0]))
PY
# The CUDA path: on the emulated device always (the generated kernels and
# cuBLAS calls run on the CPU), on GPU 0 when there is one; each result is
# checked against the CPU's.
devices=emu
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  devices="emu cuda"
fi
for dev in $devices; do
  build/einc eval -v --backend "$dev" 'b h i d, b h j d -> b h i j' "$work/q.npy" "$work/k.npy" -o "$work/s_$dev.npy"
  python3 - "$work/s.npy" "$work/s_$dev.npy" "$dev" <<'PY'
import array, math, sys
def load(p):  # C-order little-endian f4, as einc writes it
    data = open(p, "rb").read()
    hlen = int.from_bytes(data[8:10], "little")
    return array.array("f", data[10 + hlen:])
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
norm = math.sqrt(sum(x * x for x in a))
print("%s vs CPU relative difference: %.3g" % (sys.argv[3], diff / norm))
sys.exit(0 if len(a) == len(b) and diff <= 1e-5 * norm else 1)
PY
done
