#!/usr/bin/env python3
"""npy_diff.py A.npy B.npy TOL [LABEL] - the relative difference
||a - b|| / ||a|| of two .npy files of one shape, printed; exit 1 above
TOL. Standard library only (scripts/gpu_check.sh's rehearsal runs where
numpy is not installed): C-order little-endian f4, f8, f2, and '<V2' as
bfloat16 (how numpy saves ml_dtypes' bfloat16, and how einc writes it)."""
import ast
import math
import struct
import sys


def load(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:6] != b'\x93NUMPY':
        sys.exit(f"{path}: not a .npy file")
    major = data[6]
    size = 2 if major == 1 else 4
    hlen = int.from_bytes(data[8:8 + size], 'little')
    start = 8 + size
    head = ast.literal_eval(data[start:start + hlen].decode('latin1'))
    body = data[start + hlen:]
    if head['fortran_order']:
        sys.exit(f"{path}: Fortran order is not read here")
    descr = head['descr']
    if descr == '<V2':  # bfloat16: the high half of an f32
        words = struct.unpack(f"<{len(body) // 2}H", body)
        vals = struct.unpack(f"<{len(words)}f",
                             struct.pack(f"<{len(words)}I",
                                         *(w << 16 for w in words)))
    else:
        code = {'<f4': 'f', '<f8': 'd', '<f2': 'e'}[descr]
        n = len(body) // struct.calcsize(code)
        vals = struct.unpack(f"<{n}{code}", body)
    return tuple(head['shape']), vals


def main():
    (sa, a), (sb, b) = load(sys.argv[1]), load(sys.argv[2])
    tol = float(sys.argv[3])
    label = sys.argv[4] if len(sys.argv) > 4 else ''
    if sa != sb:
        sys.exit(f"shapes differ: {sa} and {sb}")
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    den = math.sqrt(sum(x * x for x in a)) or 1.0
    err = num / den
    print(f"{label}{' ' if label else ''}relative difference {err:.3g}")
    return 0 if err < tol else 1


if __name__ == '__main__':
    sys.exit(main())
