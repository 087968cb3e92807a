#!/usr/bin/env python3
"""Today's per-kernel GPU model against the H100's measured times (issue 34
item 4): the kernels of einc bfe0368, the commit of the 2026-11-23 H100 run
(../shared/anchors/einc-h100-2026-11-23.md), counted on today's emulated
device and priced by today's model, for every case of that run's table.

Needs a checkout of bfe0368 and a build of it (the dumper links against its
internal library), and this tree's build with CUDA (kernel_replay, NVRTC):

    git worktree add --detach /tmp/wt-bfe0368 bfe0368
    meson setup /tmp/build-bfe0368 /tmp/wt-bfe0368 -Dtests=false \\
        -Dbuildtype=release && ninja -C /tmp/build-bfe0368
    python3 bench/model_validation.py --legacy-src /tmp/wt-bfe0368 \\
        --legacy-build /tmp/build-bfe0368 --build build \\
        --out bench/results/DATE-model-validation.md

Deterministic: the counts are sums over a fixed sample of blocks
(--sample, ein_emu_sample_set), the model pure arithmetic.
"""
import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile

# Helpers bfe0368's kernels define that today's preludes (host and NVRTC)
# define too; bfe0368's are inline PTX the host compiler cannot take.
SHARED_HELPERS = ("ein_h2f", "ein_f2h", "ein_b2f", "ein_f2b")


def strip_helpers(src):
    src = src.replace("typedef unsigned long long ein_u64;\n", "")
    for name in SHARED_HELPERS:
        m = re.search(r"static __device__ __forceinline__ [\w ]+\b%s\(" % name,
                      src)
        if not m:
            continue
        i = src.index("{", m.end())
        depth = 0
        for j in range(i, len(src)):
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            if depth == 0:
                break
        src = src[:m.start()] + src[j + 2:]
    return src


def build_dumper(src, build, out):
    incs = []
    for top in ("src", "runtime", "include"):
        for root, _, _ in os.walk(os.path.join(src, top)):
            incs.append("-I" + root)
    cuda = "/usr/local/cuda/lib64"
    cmd = (["cc", "-std=c17", "-O1", "-o", out,
            os.path.join(os.path.dirname(__file__), "model_validation",
                         "dump_bfe0368.c"),
            os.path.join(build, "einc.p", "src_cli_args.c.o"), "-I" + build,
            "-I/usr/local/cuda/include"] + incs +
           ["-Wl,--start-group", os.path.join(build, "libein_core.a"),
            "-lopenblas", "-fopenmp", "-lm", "-pthread",
            cuda + "/libcudart.so", cuda + "/libcublas.so",
            cuda + "/libnvrtc.so", "-Wl,--end-group", "-Wl,-rpath," + cuda])
    subprocess.run(cmd, check=True)


def read_cases(path):
    cases = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        cases[f[0]] = (f[1], f[2].split(), shlex.split(f[4]) if len(f) > 4
                       else [])
    return cases


def read_anchor(path):
    rows = []
    for line in open(path):
        f = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(f) == 11 and f[0] not in ("case", "---"):
            try:
                rows.append((f[0], f[1], float(f[2]), float(f[2]) / float(f[8]), f[7]))
            except ValueError:
                pass
    return rows


