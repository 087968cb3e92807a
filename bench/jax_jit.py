"""jax_jit.py - einc inside jax.jit (issue 25) against jnp.einsum and
einops on JAX, on the CPU: the forward of a jitted call, and jit(grad) of
a sum of squares of it.

Each function is jitted and warmed once; then rounds of NUMBER calls
(block_until_ready on each) are timed, the rounds of all functions
interleaved so that a machine getting busier hits each alike; the median
per-call time over the rounds is printed.

usage: python bench/jax_jit.py [--rounds R] [--number N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import einops
import jax
import jax.numpy as jnp
import numpy as np

import einc

CASES = [
    # name, einc expression, numpy subscripts, shapes
    ("matmul 8x8", "i j, j k -> i k", "ij,jk->ik", [(8, 8), (8, 8)]),
    ("matmul 512", "i j, j k -> i k", "ij,jk->ik", [(512, 512), (512, 512)]),
    ("attention scores", "b h i d, b h j d -> b h i j", "bhid,bhjd->bhij",
     [(8, 8, 128, 64), (8, 8, 128, 64)]),
    ("chain 3 (256)", "a b, b c, c d -> a d", "ab,bc,cd->ad",
     [(256, 64), (64, 256), (256, 64)]),
    ("small contracted dim", "b i k, b k j -> b i j", "bik,bkj->bij",
     [(64, 128, 4), (64, 4, 128)]),
]


def timed(fn, args, number):
    start = time.perf_counter()
    for _ in range(number):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / number


def callables(expr, subscripts):
    mine = lambda *a: einc.einsum(expr, *a)  # noqa: E731
    theirs = lambda *a: jnp.einsum(subscripts, *a)  # noqa: E731

    def sq(f):
        return lambda *a: jnp.sum(f(*a) ** 2)

    n = expr.count(",") + 1
    return {"einc fwd": jax.jit(mine), "jnp fwd": jax.jit(theirs),
            "einc grad": jax.jit(jax.grad(sq(mine), tuple(range(n)))),
            "jnp grad": jax.jit(jax.grad(sq(theirs), tuple(range(n))))}


def rearrange_callables():
    pattern = "b h n k -> b n (h k)"
    return {"einc fwd": jax.jit(lambda x: einc.rearrange(x, pattern)),
            "einops fwd": jax.jit(lambda x: einops.rearrange(x, pattern))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20)
    args = parser.parse_args()
    r = np.random.default_rng(0)
    rows = []
    for name, expr, subscripts, shapes in CASES:
        ts = [jnp.asarray(r.standard_normal(s).astype(np.float32))
              for s in shapes]
        rows.append((name, callables(expr, subscripts), ts))
    rows.append(("rearrange (8,8,128,64)", rearrange_callables(),
                 [jnp.asarray(r.standard_normal((8, 8, 128, 64))
                              .astype(np.float32))]))
    times = {(name, k): [] for name, fns, _ in rows for k in fns}
    for name, fns, ts in rows:  # compile and warm
        for f in fns.values():
            timed(f, ts, 2)
    for _ in range(args.rounds):
        for name, fns, ts in rows:
            for k, f in fns.items():
                times[(name, k)].append(timed(f, ts, args.number))
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}; median of "
          f"{args.rounds} rounds of {args.number} calls, us per call")
    for name, fns, _ in rows:
        cells = "  ".join(f"{k} {statistics.median(times[(name, k)]) * 1e6:9.1f}"
                          for k in fns)
        print(f"{name:24s} {cells}")


if __name__ == "__main__":
    main()
