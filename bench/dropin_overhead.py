"""dropin_overhead.py - the per-call cost of einc's drop-ins against
einc.einsum's own on the same small inputs (issue 27: within 10%).

Each group is one small computation called through einc.einsum (the
group's first row, its baseline) and through the drop-ins that replace a
peer's function: einc.numpy.einsum, einc.opt_einsum.contract (and a
contract_expression's call), einc.torch.einsum and einc.einops'
rearrange, reduce and einsum (einc.rearrange and einc.reduce, einc's own
functions, are shown for reference). Every call is timed in blocks of
--number calls in this thread's CPU time (time spent descheduled on a
loaded machine does not count); the blocks of all calls are interleaved
(round r of every call, in a rotated order, before round r+1 of any), so
load that comes and goes hits every call alike. A row gives the median
per-call time over the rounds and the median over the rounds of its ratio
to the baseline's block of the same round.

    python bench/dropin_overhead.py [--rounds 41] [--number 4000]
        [--groups numpy torch einops] [--out bench/results/FILE.md]
        [--note 'quiet machine']

--out writes the table as markdown with the date, machine, versions and
load averages; --note says what the machine was doing (default: "loaded
machine", as every run made while other jobs share the cores must say).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np

import einc
import einc.einops as eeo
import einc.numpy as enp
import einc.opt_einsum as eoe

try:
    import torch
    import einc.torch as etorch
except ImportError:  # the torch group is left out
    torch = etorch = None


def numpy_groups():
    """(group, [(name, callable), ...]) on numpy arrays; the baseline
    first."""
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 8)), rng.random((8, 8))
    expr = eoe.contract_expression("ij,jk->ik", a.shape, b.shape)
    return [
        ("matmul 8x8 f64", [
            ("einc.einsum", lambda: einc.einsum("ij,jk->ik", a, b)),
            ("einc.numpy.einsum", lambda: enp.einsum("ij,jk->ik", a, b)),
            ("einc.opt_einsum.contract",
             lambda: eoe.contract("ij,jk->ik", a, b)),
            ("contract_expression()", lambda: expr(a, b)),
        ]),
        ("transpose 8x8 f64 (a view)", [
            ("einc.einsum", lambda: einc.einsum("ij->ji", a)),
            ("einc.numpy.einsum", lambda: enp.einsum("ij->ji", a)),
        ]),
    ]


def einops_groups():
    rng = np.random.default_rng(1)
    a, b = rng.random((8, 8)), rng.random((8, 8))
    x = rng.random((2, 3, 4))
    return [
        ("rearrange 2x3x4 f64 (a view)", [
            ("einc.einsum", lambda: einc.einsum("b s d -> b d s", x)),
            ("einc.einops.rearrange",
             lambda: eeo.rearrange(x, "b s d -> b d s")),
            ("(einc.rearrange)", lambda: einc.rearrange(x, "b s d -> b d s")),
        ]),
        ("reduce max 2x3x4 f64", [
            ("einc.einsum", lambda: einc.einsum("b s d -> b d", x,
                                                reduce="max")),
            ("einc.einops.reduce",
             lambda: eeo.reduce(x, "b s d -> b d", "max")),
            ("(einc.reduce)", lambda: einc.reduce(x, "b s d -> b d", "max")),
        ]),
        ("einsum 8x8 f64", [
            ("einc.einsum", lambda: einc.einsum("i j, j k -> i k", a, b)),
            ("einc.einops.einsum",
             lambda: eeo.einsum(a, b, "i j, j k -> i k")),
        ]),
    ]


def torch_groups():
    if torch is None:
        return []
    g = torch.Generator().manual_seed(2)
    a = torch.rand(8, 8, generator=g)
    b = torch.rand(8, 8, generator=g)
    return [
        ("matmul 8x8 f32 torch", [
            ("einc.einsum", lambda: einc.einsum("ij,jk->ik", a, b)),
            ("einc.torch.einsum", lambda: etorch.einsum("ij,jk->ik", a, b)),
            ("einc.torch.einsum([a, b])",
             lambda: etorch.einsum("ij,jk", [a, b])),
        ]),
    ]


GROUPS = {"numpy": numpy_groups, "einops": einops_groups,
          "torch": torch_groups}


def check_agreement(groups):
    """Every call of a group gives the baseline's values (a benchmark of
    wrong answers is no benchmark)."""
    for title, calls in groups:
        want = np.asarray(calls[0][1]())
        for name, f in calls[1:]:
            got = np.asarray(f())
            if got.shape != want.shape or not np.allclose(got, want):
                sys.exit(f"{title}: {name} disagrees with {calls[0][0]}")


def measure(groups, rounds, number):
    """{(group, name): [per-call seconds, one per round]}."""
    flat = [(title, name, f) for title, calls in groups for name, f in calls]
    times = {(t, n): [] for t, n, _ in flat}
    for t, n, f in flat:  # warm: plans compiled, caches filled
        for _ in range(100):
            f()
    for r in range(rounds):
        k = r % len(flat)
        for t, n, f in flat[k:] + flat[:k]:
            start = time.thread_time()
            for _ in range(number):
                f()
            times[(t, n)].append((time.thread_time() - start) / number)
    return times


def table(groups, times):
    lines = ["| case | call | us per call | vs einc.einsum |",
             "|---|---|---|---|"]
    for title, calls in groups:
        base = times[(title, calls[0][0])]
        for name, _ in calls:
            mine = times[(title, name)]
            ratio = statistics.median(m / b for m, b in zip(mine, base))
            rel = "baseline" if name == calls[0][0] else \
                f"{(ratio - 1) * 100:+.1f}%"
            lines.append(f"| {title} | {name} | "
                         f"{statistics.median(mine) * 1e6:.3f} | {rel} |")
    return "\n".join(lines)


def header(args, load_before):
    versions = [f"Python {platform.python_version()}",
                f"numpy {np.__version__}", f"einc {einc.__version__}"]
    if torch is not None:
        versions.append(f"torch {torch.__version__}")
    load_after = os.getloadavg()
    return "\n".join([
        f"# einc drop-in overhead, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; "
        f"**{args.note}** (load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after). {', '.join(versions)}.",
        "",
        f"Command: `python bench/dropin_overhead.py --rounds {args.rounds} "
        f"--number {args.number} --groups {' '.join(args.groups)}`: blocks "
        f"of {args.number} calls in thread CPU time, {args.rounds} rounds "
        f"interleaved; medians over the rounds, the ratio taken round by "
        f"round against the group's einc.einsum.",
        "", ""])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--number", type=int, default=4000)
    ap.add_argument("--groups", nargs="+", choices=sorted(GROUPS),
                    default=["numpy", "torch", "einops"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--note", default="loaded machine")
    args = ap.parse_args()
    load_before = os.getloadavg()
    groups = [g for name in args.groups for g in GROUPS[name]()]
    check_agreement(groups)
    times = measure(groups, args.rounds, args.number)
    text = header(args, load_before) + table(groups, times) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
