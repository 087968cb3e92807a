"""Contraction-order planners on generated tensor networks (issue 26).

Planners: einc's path search (build/path_driver, the search of
src/planner/path/path.h on a network from stdin, default budget), opt_einsum
greedy / random-greedy-128 / auto-hq, cotengra HyperOptimizer (64 trials).
Every path is costed the same way here (opt_einsum's FLOP count, the
largest intermediate excluding the output), so the planners' own reports
do not matter. Sliced: at 1/16 of the best unlimited largest intermediate,
einc's slicing against cotengra's SliceFinder on its own tree.

  python bench/paths.py --driver build-ci/path_driver [--quick] > out.md

--peers FILE keeps the peers' paths (opt_einsum's and cotengra's, with
their planning times, and cotengra SliceFinder's axes per limit: it is
randomized) in FILE as JSON: a run with FILE present reuses them and only
einc plans again (cotengra's 64 trials take minutes a case). Without it
every planner runs. --sliced: only the cases the sliced comparison covers
(up to PEERS_MAX operands); --seed S: einc's seed.
"""
import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import time

import opt_einsum as oe


# ------------------------------------------------------------ networks

def regular(n, deg, bond, seed):
    rng = random.Random(seed)
    stubs = [v for v in range(n) for _ in range(deg)]
    rng.shuffle(stubs)
    ops = [[] for _ in range(n)]
    sizes = []
    for k in range(0, len(stubs) - 1, 2):
        a, b = stubs[k], stubs[k + 1]
        if a == b:
            continue
        ops[a].append(len(sizes))
        ops[b].append(len(sizes))
        sizes.append(bond)
    return ops, [], sizes


def lattice(dims, bond):
    import itertools
    coords = list(itertools.product(*[range(d) for d in dims]))
    index = {c: i for i, c in enumerate(coords)}
    ops = [[] for _ in coords]
    sizes = []
    for c in coords:
        for ax in range(len(dims)):
            d = list(c)
            d[ax] += 1
            d = tuple(d)
            if d in index:
                ops[index[c]].append(len(sizes))
                ops[index[d]].append(len(sizes))
                sizes.append(bond)
    return ops, [], sizes


def circuit(w, h, depth, seed):
    """Single amplitude of a random circuit: vectors in and out per qubit,
    a 4-index gate per neighbouring pair in one of four patterns."""
    rng = random.Random(seed)
    q = w * h
    ops, sizes = [], []

    def axis():
        sizes.append(2)
        return len(sizes) - 1

    cur = [axis() for _ in range(q)]
    ops += [[a] for a in cur]
    for d in range(depth):
        pat = d % 4
        for k in range(q):
            x, y = k % w, k // w
            if pat < 2:
                if x % 2 != pat or x + 1 >= w:
                    continue
                o = k + 1
            else:
                if y % 2 != pat - 2 or y + 1 >= h:
                    continue
                o = k + w
            if rng.random() < 0.25:
                continue
            na, nb = axis(), axis()
            ops.append([cur[k], cur[o], na, nb])
            cur[k], cur[o] = na, nb
    ops += [[a] for a in cur]
    return ops, [], sizes


def rand_eq(n, seed):
    from opt_einsum.testing import rand_equation
    eq, shapes = rand_equation(n, 3, n_out=2, d_min=2, d_max=6,
                                          seed=seed)
    lhs, rhs = eq.split('->')
    terms = lhs.split(',')
    letters = {}
    sizes = []
    ops = []
    for t, shp in zip(terms, shapes):
        op = []
        for ch, s in zip(t, shp):
            if ch not in letters:
                letters[ch] = len(sizes)
                sizes.append(s)
            op.append(letters[ch])
        ops.append(op)
    return ops, [letters[c] for c in rhs], sizes


