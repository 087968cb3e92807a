#!/usr/bin/env python3
"""Runs the benchmark suite and writes bench/results/DATE-DEVICE.md.

  python3 bench/run.py --target cpu   einc (CPU backend) against
                                      numpy.einsum(optimize=True),
                                      opt_einsum.contract, torch on the CPU
                                      and einops on NumPy (bench/cpu_peers.py)
  python3 bench/run.py --target gpu   einc (CUDA) against torch, torch.compile
                                      and JAX (bench/torch_ref.py)

einc is timed by `einc bench --json` (median of --runs runs, inputs rotated
when they fit in the last-level cache, floor measured in the same process);
the references by the same rules in Python. --einc names the binary
(default build/einc); --cases picks cases by name.

On the CPU the peers run in a venv of their own that this script makes
once under ~/.cache/einc-bench (numpy, opt_einsum, einops and torch from
PyPI); einc and the peers share one thread count (--threads) and are
interleaved: --rounds rounds of --runs runs each, the order rotated.
--quick (2 rounds of 5 runs) prints the table without writing a file.
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


def einc_bench(einc, case, target, dtype, runs, floor=True, steps=False):
    """`einc bench --json`; with steps, also the per-step times and the GEMM
    steps' time alone (gemm_ms, gemm_ratio)."""
    shapes = ['x'.join(map(str, s)) for s in case.shapes(target)]
    cmd = [einc, 'bench', case.expr, *shapes, '--dtype', dtype, '--json',
           '--runs', str(runs), '--backend', 'cuda' if target == 'gpu' else 'cpu',
           *case.flags, *([] if floor else ['--no-floor']), *(['--steps'] if steps else [])]
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


def host_time(fn, inputs_copies, runs=20, warmup=3, best=False):
    """Median (with best, the least) ms of fn over rotated input copies,
    wall clock."""
    t = []
    for r in range(warmup + runs):
        xs = inputs_copies[r % len(inputs_copies)]
        t0 = time.perf_counter()
        fn(*xs)
        if r >= warmup:
            t.append((time.perf_counter() - t0) * 1e3)
    return min(t) if best else suite.median(t)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')


def fmt(x, nd=3):
    return '' if x is None else f'{x:.{nd}f}'


PEERS = ('numpy', 'opt_einsum', 'torch', 'einops')
PEER_PACKAGES = ('numpy', 'opt_einsum', 'einops', 'torch')


def ensure_peers(args):
    """Runs the rest of this script under a Python that has the peers: this
    one when it imports them all, else a venv in the cache folder
    ($EINC_BENCH_CACHE, default ~/.cache/einc-bench), made and filled from
    PyPI on first use (torch with its dependencies is a few GB)."""
    try:
        for m in PEER_PACKAGES:
            __import__(m)
        return
    except ImportError:
        pass
    if args.no_install:
        sys.exit('run.py: the peers (%s) are not importable and --no-install was given'
                 % ', '.join(PEER_PACKAGES))
    cache = os.environ.get('EINC_BENCH_CACHE', os.path.expanduser('~/.cache/einc-bench'))
    venv = os.path.join(cache, 'venv-py%d%d' % sys.version_info[:2])
    py = os.path.join(venv, 'bin', 'python')
    if not os.path.exists(os.path.join(venv, '.complete')):
        print(f'installing {", ".join(PEER_PACKAGES)} into {venv} (once)', flush=True)
        subprocess.run([sys.executable, '-m', 'venv', venv], check=True)
        subprocess.run([py, '-m', 'pip', 'install', '-q', *PEER_PACKAGES], check=True)
        open(os.path.join(venv, '.complete'), 'w').close()
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])


def set_threads(n):
    """The same thread count for everyone: einc (EINC_NUM_THREADS, OpenMP),
    NumPy's BLAS and torch. Set before numpy is imported."""
    for var in ('EINC_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',
                'MKL_NUM_THREADS'):
        os.environ[var] = str(n)


def cpu_inputs(case, dtype, seed):
    """Random inputs in [-1, 1) as NumPy arrays (f32 for bf16, which NumPy
    lacks: torch converts) and the copies to rotate through."""
    import numpy as np
    rng = np.random.default_rng(seed)
    npdt = {'f16': np.float16, 'f32': np.float32, 'f64': np.float64, 'bf16': np.float32}[dtype]
    base = [rng.uniform(-1, 1, s).astype(npdt) for s in case.cpu_shapes]
    n = suite.rotation_copies(sum(x.nbytes for x in base), llc_bytes())
    return [base] + [[x.copy() for x in base] for _ in range(n - 1)]


