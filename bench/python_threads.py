"""python_threads.py - do Python threads calling einc scale (issue 17)?

einc lets the GIL go while a plan runs, so two threads each running large
plans should take about as long as one thread running its share, where
the machine has the cores. Holding the GIL would make them take twice as
long. Each round times, on a 768^3 f32 GEMM with the CPU backend on one
thread per call (EINC_NUM_THREADS=1, set here before einc loads, so the
backend's own OpenMP threads do not compete with the Python threads):

  1 thread    N calls on this thread
  2 threads   N calls on each of two threads at once (2N calls)
  2 processes N calls in each of two processes at once: what the machine
              gives two workers whatever the GIL does, the ceiling

and reports per round the ratio of the 2-thread time to the 1-thread
time (1.0: perfect scaling, 2.0: serialised) beside the same ratio for
processes. The figures mean something only where two cores are free:
on a busy machine both ratios sit near 2.0 whatever the GIL does (then
tests/python/test_threads_leaks.py's GIL test is the evidence: another
thread runs Python while a plan runs). The rounds alternate the three so that load from elsewhere
hits all alike.

usage: python bench/python_threads.py [--rounds R] [--calls N] [--n SIZE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("EINC_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import einc  # noqa: E402

EXPR = "i j, j k -> i k"


def operands(n):
    r = np.random.default_rng(0)
    return [r.standard_normal((n, n)).astype(np.float32) for _ in range(2)]


def calls(a, b, count):
    for _ in range(count):
        einc.einsum(EXPR, a, b)


def on_threads(nthreads, a, b, count):
    """Seconds for nthreads threads to make count calls each."""
    threads = [threading.Thread(target=calls, args=(a, b, count))
               for _ in range(nthreads)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t


WORKER = """
import sys, time, numpy as np, einc
n, count = int(sys.argv[1]), int(sys.argv[2])
r = np.random.default_rng(0)
a, b = (r.standard_normal((n, n)).astype(np.float32) for _ in range(2))
einc.einsum("i j, j k -> i k", a, b)
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
t = time.perf_counter()
for _ in range(count):
    einc.einsum("i j, j k -> i k", a, b)
print(time.perf_counter() - t)
"""


def on_processes(nprocs, n, count):
    """Seconds until nprocs warmed-up processes, started together, have
    made count calls each (the slowest one's time)."""
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(n),
                               str(count)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
             for _ in range(nprocs)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return max(float(p.communicate()[0]) for p in procs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--n", type=int, default=768)
    args = ap.parse_args()
    a, b = operands(args.n)
    calls(a, b, 2)  # plan cached, pages touched
    print(f"{os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; {args.n}^3 f32 GEMM, "
          f"EINC_NUM_THREADS={os.environ['EINC_NUM_THREADS']}, "
          f"{args.calls} calls per worker\n")
    print("| round | 1 thread s | 2 threads s | threads ratio | "
          "1 process s | 2 processes s | processes ratio |")
    print("|---|---|---|---|---|---|---|")
    tr, pr = [], []
    for r in range(args.rounds):
        one = on_threads(1, a, b, args.calls)
        two = on_threads(2, a, b, args.calls)
        p1 = on_processes(1, args.n, args.calls)
        p2 = on_processes(2, args.n, args.calls)
        tr.append(two / one)
        pr.append(p2 / p1)
        print(f"| {r + 1} | {one:.3f} | {two:.3f} | {two / one:.2f} | "
              f"{p1:.3f} | {p2:.3f} | {p2 / p1:.2f} |")
    print(f"\nmedian ratio: threads {statistics.median(tr):.2f}, "
          f"processes {statistics.median(pr):.2f} (1.0: two workers in "
          f"the time of one; 2.0: one after the other); load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