def cases(quick):
    cs = []
    for n in [10, 20, 30, 40]:
        cs.append((f"rand_equation n={n}", rand_eq(n, n)))
    cs.append(("2D lattice 6x6 bond4", lattice((6, 6), 4)))
    cs.append(("2D lattice 10x10 bond2", lattice((10, 10), 2)))
    cs.append(("2D lattice 8x8 bond8", lattice((8, 8), 8)))
    cs.append(("3D lattice 3x3x3 bond2", lattice((3, 3, 3), 2)))
    cs.append(("3D lattice 4x4x4 bond2", lattice((4, 4, 4), 2)))
    for d in ([8] if quick else [8, 14, 20]):
        cs.append((f"circuit 4x4 depth {d}", circuit(4, 4, d, d)))
    for n in ([20, 50] if quick else [20, 50, 100]):
        cs.append((f"regular d3 n={n} bond2", regular(n, 3, 2, n)))
    cs.append(("regular d4 n=20 bond2", regular(20, 4, 2, 21)))
    if not quick:
        for n in [200, 1000]:
            cs.append((f"regular d3 n={n} bond2", regular(n, 3, 2, n)))
        cs.append(("2D lattice 32x32 bond2", lattice((32, 32), 2)))
    return cs


# Above this many operands only einc and greedy run (cotengra's 64 trials
# took 244 s at 100 operands on this shared machine; auto-hq and
# random-greedy-128 minutes at 200).
PEERS_MAX = 120


# --------------------------------------------------------------- costs

def cost(ops, out, sizes, ssa, sliced=()):
    """FLOPs (opt_einsum's count) and largest intermediate of one slice
    times the number of slices; the output is not an intermediate."""
    sz = list(sizes)
    nsl = 1
    for a in sliced:
        nsl *= sz[a]
        sz[a] = 1
    total = {}
    for op in ops:
        for a in set(op):
            total[a] = total.get(a, 0) + 1
    for a in out:
        total[a] = total.get(a, 0) + 1
    nodes = [{a: 1 for a in set(op) if total[a] > 1} for op in ops]
    flops, largest = 0.0, 0.0
    for k, (i, j) in enumerate(ssa):
        a, b = nodes[i], nodes[j]
        touched = dict(a)
        for x, c in b.items():
            touched[x] = touched.get(x, 0) + c
        kept = {x: c for x, c in touched.items() if c < total[x]}
        vol = math.prod(sz[x] for x in touched)
        flops += vol * (2 if len(kept) < len(touched) else 1)
        size = math.prod(sz[x] for x in kept)
        if k < len(ssa) - 1:
            largest = max(largest, size)
        nodes.append(kept)
    return flops * nsl, largest


def linear_to_ssa(path, n):
    live = list(range(n))
    ssa = []
    for pair in path:
        ids = [live[p] for p in pair]
        for p in sorted(pair, reverse=True):
            live.pop(p)
        while len(ids) > 2:  # not expected: all planners here are pairwise
            ids = ids[:1] + [ids[1]]
        ssa.append(ids)
        live.append(n + len(ssa) - 1)
    return ssa


# ------------------------------------------------------------ planners

def einc(driver, ops, out, sizes, limit=0, budget=0, seed=0):
    lines = [f"{len(ops)} {len(sizes)}", " ".join(map(str, sizes))]
    lines += [" ".join(map(str, [len(o)] + o)) for o in ops]
    lines.append(" ".join(map(str, [len(out)] + out)))
    args = [driver] + (["--limit", str(limit)] if limit else [])
    args += ["--budget", str(budget)] if budget > 0 else []
    args += ["--seed", str(seed)] if seed else []
    t0 = time.perf_counter()
    r = subprocess.run(args, input="\n".join(lines), capture_output=True,
                       text=True)
    wall = time.perf_counter() - t0
    res = json.loads(r.stdout)
    return res["ssa"], res["seconds"], wall, res


def oe_plan(ops, out, sizes, how):
    sym = oe.get_symbol
    eq = ",".join("".join(sym(a) for a in o) for o in ops) + "->" + \
        "".join(sym(a) for a in out)
    shapes = [tuple(sizes[a] for a in o) for o in ops]
    t0 = time.perf_counter()
    path, _ = oe.contract_path(eq, *shapes, shapes=True, optimize=how)
    return linear_to_ssa(path, len(ops)), time.perf_counter() - t0


