#!/usr/bin/env python3
"""Compares the output shapes pinned in tests/test_shapes.c with what
numpy.einsum and einops compute for the same expressions. Cases that the
references cannot express (einc's deliberate extensions: diagonals in
einops syntax, anonymous axes in rearrange, leading underscores) are
listed as skipped. Needs numpy and einops (pip install numpy einops)."""
import os
import re
import sys

import einops
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "test_shapes.c")).read()
rows = re.findall(r'\{"([^"]*)", "([^"]*)", "([^"]*)",\s*"([^"]*)"', src)


def names(side):
    return set(side.replace("(", " ").replace(")", " ").split())


checked = bad = 0
for expr, shapes, opts, want in rows:
    shp = [() if s == "scalar" else tuple(int(x) for x in s.split("x"))
           for s in shapes.split()]
    if any(np.prod(s, dtype=object) > 2_000_000 for s in shp):
        continue  # too big to allocate here; the small cases cover the rules
    kv = dict(p.split("=") for p in opts.split(",") if "=" in p)
    red = kv.pop("reduce", None)
    lengths = {k: int(v) for k, v in kv.items()}
    arrs = [np.random.rand(*s) for s in shp]
    try:
        if "numpy" in opts:
            r = np.einsum(expr, *arrs)
        elif len(arrs) == 1:
            lhs, rhs = expr.split("->")
            if red:
                op = red if red not in ("any", "all") else "max"
                r = einops.reduce(arrs[0], expr, op, **lengths)
            elif names(rhs) - names(lhs):
                r = einops.repeat(arrs[0], expr, **lengths)
            elif names(lhs) - names(rhs):
                r = einops.reduce(arrs[0], expr, "sum", **lengths)
            else:
                r = einops.rearrange(arrs[0], expr, **lengths)
        else:
            r = einops.einsum(*arrs, expr)
    except Exception as e:  # the reference cannot express it
        print("skip", repr(expr), shapes, opts, "--", str(e).splitlines()[-1][:80])
        continue
    got = "scalar" if r.ndim == 0 else "x".join(map(str, r.shape))
    checked += 1
    if got != want:
        bad += 1
        print("DIFF", repr(expr), shapes, opts, "einc:", want, "reference:", got)
print(f"{checked - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
