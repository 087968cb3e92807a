"""Contraction order on hard tensor networks (issue 36): einc against
opt_einsum and cotengra's HyperOptimizer in one run.

Families, each generated from a seed (bench/paths.py's generators):
random 3-regular graphs of 150-1,000 tensors, random 4-regular of
100-200, 2D and 3D lattices with bonds 2-4, single amplitudes of random
circuits 5x5 to 7x7 of depth 12-20.

Planners: einc (build/path_driver: the default budget, then cotengra's
time as its budget), opt_einsum 'greedy' and 'random-greedy' (32
repeats), cotengra HyperOptimizer (methods greedy and kahypar, FLOPs
minimised, --ctg-time seconds, one process). Every path is costed by
bench/paths.py's cost (opt_einsum's FLOP count, the largest intermediate
excluding the output), independently of the planners' own reports.
Sliced: einc under a memory limit of 2^27 elements against cotengra's
best tree sliced by its own slicer (ContractionTree.slice) to the same
size.

  python bench/paths_hard.py --driver build/path_driver --ctg-time 30 \\
      > bench/results/DATE-paths.md
"""
import argparse
import math
import platform
import sys
import time

import opt_einsum as oe

import paths as P

LIMIT = 2 ** 27
# cotengra's slicer is not run on trees whose largest intermediate is past
# this: on 3-regular n=1000 (2^150) it held 13 GB, then failed at 4 GB
SLICER_MAX = 2 ** 100


def hard_cases(quick=False):
    cs = []
    for n in [150, 200, 300, 500, 1000]:
        cs.append((f"random 3-regular n={n}", P.regular(n, 3, 2, n)))
    for n in [100, 150, 200]:
        cs.append((f"random 4-regular n={n}", P.regular(n, 4, 2, n + 1)))
    cs.append(("2D lattice 12x12 bond 3", P.lattice((12, 12), 3)))
    cs.append(("2D lattice 16x16 bond 2", P.lattice((16, 16), 2)))
    cs.append(("3D lattice 5x5x5 bond 2", P.lattice((5, 5, 5), 2)))
    cs.append(("3D lattice 4x4x4 bond 4", P.lattice((4, 4, 4), 4)))
    for w, d in [(5, 12), (6, 16), (7, 20)]:
        cs.append((f"circuit {w}x{w} depth {d}", P.circuit(w, w, d, 100 + d)))
    return cs[:3] if quick else cs


def ctg_search(ops, out, sizes, seconds):
    import cotengra as ctg
    opt = ctg.HyperOptimizer(methods=["greedy", "kahypar"], max_time=seconds,
                             max_repeats=10 ** 6, minimize="flops",
                             parallel=False, progbar=False)
    t0 = time.perf_counter()
    tree = opt.search([tuple(o) for o in ops], tuple(out),
                      {a: s for a, s in enumerate(sizes)})
    dt = time.perf_counter() - t0
    return tree, dt, len(opt.scores)


def lg(x):
    return math.log10(max(x, 1))


def cell(c, secs):
    return f"{lg(c[0]):.2f} / {math.log2(max(c[1], 1)):.0f} / {secs:.3g}"


def run_case(args, name, ops, out, sizes):
    row = {}
    ssa, secs, _, _ = P.einc(args.driver, ops, out, sizes, seed=args.seed)
    row["einc"] = (P.cost(ops, out, sizes, ssa), secs)
    if args.before:
        ssa, secs, _, _ = P.einc(args.before, ops, out, sizes,
                                 seed=args.seed)
        row["einc before"] = (P.cost(ops, out, sizes, ssa), secs)
    for how in ["greedy", "random-greedy"]:
        ssa_o, dt = P.oe_plan(ops, out, sizes, how)
        row[how] = (P.cost(ops, out, sizes, ssa_o), dt)
    tree, dt, trials = ctg_search(ops, out, sizes, args.ctg_time)
    ssa_c = [list(p) for p in tree.get_ssa_path()]
    row["cotengra"] = (P.cost(ops, out, sizes, ssa_c), dt)
    ssa, secs, _, _ = P.einc(args.driver, ops, out, sizes, budget=dt,
                             seed=args.seed)
    row["einc same time"] = (P.cost(ops, out, sizes, ssa), secs)
    # sliced: einc under the limit; cotengra's tree sliced by cotengra
    _, secs, _, res = P.einc(args.driver, ops, out, sizes, limit=LIMIT,
                             seed=args.seed)
    e_sl = P.cost(ops, out, sizes, res["ssa"], res["sliced"])
    t0 = time.perf_counter()
    big = row["cotengra"][0][1]
    if big > SLICER_MAX:  # its slicer ran out of 4 GB on 3-regular n=1000
        row["sliced"] = (e_sl, secs, None, 0, len(res["sliced"]), 0)
        return row, trials
    sl = tree.slice(target_size=LIMIT) if big > LIMIT else tree
    c_sl = P.cost(ops, out, sizes, ssa_c, list(sl.sliced_inds))
    row["sliced"] = (e_sl, secs, c_sl, time.perf_counter() - t0,
                     len(res["sliced"]), len(sl.sliced_inds))
    return row, trials


