#!/usr/bin/env python3
"""Predicted against measured times of `einc bench` for the bench cases
(issue 28): how far the device model's prediction (per-call and per-step
overheads plus a roofline per step, `einc plan`'s) is from what runs.

  python3 bench/predicted.py --target cpu   this host, CPU backend
  python3 bench/predicted.py --target gpu   GPU 0, CUDA backend

Each case of bench/cases.tsv (its CPU or GPU shapes, each dtype it lists
for the target) is timed by `einc bench --json --no-floor` (median of
--runs runs), which also reports the model's predicted time and MFU. The
table is written to bench/results/DATE-predicted-TARGET.md (--out), with
the geometric mean and the spread of measured / predicted. --note adds a
line under the header (e.g. the machine's load). --kernel-model (GPU
only) adds the per-kernel model's prediction (`einc plan --kernel-model`,
docs/design.md "A per-kernel time model"): every kernel run once on the
emulated device at the case's size to count its traffic, about 96
blocks of each launch (EINC_EMU_SAMPLE_BLOCKS, scaled to the grid: the
generated kernels' blocks do alike; set it in the environment to change,
0 for every block, minutes per large case).

The model needs no GPU, so scripts/gpu_check.sh computes it beside the
GPU's other checks: --kernel-model-only FILE writes the model's times
(JSON, by case and dtype; --jobs N cases at once, each case written as
it finishes so a run cut short keeps what it has) without timing
anything, and --kernel-model-from FILE takes them from there (a case
missing there shows no model time).
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(einc, case, target, dtype, runs):
    shapes = ['x'.join(map(str, s)) for s in case.shapes(target)]
    cmd = [einc, 'bench', case.expr, *shapes, '--dtype', dtype, '--json',
           '--no-floor', '--runs', str(runs),
           '--backend', 'cuda' if target == 'gpu' else 'cpu', *case.flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def kernel_model(einc, case, dtype, timeout=None):
    """The per-kernel model's prediction of the GPU case, in ms."""
    shapes = ['x'.join(map(str, s)) for s in case.shapes('gpu')]
    cmd = [einc, 'plan', case.expr, *shapes, '--dtype', dtype, '--json',
           '--backend', 'cuda', '--kernel-model', *case.flags]
    env = dict(os.environ)
    env.setdefault('EINC_EMU_SAMPLE_BLOCKS', '96')
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{case.name} {dtype}: not done in {timeout:.0f} s")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return 1e3 * json.loads(p.stdout)['kernel_model']['predicted_seconds']


def selected(args):
    """(case, dtype) pairs of the run, in the suite's order."""
    for case in suite.load():
        if args.cases and case.name not in args.cases:
            continue
        if not case.shapes(args.target):
            continue
        dtypes = case.cpu_dtypes if args.target == 'cpu' else ['f32', 'bf16']
        for dtype in dtypes:
            yield case, dtype


