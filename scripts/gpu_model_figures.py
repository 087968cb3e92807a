#!/usr/bin/env python3
"""The GPU model's per-kernel figures, stored and checked (issue 34 item 6;
docs/design.md, "Stored GPU-model figures").

  python3 scripts/gpu_model_figures.py --einc build/einc           check
  python3 scripts/gpu_model_figures.py --einc build/einc --write   regenerate

For every case of tests/gpu_model_cases.tsv and each of its dtypes it runs
`einc plan --backend emu --device h100 --kernel-model --json`: each kernel
counted on the emulated device, compiled by NVRTC for sm_90, priced by the
per-kernel model at the h100 data-sheet model's figures. Nothing is timed,
so the figures are the same on every run of the same code and toolkit.

Check mode compares them with tests/gpu_model_figures.tsv and fails (exit
1), naming the case, dtype, step, pass and entry point with the stored and
new figures, when a kernel's sectors per request, shared-memory wavefronts
per request, spilled bytes, work time (the model's time less the launch)
or predicted time is more than 10% worse, or when the set of kernels
changed. A change meant to make a kernel slower, or one that changes the
plans, regenerates the file with --write in the same commit: the diff of
the file shows every figure that moved. Exit 77 (meson's skip) when
NVRTC cannot be loaded: the registers come from it.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, 'tests', 'gpu_model_cases.tsv')
FIGURES = os.path.join(ROOT, 'tests', 'gpu_model_figures.tsv')
SKIP = 77
TOLERANCE = 1.10
KEY = ('case', 'dtype', 'step', 'pass', 'entry')
COLUMNS = KEY + ('kind', 'blocks', 'threads', 'sectors_per_request',
                 'ideal_per_request', 'shared_wavefronts_per_request',
                 'spill_bytes', 'registers', 'occupancy', 'work_us',
                 'predicted_us')
# (column, what it is) for the figures that must not get worse
WATCHED = (('sectors_per_request', 'sectors per request'),
           ('shared_wavefronts_per_request', 'shared wavefronts per request'),
           ('spill_bytes', 'spilled bytes'),
           ('work_us', 'work us'),
           ('predicted_us', 'predicted us'))


def load_cases(path=CASES):
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        name, expr, shapes, flags, dtypes = line.rstrip('\n').split('\t')
        for dtype in dtypes.split():
            yield name, expr, shapes.split(), shlex.split(flags), dtype


def ratio(num, den):
    return num / den if den else 0.0


def launch_row(name, dtype, launch):
    """One kernel launch's figures, as the file stores them (strings)."""
    req, sh_req = launch['requests'], launch['shared_requests']
    # the model's work: the longest of its parts (the launch time aside)
    work = max(launch.get(k, 0) for k in (
        'memory_seconds', 'l2_seconds', 'shared_seconds', 'issue_seconds',
        'compute_seconds'))
    return {
        'case': name, 'dtype': dtype, 'step': str(launch['step']),
        'pass': str(launch['pass']), 'entry': launch['entry'],
        'kind': launch['kind'], 'blocks': str(launch['blocks']),
        'threads': str(launch['threads_per_block']),
        'sectors_per_request': f"{ratio(launch['sectors'], req):.3f}",
        'ideal_per_request': f"{ratio(launch['ideal_sectors'], req):.3f}",
        'shared_wavefronts_per_request':
            f"{ratio(launch['shared_wavefronts'], sh_req):.3f}",
        'spill_bytes': str(launch['spill_store_bytes'] +
                           launch['spill_load_bytes']),
        'registers': str(launch['registers']),
        'occupancy': f"{launch['occupancy']:.3f}",
        'work_us': f"{1e6 * work:.4f}",
        'predicted_us': f"{1e6 * launch['seconds']:.4f}"}


def case_rows(einc, case):
    name, expr, shapes, flags, dtype = case
    cmd = [einc, 'plan', expr, *shapes, '--dtype', dtype, '--backend', 'emu',
           '--device', 'h100', '--kernel-model', '--json', *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        if 'nvrtc' in p.stderr.lower():
            print(f"skipped: NVRTC is needed ({p.stderr.strip()})")
            sys.exit(SKIP)
        sys.exit(f"{shlex.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    launches = json.loads(p.stdout)['kernel_model']['launches']
    return [launch_row(name, dtype, x) for x in launches]


def compute(einc):
    rows = []
    for case in load_cases():
        rows += case_rows(einc, case)
    return rows


def write(rows, path=FIGURES):
    with open(path, 'w') as f:
        f.write('# The GPU model\'s per-kernel figures (h100, sm_90) of '
                'tests/gpu_model_cases.tsv,\n# written by `python3 '
                'scripts/gpu_model_figures.py --write`; checked by the test\n'
                '# gpu_model_figures (docs/design.md, "Stored GPU-model '
                'figures").\n')
        f.write('\t'.join(COLUMNS) + '\n')
        for r in rows:
            f.write('\t'.join(r[c] for c in COLUMNS) + '\n')


def read(path=FIGURES):
    rows = []
    header = None
    for line in open(path):
        if line.startswith('#'):
            continue
        cols = line.rstrip('\n').split('\t')
        if header is None:
            header = cols
            continue
        rows.append(dict(zip(header, cols)))
    return rows


def keyed(rows):
    """Rows by (case, dtype, step, pass, entry, n): n numbers repeats."""
    out, seen = {}, {}
    for r in rows:
        k = tuple(r[c] for c in KEY)
        seen[k] = seen.get(k, 0) + 1
        out[k + (seen[k],)] = r
    return out


def name(k):
    return (f"{k[0]} {k[1]} step {k[2]} pass {k[3]} {k[4]}"
            + (f" (launch {k[5]})" if k[5] > 1 else ''))


def worse(old, new):
    """new is worse than old by more than the tolerance."""
    old, new = float(old), float(new)
    return new > old * TOLERANCE + 1e-9 if old > 0 else new > 0


def compare(stored, fresh):
    """(failures, notes): lines naming each kernel that got worse or that
    came or went, and each that got better by more than the tolerance."""
    failures, notes = [], []
    a, b = keyed(stored), keyed(fresh)
    for k in a.keys() - b.keys():
        failures.append(f"{name(k)}: stored, but the plan no longer has it")
    for k in b.keys() - a.keys():
        failures.append(f"{name(k)}: new kernel, not in the stored figures")
    for k in sorted(a.keys() & b.keys()):
        for col, what in WATCHED:
            old, new = a[k][col], b[k][col]
            if worse(old, new):
                failures.append(f"{name(k)} ({b[k]['kind']}): {what} {old} "
                                f"-> {new} (worse by more than 10%)")
            elif worse(new, old):
                notes.append(f"{name(k)}: {what} {old} -> {new} (better)")
    return failures, notes


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--einc', default=os.path.join(ROOT, 'build', 'einc'))
    ap.add_argument('--write', action='store_true',
                    help='regenerate tests/gpu_model_figures.tsv')
    args = ap.parse_args()
    fresh = compute(args.einc)
    if args.write:
        write(fresh)
        print(f"wrote {len(fresh)} kernels to {FIGURES}")
        return 0
    failures, notes = compare(read(), fresh)
    for line in notes:
        print('better:', line)
    for line in failures:
        print('FAIL:', line)
    hint = (': if meant, run python3 scripts/gpu_model_figures.py --write '
            'and commit the file' if failures else '')
    print(f"gpu_model_figures: {len(fresh)} kernels, {len(failures)} "
          f"regressions or changes{hint}")
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
