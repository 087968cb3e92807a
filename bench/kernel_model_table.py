#!/usr/bin/env python3
"""Today's generated kernels through the per-kernel GPU model (issue 34
item 5): for each GPU case of bench/cases.tsv at its GPU size, and with
--cliffs each case of tests/gpu_model_cases.tsv at its stored size (the
bench cases scaled down, and the cliff kinds: odd transposes, head split
and merge, strided reductions, GQA folds) plus the extra cases below,
every kernel launch with its sectors per request against the ideal, the
sectors' bytes against the bytes its requests needed, shared wavefronts
per request, occupancy, what bounds it and its predicted time against its
floor, from `einc bench --backend emu --counters --json`
(EINC_EMU_SAMPLE_BLOCKS blocks a launch, 96 by default, scaled).

  python3 bench/kernel_model_table.py --einc build/einc [--cliffs] --out FILE.md

A launch's floor is the larger of its step's roofline and the model's own
floor (launch + the distinct sectors at the full bandwidth: a gather's
floor, where the roofline's element bytes understate it); both are
listed. A launch is a miss when it is bound by memory (DRAM, L2, L1 or
shared memory) and over 1.3x its floor, when its sectors per request are
over 1.25x the ideal (docs/design.md, "The ideal of a gather"), when it
spills, or under 25% occupancy. An issue- or launch-bound launch over
1.3x is listed as such, not as a miss of the criterion (which is about
memory-bound kernels). Deterministic (the counts are sums over a fixed
sample).
"""
import argparse
import json
import os
import shlex
import subprocess


def bench_cases():
    """(name, expr, GPU shapes, flags) of bench/cases.tsv (cases.py)."""
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cases as suite
    for c in suite.load():
        if not c.shapes("gpu"):
            continue  # a CPU-only case
        yield (c.name, c.expr, ["x".join(map(str, s)) for s in c.shapes("gpu")],
               c.flags)


def model(einc, expr, shapes, flags, dtype, env):
    p = subprocess.run([einc, "bench", "--backend", "emu", "--counters",
                        "--json", expr, *shapes, "--dtype", dtype, *flags],
                       capture_output=True, text=True, env=env)
    if p.returncode:
        raise RuntimeError(p.stderr)
    return json.loads(p.stdout)["kernel_model"]


# cliff kinds at sizes past the stored figures' (an odd 2-byte transpose
# whose plane fills the GPU, and one with a rest axis)
EXTRA = [("odd_transpose_big", "i j -> j i", ["4093x4099"], [], "bf16"),
         ("odd_transpose3_big", "a b c -> c b a", ["129x65x257"], [],
          "f16")]


def cliff_cases():
    """Every case of tests/gpu_model_cases.tsv (the bench cases scaled
    down, where some run kernels their bench sizes give to cuBLAS, and the
    cliff kinds), then EXTRA."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for line in open(os.path.join(root, "tests", "gpu_model_cases.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        name, expr, shapes, flags, dtypes = line.rstrip("\n").split("\t")
        for dtype in dtypes.split():
            yield name, expr, shapes.split(), shlex.split(flags), dtype
    yield from EXTRA


MEMORY_BOUNDS = ("memory", "L2", "L1", "shared")


def rows(name, dtype, km):
    roof = {s["step"]: s["roofline_seconds"] for s in km["steps"]}
    for l in km["launches"]:
        req = max(l["requests"], 1)
        spr, ideal = l["sectors"] / req, l["ideal_sectors"] / req
        moved = (32 * l["sectors"] / l["request_bytes"]
                 if l["request_bytes"] else 0)
        wf = (l["shared_wavefronts"] / l["shared_requests"]
              if l["shared_requests"] else 0)
        floor = max(roof[l["step"]], l["floor_seconds"])
        ratio = l["seconds"] / floor if floor else 0
        miss = []
        if ratio > 1.3:
            miss.append("time %.2fx" % ratio if l["bound"] in MEMORY_BOUNDS
                        else "(%s-bound %.2fx)" % (l["bound"], ratio))
        if ideal and spr > 1.25 * ideal:
            miss.append("sectors %.2fx" % (spr / ideal))
        if l["spill_store_bytes"] + l["spill_load_bytes"]:
            miss.append("spills")
        if l["occupancy"] < 0.25:
            miss.append("occupancy %.0f%%" % (100 * l["occupancy"]))
        yield ("| %s | %s | %d.%d %s | %s | %d | %.2f | %.2f | %.2f | %.2f "
               "| %.0f%% | %s | %.2f | %.2f | %.2f | %.2f | %s |" % (
                   name, dtype, l["step"], l["pass"], l["entry"], l["kind"],
                   l["blocks"], spr, ideal, moved, wf, 100 * l["occupancy"],
                   l["bound"], 1e6 * l["seconds"], 1e6 * l["floor_seconds"],
                   1e6 * roof[l["step"]], ratio, ", ".join(miss) or "-"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--einc", default="build/einc")
    ap.add_argument("--sample", default="96")
    ap.add_argument("--cliffs", action="store_true",
                    help="also the cliff kinds (tests/gpu_model_cases.tsv)")
    ap.add_argument("--out")
    args = ap.parse_args()
    env = dict(os.environ, EINC_EMU_SAMPLE_BLOCKS=args.sample)
    head = ["| case | dtype | step.pass entry | kind | blocks | sectors/req "
            "| ideal | traffic/bytes | shared wf/req | occupancy | bound | "
            "model us | launch floor us | roofline us | model/floor | miss |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            "---|"]
    out, totals = list(head), []
    for name, expr, shapes, flags in bench_cases():
        for dtype in ("f32", "bf16"):
            km = model(args.einc, expr, shapes, flags, dtype, env)
            out.extend(rows(name, dtype, km))
            totals.append("| %s | %s | %.2f | %.2f | %.2f |" % (
                name, dtype, 1e6 * km["predicted_seconds"],
                1e6 * km["roofline_seconds"],
                km["predicted_seconds"] / km["roofline_seconds"]))
            print(totals[-1], flush=True)
    text = ("\n".join(out) + "\n\nPer plan (the model's total, launch and "
            "call times included, against the roofline's):\n\n"
            "| case | dtype | model us | roofline us | ratio |\n"
            "|---|---|---|---|---|\n" + "\n".join(totals) + "\n")
    if args.cliffs:
        cl = list(head)
        for name, expr, shapes, flags, dtype in cliff_cases():
            cl.extend(rows(name, dtype, model(args.einc, expr, shapes, flags,
                                              dtype, env)))
            print(cl[-1], flush=True)
        text += ("\nThe stored figures' cases (tests/gpu_model_cases.tsv's "
                 "sizes), then the extra cases:\n\n" + "\n".join(cl) + "\n")
    print(text)
    if args.out:
        open(args.out, "w").write(text)


if __name__ == "__main__":
    main()