def ctg_plan(ops, out, sizes):
    import cotengra as ctg
    inputs = [tuple(o) for o in ops]
    size_dict = {a: s for a, s in enumerate(sizes)}
    opt = ctg.HyperOptimizer(max_repeats=64, minimize="flops",
                             parallel=False, progbar=False)
    t0 = time.perf_counter()
    tree = opt.search(inputs, tuple(out), size_dict)
    dt = time.perf_counter() - t0
    return tree, [list(p) for p in tree.get_ssa_path()], dt


def ctg_sliced(ops, out, sizes, ssa, limit):
    import cotengra as ctg
    tree = ctg.ContractionTree.from_path(
        [tuple(o) for o in ops], tuple(out),
        {a: s for a, s in enumerate(sizes)}, ssa_path=ssa)
    sf = ctg.SliceFinder(tree, target_size=limit)
    ix, _ = sf.search()
    return list(ix)


# -------------------------------------------------------------- report

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default="build-ci/path_driver")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peers", default=None,
                    help="JSON file of the peers' paths: reused when "
                    "present, written when not")
    ap.add_argument("--seed", type=int, default=0, help="einc's seed")
    ap.add_argument("--sliced", action="store_true",
                    help="only the cases the sliced comparison covers "
                    "(up to PEERS_MAX operands)")
    ap.add_argument("--einc-budget", type=float, default=0,
                    help="only einc, with this time budget (seconds; "
                    "negative: the default budget)")
    args = ap.parse_args()
    if args.einc_budget:
        return einc_only(args)
    import cotengra as ctg
    print(f"# Contraction-order planners ({time.strftime('%Y-%m-%d')})\n")
    try:
        import kahypar  # noqa: F401
        kahypar_note = "kahypar available"
    except ImportError:
        kahypar_note = "no kahypar: cotengra falls back to its own partitioner"
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{platform.system()}; python {platform.python_version()}, "
          f"opt_einsum {oe.__version__}, cotengra {ctg.__version__} "
          f"({kahypar_note})\n")
    peers = {}
    if args.peers and os.path.exists(args.peers):
        with open(args.peers) as f:
            peers = json.load(f)
    print("Each cell: log10 FLOPs / log2 largest intermediate / planning "
          "seconds. All paths costed by one function (bench/paths.py cost).\n")
    planners = ["einc", "greedy", "random-greedy-128", "auto-hq", "cotengra"]
    print("| case | n | " + " | ".join(planners) + " | einc/cotengra FLOPs |")
    print("|---|---|" + "---|" * len(planners) + "---|")
    sliced_rows, rows = [], []
    for name, (ops, out, sizes) in cases(args.quick):
        if args.sliced and len(ops) > PEERS_MAX:
            continue
        row = {}
        rows.append((name, row))
        big = len(ops) > PEERS_MAX
        ssa, secs, _, _ = einc(args.driver, ops, out, sizes, seed=args.seed)
        row["einc"] = (*cost(ops, out, sizes, ssa), secs)
        mine = peers.setdefault(name, {})
        for how in planners[1:]:
            if big and how != "greedy":
                continue
            if how not in mine:
                if how == "cotengra":
                    _, ssa_o, dt = ctg_plan(ops, out, sizes)
                else:
                    ssa_o, dt = oe_plan(ops, out, sizes, how)
                mine[how] = {"ssa": ssa_o, "seconds": dt}
                if args.peers:
                    with open(args.peers, "w") as f:
                        json.dump(peers, f)
            ssa_o, dt = mine[how]["ssa"], mine[how]["seconds"]
            row[how] = (*cost(ops, out, sizes, ssa_o), dt)
        ssa_c = mine.get("cotengra", {}).get("ssa")
        cells = [f"{math.log10(max(row[p][0], 1)):.2f} / "
                 f"{math.log2(max(row[p][1], 1)):.1f} / {row[p][2]:.3g}"
                 if p in row else "-" for p in planners]
        ratio = (f"{row['einc'][0] / row['cotengra'][0]:.2f}"
                 if "cotengra" in row else "-")
        print(f"| {name} | {len(ops)} | " + " | ".join(cells) +
              f" | {ratio} |", flush=True)
        if big:
            continue
        best_largest = min(v[1] for v in row.values())
        limit = max(1, best_largest / 16)
        _, _, _, res = einc(args.driver, ops, out, sizes, limit,
                               seed=args.seed)
        e_sl = cost(ops, out, sizes, res["ssa"], res["sliced"])
        # SliceFinder is randomized: its axes are kept with the peers, so
        # runs reusing them compare einc against the same slicing
        kept = mine.setdefault("cotengra sliced", {})
        if repr(limit) not in kept:
            kept[repr(limit)] = ctg_sliced(ops, out, sizes, ssa_c, limit)
            if args.peers:
                with open(args.peers, "w") as f:
                    json.dump(peers, f)
        ix = kept[repr(limit)]
        c_sl = cost(ops, out, sizes, ssa_c, ix)
        sliced_rows.append((name, limit, e_sl, len(res["sliced"]), c_sl,
                            len(ix), res["seconds"]))
    print("\n## Against the targets (issue 26)\n")
    both = [r for r in rows if "cotengra" in r[1] and "auto-hq" in r[1]]
    hq = sum(r[1]["einc"][0] <= r[1]["auto-hq"][0] * (1 + 1e-9) for r in both)
    ctg = [r[1]["einc"][0] / r[1]["cotengra"][0] for r in both]
    tenth = sum(r[1]["einc"][2] <= r[1]["cotengra"][2] / 10 for r in both)
    print(f"- einc FLOPs at or below auto-hq's: {hq} of {len(both)} cases")
    print(f"- within 2x of cotengra: {sum(x <= 2 for x in ctg)} of "
          f"{len(ctg)} (largest ratio {max(ctg):.2f})")
    print(f"- planning in at most 1/10 of cotengra's time (wall): {tenth} of "
          f"{len(both)}")
    sl = [e[0] / c[0] for _, _, e, _, c, _, _ in sliced_rows]
    print(f"- sliced within 1.5x of cotengra's SliceFinder: "
          f"{sum(x <= 1.5 for x in sl)} of {len(sl)} (largest ratio "
          f"{max(sl):.2f})")
    print("\n## Sliced, limit 1/16 of the best unlimited largest "
          "intermediate\n")
    print("| case | limit (log2) | einc log10 FLOPs / log2 largest / axes "
          "| cotengra SliceFinder | einc/cotengra | einc plan s |")
    print("|---|---|---|---|---|---|")
    for name, limit, e, ne, c, nc, secs in sliced_rows:
        print(f"| {name} | {math.log2(limit):.1f} | {math.log10(e[0]):.2f} / "
              f"{math.log2(max(e[1], 1)):.1f} / {ne} | "
              f"{math.log10(c[0]):.2f} / {math.log2(max(c[1], 1)):.1f} / {nc}"
              f" | {e[0] / c[0]:.2f} | {secs:.3g} |")


def einc_only(args):
    """einc alone with a given budget: unlimited and sliced at 1/16 of its
    own largest intermediate."""
    label = (f"{args.einc_budget:g} s" if args.einc_budget > 0
             else "default")
    print(f"| case | n | einc, budget {label}: log10 FLOPs / "
          "log2 largest / s | sliced at 1/16: log10 FLOPs / log2 largest / "
          "axes |")
    print("|---|---|---|---|")
    for name, (ops, out, sizes) in cases(args.quick):
        ssa, secs, _, _ = einc(args.driver, ops, out, sizes,
                               budget=args.einc_budget)
        f, l = cost(ops, out, sizes, ssa)
        _, _, _, res = einc(args.driver, ops, out, sizes, max(1, l / 16),
                            budget=args.einc_budget)
        e = cost(ops, out, sizes, res["ssa"], res["sliced"])
        print(f"| {name} | {len(ops)} | {math.log10(f):.2f} / "
              f"{math.log2(max(l, 1)):.1f} / {secs:.3g} | "
              f"{math.log10(e[0]):.2f} / {math.log2(max(e[1], 1)):.1f} / "
              f"{len(res['sliced'])} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