def peer_fns(case, dtype, copies):
    """name -> (fn, the input copies in that peer's arrays) for every peer
    that can express the case in this dtype."""
    import cpu_peers
    import torch
    out = {}
    shapes = case.cpu_shapes
    if dtype != 'bf16':
        for lib in ('numpy', 'opt_einsum'):
            fn = cpu_peers.build(lib, case, shapes)
            if fn:
                out[lib] = (fn, copies)
        fn = cpu_peers.build_einops(case, shapes)
        if fn:
            out['einops'] = (fn, copies)
    tdt = {'f16': torch.float16, 'bf16': torch.bfloat16, 'f32': torch.float32,
           'f64': torch.float64}[dtype]
    fn = cpu_peers.build('torch', case, shapes)
    if fn:
        out['torch'] = (fn, [[torch.from_numpy(x).to(tdt) for x in xs] for xs in copies])
    return out


# A peer whose checking call takes longer than this is not timed: it would
# take minutes (einops.einsum on NumPy calls np.einsum without a path, so a
# three-tensor ring runs as one naive loop), and it is no contender.
SLOW_PEER_S = 1.0


def check_peers(case, dtype, peers):
    """The peers agree with each other on the first input copy (a check of
    cpu_peers' translations); a peer that disagrees is dropped, and so is
    one slower than SLOW_PEER_S a call."""
    import numpy as np
    results = {}
    for name, (fn, copies) in list(peers.items()):
        t0 = time.perf_counter()
        y = fn(*copies[0])
        took = time.perf_counter() - t0
        results[name] = np.asarray(y.float() if hasattr(y, 'float') else y, dtype=np.float64)
        if took > SLOW_PEER_S:
            print(f'  note: {name} takes {took:.1f} s a call on {case.name} {dtype}; not timed',
                  flush=True)
            del peers[name]
    ref_name = next(iter(results))
    ref = results[ref_name]
    tol = 2e-2 if dtype in ('f16', 'bf16') else 1e-3
    for name, y in list(results.items()):
        if name not in peers:
            continue
        scale = max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
        if y.shape != ref.shape or not np.allclose(y, ref, rtol=tol, atol=tol * scale):
            print(f'  warning: {name} disagrees with {ref_name} on {case.name} {dtype}; dropped',
                  flush=True)
            del peers[name]


def spread(ts):
    """Half the range of the round medians, relative to their median."""
    m = suite.median(ts)
    return (max(ts) - min(ts)) / (2 * m) if m else 0.0


def time_row(args, case, dtype, seed):
    """Rounds in which einc and every peer each take `runs` timed runs, the
    order rotated each round; per contender the round medians."""
    copies = cpu_inputs(case, dtype, seed)
    peers = peer_fns(case, dtype, copies)
    check_peers(case, dtype, peers)
    # --einc-before: the build before a change, interleaved with einc in
    # the same rounds (timings on a shared machine drift between runs)
    names = ['einc'] + (['einc-before'] if args.einc_before else []) + list(peers)
    times = {n: [] for n in names}
    floor = {}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if name == 'einc':
                e = einc_bench(args.einc, case, 'cpu', dtype, args.runs, floor=r == 0,
                               steps=r == 0)
                times['einc'].append(e['ms_min' if args.best else 'ms'])
                if r == 0:
                    floor = e
            elif name == 'einc-before':
                e = einc_bench(args.einc_before, case, 'cpu', dtype, args.runs, floor=False)
                times[name].append(e['ms_min' if args.best else 'ms'])
            else:
                fn, xs = peers[name]
                times[name].append(host_time(fn, xs, args.runs, best=args.best))
    row = dict(case=case.name, dtype=dtype, tiny=case.tiny(), floor=floor.get('floor_ms'),
               bound=floor.get('floor_bound', ''), copy_gbs=floor.get('copy_gbs'),
               gemm_tflops=floor.get('gemm_tflops'), gemm_ms=floor.get('gemm_ms'),
               gemm_ratio=floor.get('gemm_ratio'))
    for n in names:
        row[n] = min(times[n]) if args.best else suite.median(times[n])
        row[n + '_spread'] = spread(times[n])
    best = min(peers, key=lambda n: row[n]) if peers else None
    row['best'] = best
    return row


