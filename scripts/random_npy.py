#!/usr/bin/env python3
"""random_npy.py OUT.npy SHAPE [DTYPE] [SEED] - writes a .npy file of
uniform random values in [-1, 1) (DTYPE f4 or f8; default f4), using only
the standard library, so the main job needs no numpy. SHAPE is 8x16x64."""
import random
import struct
import sys

path, shape = sys.argv[1], [int(s) for s in sys.argv[2].split("x")]
code = {"f4": "f", "f8": "d"}[sys.argv[3] if len(sys.argv) > 3 else "f4"]
random.seed(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
n = 1
for s in shape:
    n *= s
header = "{'descr': '<%s', 'fortran_order': False, 'shape': (%s), }" % (
    "f4" if code == "f" else "f8",
    "".join("%d," % s for s in shape) if len(shape) == 1
    else ", ".join(map(str, shape)))
header += " " * ((64 - (11 + len(header)) % 64) % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
    f.write(header.encode())
    for start in range(0, n, 1 << 16):
        m = min(1 << 16, n - start)
        f.write(struct.pack("<%d%s" % (m, code),
                            *(random.uniform(-1, 1) for _ in range(m))))
