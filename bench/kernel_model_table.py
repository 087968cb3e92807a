#!/usr/bin/env python3
"""Today's generated kernels on the bench cases, through the per-kernel GPU
model (issue 34 item 5): for each GPU case of bench/cases.tsv and each
extra case of tests/gpu_model_cases.tsv's cliff kinds, every kernel launch
with its sectors per request against the ideal, shared wavefronts per
request, occupancy, what bounds it and its predicted time against its
step's roofline (the floor the model compares with), from
`einc bench --backend emu --counters --json` at the bench's GPU sizes
(EINC_EMU_SAMPLE_BLOCKS blocks a launch, 96 by default, scaled).

  python3 bench/kernel_model_table.py --einc build/einc --out FILE.md

A launch is listed as a miss when it is memory-bound and over 1.3x its
step's roofline, or its sectors per request are over 1.25x the ideal.
Deterministic (the counts are sums over a fixed sample).
"""
import argparse
import json
import os
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


def rows(name, dtype, km):
    roof = {s["step"]: s["roofline_seconds"] for s in km["steps"]}
    for l in km["launches"]:
        req = max(l["requests"], 1)
        spr, ideal = l["sectors"] / req, l["ideal_sectors"] / req
        wf = (l["shared_wavefronts"] / l["shared_requests"]
              if l["shared_requests"] else 0)
        ratio = l["seconds"] / roof[l["step"]] if roof[l["step"]] else 0
        miss = []
        if l["bound"] in ("memory", "L2", "shared", "issue") and ratio > 1.3:
            miss.append("time %.2fx" % ratio)
        if ideal and spr > 1.25 * ideal:
            miss.append("sectors %.2fx" % (spr / ideal))
        if l["spill_store_bytes"] + l["spill_load_bytes"]:
            miss.append("spills")
        yield ("| %s | %s | %d.%d %s | %s | %d | %.2f | %.2f | %.2f | %.0f%% "
               "| %s | %.2f | %.2f | %.2f | %s |" % (
                   name, dtype, l["step"], l["pass"], l["entry"], l["kind"],
                   l["blocks"], spr, ideal, wf, 100 * l["occupancy"],
                   l["bound"], 1e6 * l["seconds"],
                   1e6 * roof[l["step"]], ratio, ", ".join(miss) or "-"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--einc", default="build/einc")
    ap.add_argument("--sample", default="96")
    ap.add_argument("--out")
    args = ap.parse_args()
    env = dict(os.environ, EINC_EMU_SAMPLE_BLOCKS=args.sample)
    out = ["| case | dtype | step.pass entry | kind | blocks | sectors/req "
           "| ideal | shared wf/req | occupancy | bound | model us | "
           "roofline us | model/roofline | miss |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    totals = []
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
    print(text)
    if args.out:
        open(args.out, "w").write(text)


if __name__ == "__main__":
    main()