def cell(row, name):
    if row.get(name) is None:
        return ''
    return f"{row[name]:.4g} ±{100 * row[name + '_spread']:.0f}%"


def ratio(a, b):
    return a / b if a and b else None


# The /proc/cpuinfo flags that decide einc's CPU paths (issue 35: the
# half-precision GEMM units differ from machine to machine).
CPU_FLAGS = ('avx2', 'fma', 'f16c', 'avx512f', 'avx512_bf16', 'avx512_fp16',
             'avx512_vnni', 'avx_vnni', 'amx_bf16', 'amx_fp16', 'amx_tile')


def cpu_flags():
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('flags'):
                have = set(line.split(':', 1)[1].split())
                return ' '.join(f for f in CPU_FLAGS if f in have) or 'none of ' + ' '.join(CPU_FLAGS)
    except OSError:
        pass
    return 'unknown'


def cpu_table(args, rows):
    import numpy
    import opt_einsum
    import einops
    import torch
    lines = [f"# einc CPU benchmark, {args.date}, cpu-{os.cpu_count()}core", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"{args.threads} threads for everyone (einc, NumPy's BLAS, torch.set_num_threads). "
             f"Peers: numpy {numpy.__version__} (einsum optimize=True), opt_einsum "
             f"{opt_einsum.__version__} (contract), torch {torch.__version__} (CPU: einsum, "
             f"amax/mean/..., expand + contiguous), einops {einops.__version__} (on NumPy).", "",
             f"Timing: {args.rounds} rounds; in each, einc (`einc bench`, its own process) and "
             f"every peer take {args.runs} runs each (3 warm-up), order rotated per round, inputs "
             "rotated when they fit twice in the last-level cache; "
             + ("a cell is the contender's best run of all rounds (--best: the machine is shared "
                "and loaded, and load only ever slows a run) ± half the range of the round bests. "
                if args.best else
                "a cell is the median of the round medians ± half their range. ")
             + "floor = max(FLOPs / BLAS GEMM 2048^3 rate, "
             "compulsory bytes / memcpy bandwidth), measured by einc in the same run "
             "(bench/cpu_peers.py builds each peer's code from the expression). GEMMs ms: the plan's "
             "GEMM steps alone, i.e. the backend's BLAS (OpenBLAS, or oneDNN where it takes "
             "f32 and bf16 GEMMs: issue 35) doing exactly the plan's GEMMs (same M, N, K, batch, "
             "transposes, threads), from `einc bench --steps` in the first round; einc/GEMMs: "
             "all of the plan's steps over its GEMM steps in those same marked runs (issue 18's "
             "target for GEMM-bound plans: at most 1.2). On the host the floor's GEMM is in the "
             "case's dtype where einc has a GEMM for it (bf16 through oneDNN where the CPU has "
             "bf16 units, issue 35), else f32's.", "",
             f"CPU flags (/proc/cpuinfo, those einc's paths depend on): {cpu_flags()}. "
             f"Load average (1 min) at the start and end: {args.load_start:.1f}, "
             f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
             + (" (a loaded machine: timings are noisy)" if max(args.load_start, os.getloadavg()[0])
                > 0.5 * os.cpu_count() else "") + ".", ""]
    before = args.einc_before is not None
    if before:
        lines += [f"einc before: `{args.einc_before}`, interleaved with einc in the same rounds "
                  "(before ms, einc/before).", ""]
    cols = (["einc ms"] + (["before ms"] if before else []) + [p + " ms" for p in PEERS]
            + ["floor ms", "bound", "einc/floor", "GEMMs ms", "einc/GEMMs"]
            + (["einc/before"] if before else []) + ["einc/best-peer", "best peer"])
    lines += ["| case | dtype | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['dtype']} | {cell(r, 'einc')} | "
            + (f"{cell(r, 'einc-before')} | " if before else "")
            + " | ".join(cell(r, p) for p in PEERS)
            + f" | {fmt(r['floor'], 4)} | {r['bound']} | {fmt(ratio(r['einc'], r['floor']), 2)} | "
            f"{fmt(r.get('gemm_ms'), 4)} | {fmt(r.get('gemm_ratio'), 2)} | "
            + (f"{fmt(ratio(r['einc'], r.get('einc-before')), 2)} | " if before else "")
            + f"{fmt(ratio(r['einc'], r.get(r['best'])), 2)} | {r['best'] or ''} |")
    g_all = geomean([ratio(r['einc'], r.get(r['best'])) for r in rows if r['best']])
    g_big = geomean([ratio(r['einc'], r.get(r['best'])) for r in rows if r['best'] and not r['tiny']])
    behind = [f"{r['case']} {r['dtype']}" for r in rows if r['best'] and r['einc'] > r[r['best']]]
    mem_far = [f"{r['case']} {r['dtype']} ({r['einc'] / r['floor']:.1f}x)" for r in rows
               if r['bound'] == 'memory' and r['floor'] and r['einc'] > 1.5 * r['floor']
               and not r['tiny']]
    gemm_far = [f"{r['case']} {r['dtype']} ({r['gemm_ratio']:.2f}x)" for r in rows
                if r['bound'] == 'compute' and r.get('gemm_ratio') and r['gemm_ratio'] > 1.2]
    copy = next((r['copy_gbs'] for r in rows if r.get('copy_gbs')), None)
    gemm = next((r['gemm_tflops'] for r in rows if r.get('gemm_tflops')), None)
    lines += ["",
              f"Geomean einc/best-peer: **{g_all:.2f}** ({g_big:.2f} without the tiny cases).",
              f"Behind the best peer ({len(behind)} of {len(rows)}): " + (", ".join(behind) or "none") + ".",
              "Memory-bound rows above 1.5x the copy floor: " + (", ".join(mem_far) or "none") + ".",
              "Compute-bound rows above 1.2x their GEMMs alone: " + (", ".join(gemm_far) or "none") + ".",
              f"Floors measured in this run: copy {fmt(copy, 1)} GB/s (read + written), "
              f"BLAS GEMM {fmt(1e3 * gemm if gemm else None, 1)} GFLOP/s (f32 or f64 by case)."]
    return lines


