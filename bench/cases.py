"""The benchmark suite of bench/cases.tsv, shared by the drivers."""
import math
import os
import shlex

HERE = os.path.dirname(os.path.abspath(__file__))


class Case:
    def __init__(self, name, expr, gpu, cpu, flags, cpu_dtypes=''):
        self.name, self.expr, self.flags = name, expr, shlex.split(flags)
        # '-' for GPU shapes: a CPU-only case (the GPU suite is issue 5's).
        self.gpu_shapes = [] if gpu.strip() == '-' else [
            tuple(int(x) for x in s.split('x')) for s in gpu.split()]
        self.cpu_shapes = [tuple(int(x) for x in s.split('x')) for s in cpu.split()]
        self.cpu_dtypes = cpu_dtypes.split() or ['f32']

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

    def tiny(self):
        """Every CPU input has at most 64 elements: an overhead-bound case."""
        return all(math.prod(s) <= 64 for s in self.cpu_shapes)

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
        cols += [''] * (6 - len(cols))
        cases.append(Case(*cols[:6]))
    return cases
