"""The benchmark suite of bench/cases.tsv, shared by the drivers."""
import math
import os
import shlex

HERE = os.path.dirname(os.path.abspath(__file__))


class Case:
    def __init__(self, name, expr, gpu, cpu, flags):
        self.name, self.expr, self.flags = name, expr, shlex.split(flags)
        self.gpu_shapes = [tuple(int(x) for x in s.split('x')) for s in gpu.split()]
        self.cpu_shapes = [tuple(int(x) for x in s.split('x')) for s in cpu.split()]

    def shapes(self, target):
        return self.gpu_shapes if target == 'gpu' else self.cpu_shapes

    def lengths(self):
        """-D NAME=SIZE flags as a dict (the einops axis lengths)."""
        out = {}
        for i, f in enumerate(self.flags):
            if f == '-D':
                k, v = self.flags[i + 1].split('=')
                out[k] = int(v)
        return out

    def reduction(self):
        return self.flags[self.flags.index('--reduce') + 1] if '--reduce' in self.flags else None


def median(values):
    """The median, as `einc bench` reports it."""
    t = sorted(values)
    k = len(t)
    return t[k // 2] if k % 2 else 0.5 * (t[k // 2 - 1] + t[k // 2])


def rotation_copies(nbytes, cache_bytes):
    """Input copies to rotate through, by `einc bench`'s rule: inputs that
    fit twice in the cache get enough copies to cover it four times, at most
    32."""
    if nbytes == 0 or nbytes >= 2 * cache_bytes:
        return 1
    return min(32, math.ceil(4 * cache_bytes / nbytes))


def load(path=os.path.join(HERE, 'cases.tsv')):
    cases = []
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        cols = line.rstrip('\n').split('\t')
        cols += [''] * (5 - len(cols))
        cases.append(Case(*cols[:5]))
    return cases