def run_cpu(args, cases):
    set_threads(args.threads)
    rows = []
    for k, c in enumerate(cases):
        for dtype in args.dtypes or c.cpu_dtypes:
            r = time_row(args, c, dtype, seed=k)
            rows.append(r)
            print(f"{c.name:14s} {dtype:4s} einc {r['einc']:8.4f}  "
                  + "  ".join(f"{p} {fmt(r.get(p), 4):>8s}" for p in PEERS)
                  + f"  floor {fmt(r['floor']):>7s}  einc/GEMMs {fmt(r.get('gemm_ratio'), 2):>4s}"
                  f"  einc/best {fmt(ratio(r['einc'], r.get(r['best'])), 2)}",
                  flush=True)
    return f"cpu-{os.cpu_count()}core", cpu_table(args, rows)

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
    ap.add_argument('--einc-before', help='CPU: an earlier einc build, timed in the same rounds')
    ap.add_argument('--dtypes', nargs='+')
    ap.add_argument('--cases', nargs='+')
    ap.add_argument('--runs', type=int, default=20, help='timed runs per contender and round')
    ap.add_argument('--rounds', type=int, default=5, help='CPU: interleaved rounds')
    ap.add_argument('--threads', type=int, default=os.cpu_count(),
                    help='CPU: threads for einc and every peer')
    ap.add_argument('--best', action='store_true',
                    help='CPU: each contender\'s best run of all rounds, not the median '
                         '(for a machine that other work loads: load only ever slows a run)')
    ap.add_argument('--quick', action='store_true',
                    help='CPU: 2 rounds of 5 runs, for iteration (not for results files)')
    ap.add_argument('--no-install', action='store_true',
                    help='CPU: use this Python as it is; never make the peers\' venv')
    ap.add_argument('--out', help='result file (default bench/results/DATE-DEVICE.md)')
    args = ap.parse_args()
    args.date = datetime.date.today().isoformat()
    args.load_start = os.getloadavg()[0]
    if args.target == 'cpu':
        ensure_peers(args)
        if args.quick:
            args.rounds, args.runs = 2, 5
    elif not args.dtypes:
        args.dtypes = ['bf16', 'f32']
    cases = [c for c in suite.load() if (not args.cases or c.name in args.cases)
             and (args.target == 'cpu' or c.gpu_shapes)]
    dev, lines = (run_cpu if args.target == 'cpu' else run_gpu)(args, cases)
    if args.quick and not args.out:
        print('\n'.join(lines[-5:]))
        return
    out = args.out or os.path.join(ROOT, 'bench', 'results', f'{args.date}-{dev}.md')
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'wrote {out}')


if __name__ == '__main__':
    main()
