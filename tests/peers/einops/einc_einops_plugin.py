"""A pytest plugin that runs einops' own test files with einops' functions
replaced by einc.einops's (issue 27).

Loaded with ``-p einc_einops_plugin`` before the test files are imported:
einops.rearrange, reduce, repeat, einsum, pack, unpack, parse_shape and
asnumpy (and their homes einops.einops and einops.packing, from which the
test files import them) become wrappers that call einc.einops's function
and ALSO einops' own on the same arguments, then compare: both raise, or
both return values of the same types, shapes and dtypes and equal values (to the
dtype's tolerance). Each disagreement is counted and the first few are
printed at the end, with the line
``einc-einops-compare: N calls, N mismatches``.
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest
from peer_seed import seed_test

NAMES = ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack",
         "parse_shape", "asnumpy")
TOL = {"float64": 1e-12, "complex128": 1e-12, "float32": 1e-5,
       "complex64": 1e-5, "float16": 2e-2, "bfloat16": 2e-2}

calls = 0
mismatches: list = []


def _numpy_of(x):
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def _dtype_name(x) -> str:
    return str(getattr(x, "dtype", type(x).__name__)).replace("torch.", "")


def _differ(got, want) -> str | None:
    """Why got and want differ, or None."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{type(got).__name__} of {len(got)} vs {len(want)}"
        for g, w in zip(got, want):
            why = _differ(g, w)
            if why:
                return why
        return None
    if isinstance(want, np.generic):
        if not isinstance(got, np.generic) or got.dtype != want.dtype:
            return f"{type(got).__name__} vs numpy scalar {want.dtype}"
        got, want = np.asarray(got), np.asarray(want)
    elif isinstance(want, (dict, int, float, str)) or want is None:
        return None if got == want else f"{got!r} vs {want!r}"
    if type(got) is not type(want):  # a numpy scalar for a 0-d array
        return f"type {type(got).__name__} vs {type(want).__name__}"
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)} vs {tuple(want.shape)}"
    if _dtype_name(got) != _dtype_name(want):
        return f"dtype {_dtype_name(got)} vs {_dtype_name(want)}"
    g, w = _numpy_of(got), _numpy_of(want)
    tol = TOL.get(_dtype_name(want))
    if tol is None:
        return None if np.array_equal(g, w) else "values differ"
    w64 = w.astype(np.complex128 if w.dtype.kind == "c" else np.float64)
    g64 = g.astype(w64.dtype)
    same = (g64 == w64) | (np.isnan(g64) & np.isnan(w64))  # infs, nans
    if not np.all(np.isfinite(w64[~same])):
        return "values differ (inf or nan)"
    err = np.abs(g64 - w64)[~same].max() if (~same).any() else 0.0
    finite = w64[np.isfinite(w64)]
    # The floor: a product of many small numbers underflows in one
    # library's order and not in the other's (einops' JAX prod gave 0
    # where einc gave 2e-28 in f32): below sqrt(tiny) is underflow's noise.
    floor = np.sqrt(np.finfo(w.real.dtype if w.dtype.kind == "c"
                             else w.dtype).tiny)
    scale = max(np.linalg.norm(finite.ravel()), float(floor))
    return None if err <= tol * scale else (
        f"values differ by {err:.3g} (tolerance {tol * scale:.3g})")


def _compiling() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def _compared(name, ours, theirs):
    @functools.wraps(theirs)
    def call(*args, **kwargs):
        global calls
        if _compiling():  # Dynamo traces this call: einc's alone, the
            return ours(*args, **kwargs)  # comparison is numpy code
        calls += 1
        try:
            got = ours(*args, **kwargs)
        except Exception as e:  # einops must raise too
            try:
                theirs(*args, **kwargs)
            except Exception:
                raise e from None
            mismatches.append(f"{name}: einc raised {type(e).__name__}: "
                              f"{str(e)[:120]!r}; einops did not")
            raise
        try:
            want = theirs(*args, **kwargs)
        except Exception as e:
            mismatches.append(f"{name}: einops raised {type(e).__name__}, "
                              "einc did not")
            return got
        why = _differ(got, want)
        if why and _closer_to_f64(theirs, args, kwargs, got, want):
            why = None
        if why:
            mismatches.append(f"{name}{_short(args)} {_short_kwargs(kwargs)}"
                              f": {why} ({_test_name()})")
        return got

    return call


def _closer_to_f64(theirs, args, kwargs, got, want) -> bool:
    """Whether einc's float result is the right one where the two differ:
    einops run on extended-precision numpy copies of the inputs (the
    reference: np.longdouble, float64 where the platform has no wider
    type) is within the dtype's tolerance of einc's and further from
    einops' own. JAX sums float32 in float32 (a mean of 7776 values off
    by 3e-5 relative); torch's product of 34992 values between 6e-5 and
    2 is NaN (an overflowed partial product times an underflowed one)
    where the exact value, 4e-1553, rounds to 0 in float64 as einc and
    numpy give: both are einops' errors, not einc's."""
    if not hasattr(got, "shape") or _dtype_name(want) not in TOL:
        return False
    try:
        wide = [np.asarray(_numpy_of(a), np.longdouble) if hasattr(a, "shape")
                else a for a in args]
        ref = np.asarray(theirs(*wide, **kwargs), np.longdouble)
    except Exception:  # noqa: BLE001 (no reference to be had)
        return False
    g = _numpy_of(got).astype(np.longdouble)
    w = _numpy_of(want).astype(np.longdouble)
    if ref.shape != g.shape or not np.all(np.isfinite(ref)):
        return False
    scale = max(np.linalg.norm(ref.ravel()), 1e-300)
    err_einc = np.abs(g - ref).max(initial=0.0) / scale
    err_peer = np.abs(w - ref).max(initial=0.0) / scale
    return err_einc <= TOL[_dtype_name(want)] and (
        err_einc < err_peer or not np.isfinite(err_peer))


def _short_kwargs(kwargs) -> str:
    return ", ".join(f"{k}={v!r}"[:40] for k, v in kwargs.items())


def _test_name() -> str:
    import os
    return os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]


def _short(args) -> str:
    parts = [repr(a) if isinstance(a, str) else
             f"<{type(a).__name__} {_dtype_name(a)} "
             f"{tuple(getattr(a, 'shape', ()))}>"
             for a in args]
    return "(" + ", ".join(map(str, parts))[:160] + ")"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Every test on fixed data (tests/peers/peer_seed.py), seeded before
    its fixtures run."""
    seed_test(item)


def pytest_configure(config):
    import einops
    import einops.einops
    import einops.packing

    import einc.einops as ours

    for name in NAMES:
        theirs = getattr(einops, name)
        wrapped = _compared(name, getattr(ours, name), theirs)
        for module in (einops, einops.einops, einops.packing):
            if getattr(module, name, None) is theirs:
                setattr(module, name, wrapped)


def pytest_terminal_summary(terminalreporter):
    import os
    for line in mismatches[:20]:
        terminalreporter.write_line(f"mismatch: {line}")
    path = os.environ.get("EINC_EINOPS_MISMATCHES")
    if path:  # (the log's lines can be lost among pytest's own)
        with open(path, "w") as f:
            f.writelines(f"mismatch: {line}\n" for line in mismatches)
    terminalreporter.write_line(
        f"einc-einops-compare: {calls} calls, {len(mismatches)} mismatches")