def summary(rows):
    upto = [(n, r) for n, k, r, _ in rows if k <= 500]
    ratio = [r["einc"][0][0] / r["cotengra"][0][0] for _, r in upto]
    tenth = sum(r["einc"][1] <= r["cotengra"][1] / 10 for _, r in upto)
    same = [r["einc same time"][0][0] / r["cotengra"][0][0] for _, _, r, _
            in rows]
    sl = [r["sliced"][0][0] / r["sliced"][2][0] for _, _, r, _ in rows
          if r["sliced"][2]]
    print("\n## Against the targets (issue 36)\n")
    print(f"- default budget, cases up to 500 tensors: within 1.5x of "
          f"cotengra's FLOPs in {sum(x <= 1.5 for x in ratio)} of "
          f"{len(ratio)} (geomean ratio "
          f"{math.exp(sum(map(math.log, ratio)) / len(ratio)):.2f}, worst "
          f"{max(ratio):.3g}); planning in at most 1/10 of cotengra's time "
          f"in {tenth} of {len(upto)}")
    bef = [r["einc before"][0][0] / r["cotengra"][0][0] for _, r in upto
           if "einc before" in r]
    if bef:
        print(f"- the earlier build (--before) in the same run: within 1.5x "
              f"in {sum(x <= 1.5 for x in bef)} of {len(bef)} (geomean "
              f"ratio {math.exp(sum(map(math.log, bef)) / len(bef)):.2f}, "
              f"worst {max(bef):.3g})")
    print(f"- given cotengra's time: at or below cotengra's FLOPs in "
          f"{sum(x <= 1 + 1e-9 for x in same)} of {len(same)} cases "
          f"(geomean ratio "
          f"{math.exp(sum(map(math.log, same)) / len(same)):.2f})")
    print(f"- sliced at 2^27 elements: within 2x of cotengra's sliced tree "
          f"in {sum(x <= 2 for x in sl)} of {len(sl)} (worst "
          f"{max(sl):.3g})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default="build/path_driver")
    ap.add_argument("--ctg-time", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before", default="",
                    help="an earlier build's path_driver: its default-budget "
                    "path in the same run (column 'einc before')")
    args = ap.parse_args()
    import cotengra as ctg
    import kahypar  # noqa: F401 (cotengra's partitioner must be there)
    print(f"# Contraction order on hard networks ({time.strftime('%Y-%m-%d')}"
          ", issue 36)\n")
    print(f"machine: {platform.machine()}, {platform.system()}, python "
          f"{platform.python_version()}, opt_einsum {oe.__version__}, "
          f"cotengra {ctg.__version__} with kahypar; cotengra HyperOptimizer "
          f"(greedy + kahypar, minimize flops) for {args.ctg_time:g} s a "
          f"case, one process.\n")
    print("Each cell: log10 FLOPs / log2 largest intermediate / planning "
          "seconds (wall). All paths costed by bench/paths.py cost.\n")
    cols = ["einc", "greedy", "random-greedy", "cotengra", "einc same time"]
    if args.before:
        cols.insert(1, "einc before")
    before = " before/cotengra |" if args.before else ""
    print("| case | n | " + " | ".join(cols) + " | cotengra trials | "
          "einc/cotengra |" + before + " same time/cotengra |")
    print("|---|---|" + "---|" * len(cols) + "---|---|---|" +
          ("---|" if args.before else ""))
    rows = []
    for name, (ops, out, sizes) in hard_cases(args.quick):
        row, trials = run_case(args, name, ops, out, sizes)
        rows.append((name, len(ops), row, trials))
        r1 = row["einc"][0][0] / row["cotengra"][0][0]
        r2 = row["einc same time"][0][0] / row["cotengra"][0][0]
        r0 = (f" {row['einc before'][0][0] / row['cotengra'][0][0]:.3g} |"
              if args.before else "")
        print(f"| {name} | {len(ops)} | " +
              " | ".join(cell(*row[c]) for c in cols) +
              f" | {trials} | {r1:.3g} |{r0} {r2:.3g} |", flush=True)
    print("\n## Sliced under 2^27 elements\n")
    print("| case | einc: log10 FLOPs / log2 largest slice / axes / s | "
          "cotengra's tree sliced by cotengra | einc/cotengra |")
    print("|---|---|---|---|")
    for name, _, row, _ in rows:
        e, es, c, cs, ne, nc = row["sliced"]
        theirs = (f"{lg(c[0]):.2f} / {math.log2(max(c[1], 1)):.0f} / {nc} / "
                  f"{cs:.3g} | {e[0] / c[0]:.3g}" if c else
                  "not run (tree past 2^100: its slicer ran out of memory) "
                  "| -")
        print(f"| {name} | {lg(e[0]):.2f} / {math.log2(max(e[1], 1)):.0f} / "
              f"{ne} / {es:.3g} | {theirs} |", flush=True)
    summary(rows)


if __name__ == "__main__":
    sys.exit(main())