def model_case(args, dumper, case, dtype, work):
    expr, shapes, flags = case
    d = os.path.join(work, "k")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    subprocess.run([dumper, d, expr] + shapes + ["--dtype", dtype] + flags,
                   check=True)
    for f in os.listdir(d):
        if f.endswith(".cu"):
            p = os.path.join(d, f)
            s = strip_helpers(open(p).read())
            open(p, "w").write(s)
    out = subprocess.run([os.path.join(args.build, "kernel_replay"), d,
                          args.device, str(args.sample)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def blame(res, measured_ms, floor_ms):
    ks = res["launches"]
    if not ks:
        return "cuBLAS only: the roofline's GEMM rate"
    k = max(ks, key=lambda k: k["seconds"])
    spr = k["sectors"] / max(k["requests"], 1)
    ideal = k["ideal_sectors"] / max(k["requests"], 1)
    what = "step %d %s: %s" % (k["step"], k["kind"], k["bound"])
    if k["bound"] == "compute":
        what += " (CUDA cores, %.3g FLOP)" % k["flops"]
    if k["bound"] in ("memory", "L2"):
        what += ", %.1f sectors/req (ideal %.1f), eff %.2f" % (
            spr, ideal, k["memory_efficiency"])
    if k["bound"] == "shared":
        what += ", %.1f wavefronts/req" % (
            k["shared_wavefronts"] / max(k["shared_requests"], 1))
    if k["occupancy"] < 0.25:
        what += ", occupancy %.0f%%" % (100 * k["occupancy"])
    if k["blocks"] < 132:
        what += ", %d blocks" % k["blocks"]
    if k["bound"] == "launch":
        what += " (%.1f us)" % (1e6 * k["seconds"])
    return what


def table(rows):
    out = ["| case | dtype | measured ms | floor ms | measured/floor | "
           "predicted ms | predicted/floor | predicted/measured | flagged | "
           "roofline ms | what the model blames |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %.3f | %.3f | %.2f | %.3f | %.2f | %.2f | %s "
                   "| %.3f | %s |" % r)
    return "\n".join(out)


def summary(rows):
    within = sum(1 for r in rows if 0.5 <= r[7] <= 2.0)
    need = [r for r in rows if r[4] > 3]
    caught = [r for r in need if r[8] != "no"]
    geo = math.exp(sum(abs(math.log(r[7])) for r in rows) / len(rows))
    return ("Within 2x of measured: **%d of %d** (%.0f%%). Measured over 3x "
            "its floor: %d, flagged by the model: **%d** (%s). Geometric "
            "mean of max(p/m, m/p): %.2f." % (
                within, len(rows), 100.0 * within / len(rows), len(need),
                len(caught), ", ".join("%s %s" % (r[0], r[1]) for r in need
                                       if r[8] == "no") or "none missed",
                geo))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--legacy-src", required=True)
    ap.add_argument("--legacy-build", required=True)
    ap.add_argument("--build", default="build")
    ap.add_argument("--anchor",
                    default="../shared/anchors/einc-h100-2026-11-23.md")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--sample", type=int, default=96,
                    help="blocks counted per launch (0: all)")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--out")
    ap.add_argument("--json-out", help="every case's kernel_replay output")
    args = ap.parse_args()
    cases = read_cases(os.path.join(args.legacy_src, "bench", "cases.tsv"))
    rows, raw = [], []
    with tempfile.TemporaryDirectory() as work:
        dumper = os.path.join(work, "dump_bfe0368")
        build_dumper(args.legacy_src, args.legacy_build, dumper)
        for name, dtype, meas, floor, _ in read_anchor(args.anchor):
            if args.only and name not in args.only.split(","):
                continue
            res = model_case(args, dumper, cases[name], dtype, work)
            raw.append({"case": name, "dtype": dtype, "model": res})
            pred = 1e3 * res["predicted_seconds"]
            eff = min([k["memory_efficiency"] for k in res["launches"]
                       if k["bound"] in ("memory", "L2", "shared")] or [1])
            flag = ("yes (%.1fx floor)" % (pred / floor) if pred > 2 * floor
                    else "yes (eff %.2f)" % eff if eff < 0.5 else "no")
            rows.append((name, dtype, meas, floor, meas / floor, pred,
                         pred / floor, pred / meas, flag,
                         1e3 * res["roofline_seconds"],
                         blame(res, meas, floor)))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows) + "\n\n" + summary(rows) + "\n"
    print(text)
    if args.out:
        open(args.out, "w").write(text)
    if args.json_out:
        json.dump(raw, open(args.json_out, "w"), indent=1)


if __name__ == "__main__":
    main()
