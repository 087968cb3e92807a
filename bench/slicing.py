"""What running a sliced plan costs on the CPU (issue 26): each case is
planned and timed whole and sliced (`einc bench --slice`), in alternation,
and the time ratio is set against the FLOP overhead the plan reports. The
target: sliced time <= unsliced time x FLOP overhead x 1.1.

  python bench/slicing.py --einc build-ci/einc [--runs 30] [--rounds 3]

(the lead's quiet rerun: `OMP_NUM_THREADS=1 python bench/slicing.py
--einc build-ci/einc --runs 30 --rounds 5`)

Cases fit both ways (small enough to run whole). A slice spec `j` takes one
index of j per slice, `j:4` four chunks of j (ein_options.slice_axes);
`limit/4` is the memory limit at a quarter of the whole plan's largest
buffer, sliced as the planner chooses (the fewest chunks that fit,
docs/design.md "Chunked slices"). Output axes write their pieces in place;
summed axes add up (the sums of "Sliced plans and limits").
"""
import argparse
import json
import subprocess

RING = ("i j k, k l m, m n i -> j l n", ["48x48x48"] * 3)
CYCLE = ("a b, b c, c d, d a ->", ["256x256"] * 4)
SQUARE = ("a b c, c d e, e f a, b d f -> ", ["24x24x24"] * 4)
CASES = [
    # (expression, shapes), slice spec or "limit/N"
    (RING, "j"),
    (RING, "j:4"),
    (RING, "k:4"),
    (RING, "j:2,k:2"),
    (RING, "limit/4"),
    (CYCLE, "a"),
    (CYCLE, "a:4"),
    (CYCLE, "limit/4"),
    (SQUARE, "a,c"),
    (SQUARE, "a:2,c:2"),
    (SQUARE, "limit/4"),
]


def run(einc, args):
    p = subprocess.run([einc] + args, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"einc {' '.join(args)}: {p.stderr[:400]}")
    return json.loads(p.stdout)


def planned(einc, expr, shapes, spec):
    """The sliced plan's JSON and the --slice text that reproduces it."""
    if not spec.startswith("limit/"):
        return run(einc, ["plan", expr, *shapes, "--slice", spec, "--json"]), spec
    whole = run(einc, ["plan", expr, *shapes, "--json"])
    limit = whole["workspace_bytes"] // int(spec.split("/")[1])
    plan = run(einc, ["plan", expr, *shapes, "--memory-limit", str(limit),
                      "--json"])
    sl = plan["slicing"]
    if not sl:
        raise SystemExit(f"{expr}: not sliced under {limit} bytes")
    axes = ",".join(f"{a}:{n}" for a, n in zip(sl["axes"], sl["axis_slices"]))
    return plan, axes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--einc", required=True)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print("| case | sliced | slices | FLOP overhead | whole ms | sliced ms "
          "| time ratio | ratio / overhead | within 1.1 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (expr, shapes), spec in CASES:
        plan, axes = planned(a.einc, expr, shapes, spec)
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
        label = axes if spec == axes else f"{spec}: {axes}"
        print(f"| `{expr}` {' '.join(shapes)} | {label} | {slices:g} | "
              f"{overhead:.3f} | {best['whole']:.3f} | {best['sliced']:.3f} | "
              f"{ratio:.3f} | {ratio / overhead:.3f} | "
              f"{'yes' if ratio <= overhead * 1.1 else 'no'} |")


if __name__ == "__main__":
    main()
