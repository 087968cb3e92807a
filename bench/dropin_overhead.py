"""Per-call time of einc's drop-ins (einc.numpy.einsum,
einc.opt_einsum.contract and a contract_expression) against einc.einsum
itself on an 8x8 matmul (issue 27: within 10%). Blocks of calls of each
function alternate, each timed in this thread's CPU time (time spent
descheduled on a loaded machine does not count), and each function's best
block is taken.

    python bench/dropin_overhead.py [--rounds 200] [--block 2000]
"""
import argparse
import time

import numpy as np

import einc
import einc.numpy as enp
import einc.opt_einsum as eoe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--block", type=int, default=2000)
    args = ap.parse_args()
    a, b = np.random.rand(8, 8), np.random.rand(8, 8)
    expr = eoe.contract_expression("ij,jk->ik", a.shape, b.shape)
    calls = {
        "einc.einsum": lambda: einc.einsum("ij,jk->ik", a, b),
        "einc.numpy.einsum": lambda: enp.einsum("ij,jk->ik", a, b),
        "einc.opt_einsum.contract": lambda: eoe.contract("ij,jk->ik", a, b),
        "contract_expression()": lambda: expr(a, b),
    }
    best = {name: float("inf") for name in calls}
    for _ in range(args.rounds):
        for name, f in calls.items():
            t = time.thread_time()
            for _ in range(args.block):
                f()
            best[name] = min(best[name], (time.thread_time() - t)
                             / args.block)
    base = best["einc.einsum"]
    for name, t in best.items():
        print(f"{name:26s} {t * 1e6:7.3f} us  {(t / base - 1) * 100:+6.1f}%")


if __name__ == "__main__":
    main()
