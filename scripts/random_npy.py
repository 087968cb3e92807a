#!/usr/bin/env python3
"""random_npy.py OUT.npy SHAPE [DTYPE] [SEED] - writes a .npy file of
uniform random values in [-1, 1) (DTYPE f4 or f8; default f4), or of
random fp8 bytes saved as '|u1' (DTYPE e4m3: no NaN byte; e5m2: no inf or
NaN), using only the standard library, so the main job needs no numpy.
SHAPE is 8x16x64."""
import random
import struct
import sys

path, shape = sys.argv[1], [int(s) for s in sys.argv[2].split("x")]
dtype = sys.argv[3] if len(sys.argv) > 3 else "f4"
random.seed(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
n = 1
for s in shape:
    n *= s


def fp8(byte):
    """A finite fp8 byte: e4m3fn's NaN is S.1111.111, e5m2's inf and NaN
    are S.11111.xx (replaced by 1.0 in each format)."""
    if dtype == "e4m3":
        return 0x38 if byte & 0x7f == 0x7f else byte
    return 0x3c if byte & 0x7c == 0x7c else byte


if dtype in ("e4m3", "e5m2"):
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(map(str, shape)) + ("," if len(shape) == 1 else ""))
    header += " " * ((64 - (11 + len(header)) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode())
        f.write(bytes(fp8(random.randrange(256)) for _ in range(n)))
    sys.exit(0)
code = {"f4": "f", "f8": "d"}[dtype]
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
