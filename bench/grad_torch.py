#!/usr/bin/env python3
"""grad_torch.py - forward + backward of the bench's einsum cases with
torch autograd (issue 25, Speed): torch.einsum against einc.einsum on torch
CPU tensors that require grad.

The cases are bench/cases.tsv's contractions (two or more operands, no
reduction flag): their CPU shapes, f32. An expression that splits an input
axis or merges output axes (qkv_split, attn_merge) is given to torch as
einsum over the split axes with reshapes around it, which is what a user
writes. Each step is out = f(*inputs); torch.autograd.grad(out, inputs,
g) with a fixed random g, so nothing accumulates in .grad. torch and einc
run interleaved, round by round (a machine that gets busier slows both);
the median of the rounds is reported. Before timing, einc's output and
gradients are compared with torch's (relative to the norm of torch's).

Where einc does not take tensors that require grad (no torch integration
yet: it raises, or its result is not in the autograd graph), its columns
say "einc: not available" and why; torch's are still measured.

Per-call overhead: an 8x8 matmul ('i j, j k -> i k'), each call timed
with timeit in rounds: torch.einsum and einc.einsum on plain tensors, the
same on tensors that require grad (forward only: what building the graph
costs), and forward + backward. "autograd adds" is einc's grad forward
minus its plain forward (issue 25's budget: at most 2 us).

Threads: --threads N (default: all cores) for torch (set_num_threads) and
einc (EINC_NUM_THREADS, set before einc's first call).

usage: python bench/grad_torch.py [--cases NAME ...] [--rounds R]
       [--runs N] [--number N] [--threads N] [--out FILE.md]
Writes a markdown report to --out, else to stdout.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import re
import statistics
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases as suite  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="*", help="case names (default: all "
                   "contractions of bench/cases.tsv)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=3, help="steps per round")
    p.add_argument("--number", type=int, default=2000,
                   help="calls per timeit round of the overhead table")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--out", help="markdown file to write (default: stdout)")
    return p.parse_args()


ARGS = parse_args()
os.environ["EINC_NUM_THREADS"] = str(ARGS.threads)  # before einc's context

import torch  # noqa: E402

import einc  # noqa: E402

torch.set_num_threads(ARGS.threads)

# ------------------------------------------------------- expressions


def operands(side):
    """'b s e, e (h d)' -> [['b', 's', 'e'], ['e', ['h', 'd']]]."""
    out = []
    for op in side.split(","):
        items = re.findall(r"\(([^)]*)\)|(\S+)", op)
        out.append([g.split() if g else n for g, n in items])
    return out


def flat(op):
    return [a for item in op for a in (item if isinstance(item, list) else [item])]


def group_sizes(group, total, lengths):
    """Sizes of the axes of a group of length total (one may be unknown)."""
    known = [lengths.get(a) for a in group]
    missing = [i for i, k in enumerate(known) if k is None]
    if len(missing) > 1:
        raise ValueError(f"cannot split {group}: give -D lengths")
    if missing:
        known[missing[0]] = total // math.prod(k for k in known if k)
    return known


class TorchForm:
    """A case as torch code: inputs reshaped to split axes, torch.einsum
    over one letter per axis, the output reshaped to merged axes."""

    def __init__(self, case, shapes):
        lhs, rhs = case.expr.split("->")
        self.ins, self.out = operands(lhs), operands(rhs)[0]
        lengths = dict(case.lengths())
        self.in_shapes = []
        for op, shape in zip(self.ins, shapes):
            split = []
            for item, n in zip(op, shape):
                if isinstance(item, list):
                    sizes = group_sizes(item, n, lengths)
                    lengths.update(zip(item, sizes))
                    split += sizes
                else:
                    lengths[item] = n
                    split.append(n)
            self.in_shapes.append(split)
        names = sorted({a for op in self.ins for a in flat(op)} | set(flat(self.out)))
        letter = {a: chr(ord("a") + i) for i, a in enumerate(names)}
        spec = ",".join("".join(letter[a] for a in flat(op)) for op in self.ins)
        self.spec = spec + "->" + "".join(letter[a] for a in flat(self.out))
        self.out_shape = [math.prod(lengths[a] for a in item)
                          if isinstance(item, list) else lengths[item]
                          for item in self.out]

    def __call__(self, *xs):
        xs = [x.reshape(s) for x, s in zip(xs, self.in_shapes)]
        return torch.einsum(self.spec, *xs).reshape(self.out_shape)


def grad_cases(names):
    chosen = []
    for c in suite.load():
        if names and c.name not in names:
            continue
        if "," not in c.expr.split("->")[0] or c.reduction():
            continue
        chosen.append(c)
    return chosen


# ----------------------------------------------------------- timing


def einc_fn(case):
    return lambda *xs: einc.einsum(case.expr, *xs, **case.lengths())


def step(fn, xs, g):
    out = fn(*xs)
    return torch.autograd.grad(out, xs, g)


def rel_err(got, want):
    return float((got.double() - want.double()).norm() /
                 max(float(want.double().norm()), 1e-30))


def einc_check(case, xs, g, tform):
    """None when einc's forward and gradients match torch's (f32: 1e-4
    relative), else why einc is not measured."""
    try:
        out = einc_fn(case)(*xs)
    except Exception as e:  # noqa: BLE001 - any refusal is reported
        return f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return "the result is not in the autograd graph"
    want = tform(*xs)
    grads = torch.autograd.grad(out, xs, g)
    wgrads = torch.autograd.grad(want, xs, g)
    errs = [rel_err(out, want)] + [rel_err(a, b) for a, b in zip(grads, wgrads)]
    if max(errs) > 1e-4:
        return f"wrong: relative errors {['%.1e' % e for e in errs]}"
    return None


def time_case(case):
    shapes = case.shapes("cpu")
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(*s, generator=gen).requires_grad_() for s in shapes]
    tform = TorchForm(case, shapes)
    g = torch.randn(tuple(tform(*xs).shape), generator=gen)
    why = einc_check(case, xs, g, tform)
    fns = {"torch": tform} if why else {"torch": tform, "einc": einc_fn(case)}
    for fn in fns.values():
        step(fn, xs, g)  # warm: plans, caches
    times = {k: [] for k in fns}
    for r in range(ARGS.rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            t0 = time.perf_counter()
            for _ in range(ARGS.runs):
                step(fns[k], xs, g)
            times[k].append((time.perf_counter() - t0) / ARGS.runs * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}, why


def overhead():
    """us per call, medians over interleaved timeit rounds."""
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(8, 8, generator=gen), torch.randn(8, 8, generator=gen)
    ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
    g = torch.randn(8, 8, generator=gen)
    expr = "i j, j k -> i k"
    calls = {
        "torch.einsum": lambda: torch.einsum("ij,jk->ik", a, b),
        "einc.einsum": lambda: einc.einsum(expr, a, b),
        "torch.einsum, requires_grad": lambda: torch.einsum("ij,jk->ik", ag, bg),
        "einc.einsum, requires_grad": lambda: einc.einsum(expr, ag, bg),
        "torch.einsum, forward + backward":
            lambda: torch.autograd.grad(torch.einsum("ij,jk->ik", ag, bg),
                                        (ag, bg), g),
        "einc.einsum, forward + backward":
            lambda: torch.autograd.grad(einc.einsum(expr, ag, bg), (ag, bg), g),
    }
    usable = {}
    for name, fn in calls.items():
        try:
            out = fn()
            if "einc" in name and "requires_grad" in name and out.grad_fn is None:
                raise TypeError("the result is not in the autograd graph")
            usable[name] = fn
        except Exception as e:  # noqa: BLE001
            usable[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"
    rounds = {k: [] for k, v in usable.items() if callable(v)}
    for _ in range(max(ARGS.rounds, 5) * 3):
        for k in rounds:
            rounds[k].append(timeit.timeit(usable[k], number=ARGS.number)
                             / ARGS.number * 1e6)
    return {k: (statistics.median(rounds[k]) if k in rounds else v)
            for k, v in usable.items()}


# ----------------------------------------------------------- report


def report(rows, ov):
    now = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"# Forward + backward with torch autograd, "
        f"{now:%Y-%m-%d %H:%M} UTC, cpu",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load "
        f"average {load:.1f} at the end. Python {platform.python_version()},"
        f" torch {torch.__version__}, einc {einc.__version__} "
        f"({os.path.dirname(einc.__file__)}). Threads: {ARGS.threads} "
        f"(torch.set_num_threads, EINC_NUM_THREADS).",
        "",
        f"Command: `python bench/grad_torch.py "
        f"{' '.join(sys.argv[1:])}`. f32; one step is out = f(*inputs) and "
        f"torch.autograd.grad(out, inputs, g); median over {ARGS.rounds} "
        f"interleaved rounds of {ARGS.runs} steps. ratio: einc / torch "
        f"(below 1: einc faster; issue 25 asks for at most 1.2).",
        "",
        "| case | expression | shapes | torch fwd+bwd ms | einc fwd+bwd ms "
        "| ratio |",
        "|---|---|---|---|---|---|",
    ]
    ratios = []
    for case, t, why in rows:
        shapes = " ".join("x".join(map(str, s)) for s in case.shapes("cpu"))
        if why:
            einc_col, ratio = f"einc: not available ({why})", ""
        else:
            einc_col = f"{t['einc']:.3f}"
            ratios.append(t["einc"] / t["torch"])
            ratio = f"{ratios[-1]:.2f}x"
        lines.append(f"| {case.name} | `{case.expr}` | {shapes} | "
                     f"{t['torch']:.3f} | {einc_col} | {ratio} |")
    if ratios:
        gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
        lines += ["", f"Geometric mean of the ratios: {gm:.2f}x over "
                  f"{len(ratios)} cases."]
    lines += ["", "Per-call cost, 8x8 matmul (`i j, j k -> i k`), us per "
              f"call (median of timeit rounds of {ARGS.number} calls):", "",
              "| call | us |", "|---|---|"]
    for name, v in ov.items():
        lines.append(f"| {name} | " + (f"{v:.2f}" if isinstance(v, float)
                                        else f"einc: not available ({v})")
                     + " |")
    plain, grad = ov.get("einc.einsum"), ov.get("einc.einsum, requires_grad")
    if isinstance(plain, float) and isinstance(grad, float):
        lines += ["", f"autograd adds {grad - plain:.2f} us per einc call "
                  "(issue 25's budget: 2 us)."]
    else:
        lines += ["", "autograd adds: einc: not available."]
    return "\n".join(lines) + "\n"


def main():
    rows = []
    for case in grad_cases(ARGS.cases):
        t, why = time_case(case)
        rows.append((case, t, why))
        print(f"{case.name}: torch {t['torch']:.3f} ms, einc "
              f"{'%.3f ms' % t['einc'] if 'einc' in t else 'not available'}",
              file=sys.stderr, flush=True)
    text = report(rows, overhead())
    if ARGS.out:
        with open(ARGS.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
