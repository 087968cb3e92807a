"""Per-call time of a compiled plan (einc.compile) against einc.einsum on
the same torch CPU tensors and on numpy arrays (issue 28: the compiled
plan with torch tensors was 2.4-4x slower per call than einc.einsum).
Blocks of calls of each function alternate, each timed in this thread's
CPU time (time spent descheduled on a loaded machine does not count), and
each function's best block is taken. One command:

    python bench/compiled_torch.py [--rounds 50] [--block 1000]
"""
import argparse
import time

import numpy as np
import torch

import einc

CASES = [("ij,jk->ik", [(8, 8), (8, 8)]),
         ("b i j, b j k -> b i k", [(4, 64, 32), (4, 32, 16)]),
         ("b s d -> b d", [(8, 128, 64)])]


def best_per_call(calls, rounds, block):
    best = {name: float("inf") for name in calls}
    for _ in range(rounds):
        for name, f in calls.items():
            t = time.thread_time()
            for _ in range(block):
                f()
            best[name] = min(best[name], (time.thread_time() - t) / block)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--block", type=int, default=1000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'case':<28} {'inputs':<6} {'einsum us':>10} {'compiled us':>12}"
          f" {'ratio':>6}")
    for expr, shapes in CASES:
        f = einc.compile(expr, *shapes)
        for lib in ("torch", "numpy"):
            ts = [torch.randn(*s) for s in shapes]
            if lib == "numpy":
                ts = [t.numpy() for t in ts]
            torch.testing.assert_close(torch.as_tensor(f(*ts)),
                                       torch.as_tensor(einc.einsum(expr, *ts)))
            best = best_per_call(
                {"einsum": lambda: einc.einsum(expr, *ts),
                 "compiled": lambda: f(*ts)}, args.rounds, args.block)
            print(f"{expr:<28} {lib:<6} {best['einsum'] * 1e6:>10.2f} "
                  f"{best['compiled'] * 1e6:>12.2f} "
                  f"{best['compiled'] / best['einsum']:>6.2f}")


if __name__ == "__main__":
    main()