def model_only(args):
    """--kernel-model-only: the model's times into a JSON file, rewritten
    after each case (a timeout keeps the finished ones)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed
    import time
    out, end = {}, time.monotonic() + args.time_limit

    def one(case, dtype):
        left = end - time.monotonic()
        if left < 1:
            raise RuntimeError(f"{case.name} {dtype}: no time left")
        return kernel_model(args.einc, case, dtype, left)

    with ThreadPoolExecutor(args.jobs) as pool:
        todo = {pool.submit(one, c, d): f"{c.name}|{d}"
                for c, d in selected(args)}
        for f in as_completed(todo):
            try:
                out[todo[f]] = f.result()
            except RuntimeError as e:
                print(e, file=sys.stderr)
                continue
            with open(args.kernel_model_only + '.tmp', 'w') as fh:
                json.dump(out, fh, indent=0)
            os.replace(args.kernel_model_only + '.tmp', args.kernel_model_only)
            print(f"{todo[f]}: {out[todo[f]]:.4g} ms", file=sys.stderr)


def rows(args):
    stored = {}
    if args.kernel_model_from and os.path.exists(args.kernel_model_from):
        stored = json.load(open(args.kernel_model_from))
    for case, dtype in selected(args):
        r = bench(args.einc, case, args.target, dtype, args.runs)
        if args.kernel_model_from:
            r['kernel_model_ms'] = stored.get(f"{case.name}|{dtype}")
        elif args.kernel_model:
            r['kernel_model_ms'] = kernel_model(args.einc, case, dtype)
        yield case.name, dtype, r
        print(f"{case.name:12s} {dtype:5s} measured {r['ms']:.4g} ms "
              f"predicted {r['predicted_ms']:.4g} ms", file=sys.stderr)


def table(args, results):
    km = args.kernel_model
    lines = ['| case | dtype | measured ms | predicted ms | measured / '
             'predicted | ' + ('kernel model ms | measured / kernel model | '
                               if km else '') + 'GFLOP/s | MFU |',
             '|---|---|---|---|---|' + ('---|---|' if km else '') + '---|---|']
    ratios = []
    for name, dtype, r in results:
        ratio = r['ms'] / r['predicted_ms']
        ratios.append(ratio)
        kmm = r.get('kernel_model_ms')
        model = ((f"{kmm:.4g} | {r['ms'] / kmm:.3g} | " if kmm else
                  "not computed | | ") if km else '')
        lines.append(f"| {name} | {dtype} | {r['ms']:.4g} | "
                     f"{r['predicted_ms']:.4g} | {ratio:.3g} | {model}"
                     f"{r['flops'] / r['ms'] * 1e-6:.4g} | "
                     f"{100 * r['mfu']:.3g}% |")
    logs = [math.log(x) for x in ratios]
    gm = math.exp(sum(logs) / len(logs)) if logs else float('nan')
    lines.append('')
    lines.append(f"Geometric mean of measured / predicted: **{gm:.3g}** "
                 f"(min {min(ratios):.3g}, max {max(ratios):.3g}, "
                 f"{len(ratios)} cases).")
    return lines


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--target', choices=('cpu', 'gpu'), required=True)
    ap.add_argument('--einc', default=os.path.join(ROOT, 'build', 'einc'))
    ap.add_argument('--cases', nargs='+')
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--note', default='')
    ap.add_argument('--out')
    ap.add_argument('--kernel-model', action='store_true',
                    help='also the per-kernel model (--target gpu)')
    ap.add_argument('--kernel-model-only', metavar='FILE',
                    help='only the per-kernel model, into FILE (no GPU)')
    ap.add_argument('--kernel-model-from', metavar='FILE',
                    help="the per-kernel model's times from FILE")
    ap.add_argument('--jobs', type=int, default=1,
                    help='--kernel-model-only: cases at once')
    ap.add_argument('--time-limit', type=float, default=1e9,
                    help='--kernel-model-only: stop after this many seconds')
    args = ap.parse_args()
    args.kernel_model |= bool(args.kernel_model_from)
    if (args.kernel_model or args.kernel_model_only) and args.target != 'gpu':
        ap.error('--kernel-model prices GPU kernels: --target gpu')
    if args.kernel_model_only:
        model_only(args)
        return
    results = list(rows(args))
    first = results[0][2] if results else {}
    date = datetime.date.today().isoformat()
    head = [f"# Predicted against measured times, {args.target}, {date}", '',
            f"Device: {first.get('device', '?')} "
            f"({first.get('device_name', '?')}), device model "
            f"`{first.get('device_model', '?')}`; host {platform.node()}. "
            f"`python3 bench/predicted.py --target {args.target} --runs "
            f"{args.runs}` with {args.einc}.", '',
            "measured: `einc bench` median; predicted: the same process's "
            "`einc plan` prediction (per-call + per-step overheads + roofline "
            "at the model's rates: on the CPU its measured GEMM rate and copy "
            "bandwidth). MFU: the expression's FLOPs per second over the "
            "model's peak for the dtype (data sheet on a GPU; the measured "
            "GEMM rate on the CPU)."]
    if args.note:
        head += ['', args.note]
    text = '\n'.join(head + [''] + table(args, results)) + '\n'
    out = args.out or os.path.join(ROOT, 'bench', 'results',
                                   f"{date}-predicted-{args.target}.md")
    with open(out, 'w') as f:
        f.write(text)
    print(text)
    print(f"written to {out}", file=sys.stderr)


if __name__ == '__main__':
    main()
