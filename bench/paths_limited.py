"""The limited search under a memory limit (2^27 elements): the plain
limited search alone (path_driver --limited plain) against the default
(the plain one and the windowed one, the cheaper kept), in one run,
interleaved per row, on bench/paths_hard.py's networks that slice.
Every path is costed by bench/paths.py's cost.

  python bench/paths_limited.py --driver build/path_driver --seeds 0 1 2
  python bench/paths_limited.py --ctg-time 30   # cotengra's sliced trees
(cotengra's HyperOptimizer as in paths_hard.py, its best tree sliced by
its own slicer to 2^27; needs cotengra and kahypar.)
"""
import argparse
import json
import math
import os
import subprocess

import paths as P
from paths_hard import LIMIT, SLICER_MAX, ctg_search, hard_cases

SLICED = ["random 3-regular n=300", "random 3-regular n=500",
          "random 3-regular n=1000", "random 4-regular n=100",
          "random 4-regular n=150", "random 4-regular n=200",
          "3D lattice 5x5x5 bond 2", "3D lattice 4x4x4 bond 4",
          "circuit 7x7 depth 20"]


def run(driver, ops, out, sizes, seed, limited):
    lines = [f"{len(ops)} {len(sizes)}", " ".join(map(str, sizes))]
    lines += [" ".join(map(str, [len(o)] + o)) for o in ops]
    lines.append(" ".join(map(str, [len(out)] + out)))
    args = [driver, "--limit", str(LIMIT), "--seed", str(seed)]
    args += ["--limited", limited] if limited else []
    r = subprocess.run(args, input="\n".join(lines), capture_output=True,
                       text=True, check=True)
    res = json.loads(r.stdout)
    f, l = P.cost(ops, out, sizes, res["ssa"], res["sliced"])
    assert l <= LIMIT, (limited, l)
    return f, res


def cotengra_rows(seconds):
    print("| case | cotengra sliced: log10 FLOPs / log2 largest / trials / "
          "s search |")
    print("|---|---|")
    for name, (ops, out, sizes) in hard_cases():
        if name not in SLICED:
            continue
        tree, dt, trials = ctg_search(ops, out, sizes, seconds)
        ssa = [list(p) for p in tree.get_ssa_path()]
        big = P.cost(ops, out, sizes, ssa)[1]
        if big > SLICER_MAX:
            print(f"| {name} | not sliced (largest 2^{math.log2(big):.0f}) |")
            continue
        sl = tree.slice(target_size=LIMIT) if big > LIMIT else tree
        f, l = P.cost(ops, out, sizes, ssa, list(sl.sliced_inds))
        print(f"| {name} | {math.log10(f):.4f} / {math.log2(l):.1f} / "
              f"{trials} / {dt:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default="build/path_driver")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--ctg-time", type=float, default=0)
    args = ap.parse_args()
    if args.ctg_time > 0:
        return cotengra_rows(args.ctg_time)
    cases = [c for c in hard_cases() if c[0] in SLICED]
    print(f"<!-- load at start: {os.getloadavg()} -->")
    print("| case | seed | plain: log10 FLOPs / s / work/budget | default: "
          "log10 FLOPs / s / work/budget | default/plain |")
    print("|---|---|---|---|---|")
    for seed in args.seeds:
        for name, (ops, out, sizes) in cases:
            cells, fs = [], []
            for limited in ["plain", ""]:
                f, res = run(args.driver, ops, out, sizes, seed, limited)
                fs.append(f)
                cells.append(f"{math.log10(f):.4f} / {res['seconds']:.2f} / "
                             f"{res['work'] / res['work_budget']:.2f}")
            print(f"| {name} | {seed} | {cells[0]} | {cells[1]} | "
                  f"{fs[1] / fs[0]:.4f} |", flush=True)
    print(f"<!-- load at end: {os.getloadavg()} -->")


if __name__ == "__main__":
    main()
