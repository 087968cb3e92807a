"""What running a sliced plan costs on the CPU (issue 26): each case is
planned and timed whole and sliced (`einc bench --slice`), in alternation,
and the time ratio is set against the FLOP overhead the plan reports. The
target: sliced time <= unsliced time x FLOP overhead x 1.1.

  python bench/slicing.py --einc build-ci/einc [--runs 30] [--rounds 3]

Cases fit both ways (small enough to run whole); they slice an output
axis (pieces written in place, no sums) and a summed axis (the sums of
docs/design.md, "Sliced plans and limits").
"""
import argparse
import json
import subprocess

CASES = [
    # expression, shapes, sliced axes
    ("i j k, k l m, m n i -> j l n", ["48x48x48"] * 3, "j"),
    ("i j k, k l m, m n i -> j l n", ["48x48x48"] * 3, "k"),
    ("i j k, k l m, m n i -> j l n", ["48x48x48"] * 3, "j,k"),
    ("a b, b c, c d, d a ->", ["256x256"] * 4, "a"),
    ("a b c, c d e, e f a, b d f -> ", ["24x24x24"] * 4, "a,c"),
]


def run(einc, args):
    p = subprocess.run([einc] + args, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"einc {' '.join(args)}: {p.stderr[:400]}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--einc", required=True)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print("| case | sliced | slices | FLOP overhead | whole ms | sliced ms "
          "| time ratio | ratio / overhead | within 1.1 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for expr, shapes, axes in CASES:
        plan = run(a.einc, ["plan", expr, *shapes, "--slice", axes, "--json"])
        overhead = plan["slicing"]["overhead"]
        slices = plan["slicing"]["slices"]
        best = {"whole": float("inf"), "sliced": float("inf")}
        for _ in range(a.rounds):  # alternate, keep each one's fastest
            for kind in ("whole", "sliced"):
                extra = ["--slice", axes] if kind == "sliced" else []
                r = run(a.einc, ["bench", expr, *shapes, "--runs",
                                 str(a.runs), "--no-floor", "--json", *extra])
                best[kind] = min(best[kind], r["ms_min"])
        ratio = best["sliced"] / best["whole"]
        print(f"| `{expr}` {' '.join(shapes)} | {axes} | {slices:g} | "
              f"{overhead:.3f} | {best['whole']:.3f} | {best['sliced']:.3f} | "
              f"{ratio:.3f} | {ratio / overhead:.3f} | "
              f"{'yes' if ratio <= overhead * 1.1 else 'no'} |")


if __name__ == "__main__":
    main()
