#!/usr/bin/env python3
"""Runs the benchmark suite and writes bench/results/DATE-DEVICE.md.

  python3 bench/run.py --target cpu   einc (CPU backend) against
                                      numpy.einsum(optimize=True) and einops
  python3 bench/run.py --target gpu   einc (CUDA) against torch, torch.compile
                                      and JAX (bench/torch_ref.py)

einc is timed by `einc bench --json` (median of --runs runs, inputs rotated
when they fit in the last-level cache, floor measured in the same process);
the references by the same rules in Python. --einc names the binary
(default build/einc); --cases picks cases by name.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def einc_bench(einc, case, target, dtype, runs):
    shapes = ['x'.join(map(str, s)) for s in case.shapes(target)]
    cmd = [einc, 'bench', case.expr, *shapes, '--dtype', dtype, '--json',
           '--runs', str(runs), '--backend', 'cuda' if target == 'gpu' else 'cpu',
           *case.flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def llc_bytes():
    """The last-level cache, read as `einc bench` reads it (sysfs)."""
    try:
        text = open('/sys/devices/system/cpu/cpu0/cache/index3/size').read().strip()
        return int(text[:-1]) << (20 if text[-1] == 'M' else 10)
    except (OSError, ValueError):
        return 32 << 20


def host_time(fn, inputs_copies, runs=20, warmup=3):
    """Median ms of fn over rotated input copies, wall clock."""
    t = []
    for r in range(warmup + runs):
        xs = inputs_copies[r % len(inputs_copies)]
        t0 = time.perf_counter()
        fn(*xs)
        if r >= warmup:
            t.append((time.perf_counter() - t0) * 1e3)
    return suite.median(t)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')


def fmt(x, nd=3):
    return '' if x is None else f'{x:.{nd}f}'


def run_cpu(args, cases):
    import numpy as np
    import numpy_ref
    rows = []
    rng = np.random.default_rng(0)
    for c in cases:
        for dtype in args.dtypes:
            e = einc_bench(args.einc, c, 'cpu', dtype, args.runs)
            npdt = {'f32': np.float32, 'f64': np.float64}[dtype]
            shapes = c.cpu_shapes
            base = [rng.uniform(-1, 1, s).astype(npdt) for s in shapes]
            nbytes = sum(x.nbytes for x in base)
            copies = suite.rotation_copies(nbytes, llc_bytes())
            copies_list = [base] + [[x.copy() for x in base] for _ in range(copies - 1)]
            np_ms = host_time(numpy_ref.numpy_fn(c, shapes), copies_list, args.runs)
            eo = numpy_ref.einops_fn(c, shapes)
            eo_ms = host_time(eo, copies_list, args.runs) if eo else None
            best = min(x for x in (np_ms, eo_ms) if x)
            rows.append(dict(case=c.name, dtype=dtype, einc=e['ms'], numpy=np_ms,
                             einops=eo_ms, floor=e.get('floor_ms'),
                             bound=e.get('floor_bound', ''), gemm=e.get('gemm_tflops'),
                             copy=e.get('copy_gbs'), best=best))
            print(f"{c.name:12s} {dtype}  einc {e['ms']:8.3f}  numpy {np_ms:8.3f}  "
                  f"einops {fmt(eo_ms):>8s}  floor {fmt(e.get('floor_ms')):>8s}  "
                  f"numpy/einc {np_ms / e['ms']:6.2f}", flush=True)
    dev = f"cpu-{os.cpu_count()}core"
    lines = [f"# einc CPU benchmark, {args.date}, {dev}", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
             f"numpy {np.__version__}" + (f", einops {numpy_ref.einops.__version__}" if numpy_ref.einops else "") + ".",
             "einc: `einc bench --backend cpu` (median of %d runs, inputs rotated when they fit "
             "twice in the last-level cache). numpy: numpy.einsum(optimize=True) where einsum "
             "expresses the case, plain NumPy otherwise (bench/numpy_ref.py); same timing rules. "
             "floor = max(FLOPs / BLAS GEMM 2048^3 rate, compulsory bytes / memcpy bandwidth), "
             "measured in the same einc process." % args.runs, "",
             "| case | dtype | einc ms | numpy ms | einops ms | floor ms | bound | einc/floor | numpy/einc | best/einc |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['einc']:.3f} | {r['numpy']:.3f} | {fmt(r['einops'])} | "
                     f"{fmt(r['floor'])} | {r['bound']} | {fmt(r['einc'] / r['floor'] if r['floor'] else None, 2)} | "
                     f"{r['numpy'] / r['einc']:.2f} | {r['best'] / r['einc']:.2f} |")
    g_np = geomean([r['numpy'] / r['einc'] for r in rows])
    g_best = geomean([r['best'] / r['einc'] for r in rows])
    slower = [f"{r['case']} {r['dtype']}" for r in rows if r['einc'] > r['numpy']]
    lines += ["", f"Geometric mean speed-up over numpy.einsum: **{g_np:.2f}x**; over the best of "
              f"numpy and einops: **{g_best:.2f}x**.",
              "Cases slower than numpy: " + (", ".join(slower) if slower else "none") + "."]
    return dev, lines


def run_gpu(args, cases):
    import torch_ref
    rows = []
    for c in cases:
        for dtype in args.dtypes:
            e = einc_bench(args.einc, c, 'gpu', dtype, args.runs)
            ref = torch_ref.time_case(c, dtype, args.runs)
            anchors = [x for x in (ref.get('torch'), ref.get('compiled'), ref.get('jax')) if x]
            best = min(anchors) if anchors else None
            rows.append(dict(case=c.name, dtype=dtype, einc=e['ms'], floor=e.get('floor_ms'),
                             bound=e.get('floor_bound', ''), best=best, **ref))
            print(f"{c.name:12s} {dtype}  einc {e['ms']:8.3f}  torch {fmt(ref.get('torch')):>8s}  "
                  f"compiled {fmt(ref.get('compiled')):>8s}  jax {fmt(ref.get('jax')):>8s}  "
                  f"floor {fmt(e.get('floor_ms')):>8s}", flush=True)
            device_name = e['device_name']
    dev = device_name.replace('NVIDIA ', '').split()[0].lower()
    lines = [f"# einc GPU benchmark, {args.date}, {device_name}", "",
             "einc: `einc bench --backend cuda` (CUDA events, median of %d runs, inputs rotated when "
             "they fit twice in L2). torch, torch.compile (Inductor, dynamo reset per case) and "
             "jax.jit(jnp.einsum): bench/torch_ref.py, same rules. floor = max(FLOPs / cuBLAS GEMM "
             "8192^3 rate in the dtype, compulsory bytes / 1 GiB device copy bandwidth), measured in "
             "the same einc process." % args.runs, "",
             "| case | dtype | einc ms | torch ms | compiled ms | jax ms | floor ms | bound | einc/floor | einc/torch | einc/best |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['einc']:.3f} | {fmt(r.get('torch'))} | "
                     f"{fmt(r.get('compiled'))} | {fmt(r.get('jax'))} | {fmt(r['floor'])} | {r['bound']} | "
                     f"{fmt(r['einc'] / r['floor'] if r['floor'] else None, 2)} | "
                     f"{fmt(r['einc'] / r['torch'] if r.get('torch') else None, 2)} | "
                     f"{fmt(r['einc'] / r['best'] if r['best'] else None, 2)} |")
    lines += ["", f"Geometric mean einc/torch: **{geomean([r['einc'] / r['torch'] for r in rows if r.get('torch')]):.2f}**; "
              f"einc/best anchor: **{geomean([r['einc'] / r['best'] for r in rows if r['best']]):.2f}**."]
    return dev, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--target', choices=('cpu', 'gpu'), required=True)
    ap.add_argument('--einc', default=os.path.join(ROOT, 'build', 'einc'))
    ap.add_argument('--dtypes', nargs='+')
    ap.add_argument('--cases', nargs='+')
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--out', help='result file (default bench/results/DATE-DEVICE.md)')
    args = ap.parse_args()
    args.date = datetime.date.today().isoformat()
    if not args.dtypes:
        args.dtypes = ['f32'] if args.target == 'cpu' else ['bf16', 'f32']
    cases = [c for c in suite.load() if not args.cases or c.name in args.cases]
    dev, lines = (run_cpu if args.target == 'cpu' else run_gpu)(args, cases)
    out = args.out or os.path.join(ROOT, 'bench', 'results', f'{args.date}-{dev}.md')
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'wrote {out}')


if __name__ == '__main__':
    main()
