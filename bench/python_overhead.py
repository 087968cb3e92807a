"""python_overhead.py - einc's per-call cost from Python (issue 17, Speed).

Tiny inputs (8x8 and a small 4-d tensor, plans cached) show what a call
costs beyond its arithmetic: einc.einsum, einc.rearrange, einc.reduce and a
compiled call against the calls they replace (numpy.einsum,
opt_einsum.contract, einops on numpy, and torch.einsum and einops on torch
CPU tensors when torch imports). Every callable is timed with timeit in
rounds of NUMBER calls; the rounds of all callables are interleaved (round
r of every case runs before round r+1 of any), so a machine that gets
busier or quieter mid-run shifts every case alike; the median per-call
time over the rounds is reported.

Large inputs (a 1024x1024 f32 GEMM) show what the Python layer adds to the
C library: einc.einsum's median against `einc bench`'s median for the same
expression (the C library alone, from the CLI), when the CLI is found.
With --libein PATH (a libein.so built as the wheel is, buildtype=release),
also in this process: the same plan run by the C library through ctypes
(ein_plan_create once, ein_plan_execute per call, on the same numpy
buffers) alternated call by call with einc.einsum(out=) and einc.einsum,
so that load from elsewhere on the machine hits all three alike.

usage: python bench/python_overhead.py [--rounds R] [--number N]
       [--einc PATH-TO-CLI] [--libein PATH-TO-LIBEIN] [--no-large]
       [--large-only]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import timeit

import numpy as np

import einc


def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


einops = _optional("einops")
opt_einsum = _optional("opt_einsum")
torch = _optional("torch")


def tiny_cases():
    """(group, name, callable) for the tiny inputs; a group's calls do the
    same work, so each is compared with the others of its group."""
    r = np.random.default_rng(0)
    a = r.standard_normal((8, 8)).astype(np.float32)
    b = r.standard_normal((8, 8)).astype(np.float32)
    x = r.standard_normal((2, 4, 4, 3)).astype(np.float32)
    f = einc.compile("i j, j k -> i k", (8, 8), (8, 8))
    cases = [
        ("gemm 8x8", "numpy.einsum", lambda: np.einsum("ij,jk->ik", a, b)),
        ("gemm 8x8", "einc.einsum", lambda: einc.einsum("i j, j k -> i k", a, b)),
        ("gemm 8x8", "einc.einsum (numpy dialect)",
         lambda: einc.einsum("ij,jk->ik", a, b)),
        ("gemm 8x8", "einc.compile'd", lambda: f(a, b)),
        ("transpose 8x8", "numpy.einsum (a view)",
         lambda: np.einsum("ij->ji", a)),
        ("transpose 8x8", "einc.einsum (a view)",
         lambda: einc.einsum("i j -> j i", a)),
        ("transpose 8x8", "einc.rearrange (a view)",
         lambda: einc.rearrange(a, "i j -> j i")),
        ("nhwc->nchw 2x4x4x3", "einc.rearrange (a view)",
         lambda: einc.rearrange(x, "b h w c -> b c h w")),
        ("column sum 8x8", "numpy.einsum", lambda: np.einsum("ij->j", a)),
        ("column sum 8x8", "einc.reduce",
         lambda: einc.reduce(a, "i j -> j", "sum")),
    ]
    if opt_einsum:
        cases.append(("gemm 8x8", "opt_einsum.contract",
                      lambda: opt_einsum.contract("ij,jk->ik", a, b)))
    if einops:
        cases += [
            ("gemm 8x8", "einops.einsum",
             lambda: einops.einsum(a, b, "i j, j k -> i k")),
            ("transpose 8x8", "einops.rearrange (a view)",
             lambda: einops.rearrange(a, "i j -> j i")),
            ("nhwc->nchw 2x4x4x3", "einops.rearrange (a view)",
             lambda: einops.rearrange(x, "b h w c -> b c h w")),
            ("column sum 8x8", "einops.reduce",
             lambda: einops.reduce(a, "i j -> j", "sum")),
        ]
    if torch:
        cases += torch_cases(a, b, x)
    return cases


def torch_cases(a, b, x):
    """The same work on torch CPU tensors, each group led by the torch or
    einops call einc replaces (issue 17: einc at most 1/3 of it)."""
    ta, tb, tx = (torch.from_numpy(v) for v in (a, b, x))
    cases = [
        ("torch gemm 8x8", "torch.einsum", lambda: torch.einsum("ij,jk->ik", ta, tb)),
        ("torch gemm 8x8", "einc.einsum", lambda: einc.einsum("i j, j k -> i k", ta, tb)),
        ("torch gemm 8x8", "torch.matmul", lambda: torch.matmul(ta, tb)),
        ("torch nhwc->nchw 2x4x4x3", "einc.rearrange (a view)",
         lambda: einc.rearrange(tx, "b h w c -> b c h w")),
        ("torch transpose 8x8", "einc.rearrange (a view)",
         lambda: einc.rearrange(ta, "i j -> j i")),
        ("torch nhwc->nchw 2x4x4x3", "einc.rearrange + .contiguous()",
         lambda: einc.rearrange(tx, "b h w c -> b c h w").contiguous()),
        ("torch column sum 8x8", "torch.einsum", lambda: torch.einsum("ij->j", ta)),
        ("torch column sum 8x8", "einc.reduce", lambda: einc.reduce(ta, "i j -> j", "sum")),
    ]
    if einops:
        cases += [
            ("torch gemm 8x8", "einops.einsum",
             lambda: einops.einsum(ta, tb, "i j, j k -> i k")),
            ("torch nhwc->nchw 2x4x4x3", "einops.rearrange (a view)",
             lambda: einops.rearrange(tx, "b h w c -> b c h w")),
            ("torch nhwc->nchw 2x4x4x3", "einops.rearrange + .contiguous()",
             lambda: einops.rearrange(tx, "b h w c -> b c h w").contiguous()),
            ("torch transpose 8x8", "einops.rearrange (a view)",
             lambda: einops.rearrange(ta, "i j -> j i")),
            ("torch column sum 8x8", "einops.reduce",
             lambda: einops.reduce(ta, "i j -> j", "sum")),
        ]
    # the group's leader first: torch's or einops' call
    order = ["torch.einsum", "einops.rearrange (a view)"]
    return sorted(cases, key=lambda c: (c[0], c[1] not in order))


def time_interleaved(fns, rounds, number):
    """Per callable, the seconds per call of each round (rounds
    interleaved)."""
    for fn in fns:
        fn()  # plans made, caches warm
    samples = [[] for _ in fns]
    for r in range(rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            samples[i].append(timeit.timeit(fns[i], number=number) / number)
    return samples


def large_gemm(cli, rounds=5, runs=10):
    """Per-alternation medians (ms) for a 1024^3 f32 GEMM: `einc bench`
    (the C library alone, from the CLI; None without it), einc.einsum and
    einc.einsum with out= (no allocation), `runs` calls each, alternated
    `rounds` times so load from elsewhere on the machine hits all three.
    The Python calls reuse one pair of inputs, as a hot loop does."""
    expr = "i j, j k -> i k"
    r = np.random.default_rng(1)
    a, b = (r.standard_normal((1024, 1024)).astype(np.float32)
            for _ in range(2))
    out = np.empty((1024, 1024), np.float32)
    for _ in range(3):
        einc.einsum(expr, a, b)
    c, py, py_out = [], [], []
    for _ in range(rounds):
        if cli:
            rep = json.loads(subprocess.run(
                [cli, "bench", expr, "1024x1024", "1024x1024", "--backend",
                 "cpu", "--runs", str(runs), "--no-floor", "--json"],
                capture_output=True, text=True, check=True).stdout)
            c.append(float(rep["ms"]))
        for sink, kw in ((py, {}), (py_out, {"out": out})):
            sink.append(statistics.median(timeit.repeat(
                lambda: einc.einsum(expr, a, b, **kw), number=1,
                repeat=runs)) * 1e3)
    return c or None, py, py_out


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


def _dltensor(x):
    """A C-contiguous f32 numpy array as a DLTensor (x must outlive it)."""
    shape = (ctypes.c_int64 * x.ndim)(*x.shape)
    t = _DLTensor(x.ctypes.data, 1, 0, x.ndim, 2, 32, 1, shape, None, 0)
    t._keep = shape
    return t


def c_library_call(libein, expr, inputs, out):
    """A callable that runs expr's plan on inputs into out with libein's
    own ein_plan_execute (ctypes lets the GIL go around it), and the
    library to close nothing: the plan lives as long as the process."""
    lib = ctypes.CDLL(libein)
    lib.ein_ctx_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.ein_plan_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                    ctypes.c_void_p, ctypes.c_int,
                                    ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_void_p)]
    lib.ein_plan_execute.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_int,
                                     ctypes.c_void_p]
    ctx, plan = ctypes.c_void_p(), ctypes.c_void_p()
    if lib.ein_ctx_create(ctypes.byref(ctx)) != 0:
        raise RuntimeError("ein_ctx_create failed")
    ts = [_dltensor(x) for x in inputs]
    ptrs = (ctypes.c_void_p * len(ts))(*(ctypes.addressof(t) for t in ts))
    o = _dltensor(out)
    if lib.ein_plan_create(ctx, expr.encode(), ptrs, len(ts),
                           ctypes.byref(o), None, ctypes.byref(plan)) != 0:
        raise RuntimeError("ein_plan_create failed")
    keep = (ts, ptrs, o)

    def call():
        if lib.ein_plan_execute(ctx, plan, ptrs, len(keep[0]),
                                ctypes.byref(o)) != 0:
            raise RuntimeError("ein_plan_execute failed")
    return call


def large_in_process(libein, rounds=7, runs=15):
    """Per-round medians (ms) of a 1024^3 f32 GEMM by the C library alone
    (ctypes), einc.einsum(out=) and einc.einsum, the three called in turn
    (rotating which goes first) `runs` times a round."""
    expr = "i j, j k -> i k"
    r = np.random.default_rng(1)
    a, b = (r.standard_normal((1024, 1024)).astype(np.float32)
            for _ in range(2))
    out_c = np.empty((1024, 1024), np.float32)
    out_py = np.empty((1024, 1024), np.float32)
    calls = [c_library_call(libein, expr, (a, b), out_c),
             lambda: einc.einsum(expr, a, b, out=out_py),
             lambda: einc.einsum(expr, a, b)]
    for call in calls * 3:
        call()
    assert np.allclose(out_c, out_py, rtol=1e-4, atol=1e-3)
    medians, fastest = [[] for _ in calls], [float("inf")] * len(calls)
    for _ in range(rounds):
        times = [[] for _ in calls]
        for k in range(runs):
            for j in range(len(calls)):
                i = (j + k) % len(calls)
                t = timeit.default_timer()
                calls[i]()
                times[i].append(timeit.default_timer() - t)
        for i, t in enumerate(times):
            medians[i].append(statistics.median(t) * 1e3)
            fastest[i] = min(fastest[i], min(t) * 1e3)
    return medians, fastest


def report_in_process(large):
    """The in-process table; the last row, each call's fastest run (load
    on the machine only ever adds time)."""
    med = statistics.median
    (c, py_out, py), fastest = large
    print("\n1024x1024 f32 GEMM in this process, ms (per round: median of "
          "the round's calls; the three alternate call by call):\n")
    print("| round | C library (ctypes) | einc.einsum out= | einc.einsum "
          "| out= vs C | einsum vs C |")
    print("|---|---|---|---|---|---|")
    for i in range(len(c)):
        print(f"| {i + 1} | {c[i]:.3f} | {py_out[i]:.3f} | {py[i]:.3f} | "
              f"{(py_out[i] / c[i] - 1) * 100:+.2f}% | "
              f"{(py[i] / c[i] - 1) * 100:+.2f}% |")
    print(f"| median | {med(c):.3f} | {med(py_out):.3f} | {med(py):.3f} | "
          f"{(med(py_out) / med(c) - 1) * 100:+.2f}% | "
          f"{(med(py) / med(c) - 1) * 100:+.2f}% |")
    fc, fo, fp = fastest
    print(f"| fastest call | {fc:.3f} | {fo:.3f} | {fp:.3f} | "
          f"{(fo / fc - 1) * 100:+.2f}% | {(fp / fc - 1) * 100:+.2f}% |")


def versions():
    v = [f"Python {platform.python_version()}", f"numpy {np.__version__}",
         f"einc {einc.__version__}"]
    for m in (einops, opt_einsum, torch):
        if m:
            v.append(f"{m.__name__} {m.__version__}")
    return ", ".join(v)


def report(rows, large, args):
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; "
          f"{versions()}; torch: {'yes' if torch else 'not importable'}")
    print(f"tiny inputs: median of {args.rounds} interleaved rounds of "
          f"{args.number} calls, us per call; spread: the rounds' 10th to "
          f"90th percentile\n")
    print("| case | call | us/call | spread | vs first of group |")
    print("|---|---|---|---|---|")
    base = {}
    for (group, name, _), samples in rows:
        t = statistics.median(samples)
        q = statistics.quantiles(samples, n=10)
        base.setdefault(group, t)
        print(f"| {group} | {name} | {t * 1e6:.2f} | "
              f"{q[0] * 1e6:.2f}-{q[-1] * 1e6:.2f} | {t / base[group]:.2f}x |")
    if large is None:
        return
    c, py, py_out = large
    med = statistics.median
    print("\n1024x1024 f32 GEMM, ms (median of 10 runs, 5 alternations):\n")
    print("| round | einc bench (C) | einc.einsum | einc.einsum out= |")
    print("|---|---|---|---|")
    for i in range(len(py)):
        print(f"| {i + 1} | {c[i] if c else float('nan'):.3f} | {py[i]:.3f} "
              f"| {py_out[i]:.3f} |")
    print(f"| median | {med(c) if c else float('nan'):.3f} | {med(py):.3f} "
          f"| {med(py_out):.3f} |")
    if c:
        print(f"\neinc.einsum vs einc bench: {(med(py) - med(c)) / med(c) * 100:+.2f}%")
    else:
        print("\neinc CLI not found (--einc PATH)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--number", type=int, default=20000)
    p.add_argument("--einc", default=shutil.which("einc"),
                   help="the einc CLI, for `einc bench` (default: on PATH)")
    p.add_argument("--libein", default=None,
                   help="libein.so (release build) for the in-process "
                        "C baseline of the large case")
    p.add_argument("--no-large", action="store_true")
    p.add_argument("--large-only", action="store_true")
    args = p.parse_args()
    if args.large_only:
        if not args.libein:
            p.error("--large-only needs --libein")
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores; "
              f"{versions()}")
        report_in_process(large_in_process(args.libein))
        return 0
    cases = tiny_cases()
    times = time_interleaved([c[2] for c in cases], args.rounds, args.number)
    order = sorted(range(len(cases)),
                   key=lambda i: [c[0] for c in cases].index(cases[i][0]))
    rows = [(cases[i], times[i]) for i in order]
    large = None if args.no_large else large_gemm(args.einc)
    report(rows, large, args)
    if args.libein and not args.no_large:
        report_in_process(large_in_process(args.libein))
    return 0


if __name__ == "__main__":
    sys.exit(main())
