"""What a user of each CPU peer writes for a case of cases.tsv.

The peers are numpy.einsum(optimize=True), opt_einsum.contract, torch on
the CPU and einops on NumPy arrays. Each function is built from the case's
own expression rather than written by hand per case, so a new row in
cases.tsv needs no code here:

  - axis groups on an input, `(h h2)`, become a reshape view first, and
    groups on the output a reshape at the end (sizes from -D or solved from
    the shapes);
  - sums (and means, scaled) go through the peer's einsum, which also takes
    repeated axes (diagonals); other reductions (max, min, prod) through the
    peer's own reduce, then a permute;
  - output axes no input has (repeats) are broadcast, then materialised;
  - every result is materialised in C order, as einc writes it.

A builder returns None where the peer cannot express the case (opt_einsum
has no max; einops has no repeated axes and, on NumPy, calls np.einsum
without a path optimiser, so it is left out past two operands).
"""
import math
import re

import numpy as np


class Expr:
    """A parsed case: per input and for the output, a list of groups, each
    a list of axis names; and every axis's length."""

    def __init__(self, case, shapes):
        lhs, rhs = case.expr.split('->')
        self.inputs = [parse_side(s) for s in lhs.split(',')]
        self.output = parse_side(rhs)
        self.op = case.reduction() or 'sum'
        self.size = dict(case.lengths())
        for groups, shape in zip(self.inputs, shapes):
            if len(groups) != len(shape):
                raise ValueError(f'{case.name}: {len(shape)} dims for {len(groups)} groups')
            for g, n in zip(groups, shape):
                solve_group(g, n, self.size)
        self.letter = {}
        for ax in [a for side in self.inputs + [self.output] for g in side for a in g]:
            self.letter.setdefault(ax, chr(ord('a') + len(self.letter)))

    def flat_in(self, k):
        return [a for g in self.inputs[k] for a in g]

    def flat_out(self):
        return [a for g in self.output for a in g]

    def in_sizes(self, k):
        return [self.size[a] for a in self.flat_in(k)]

    def out_shape(self):
        return [math.prod(self.size[a] for a in g) for g in self.output]

    def present(self):
        """Output axes some input has, in output order."""
        have = {a for k in range(len(self.inputs)) for a in self.flat_in(k)}
        return [a for a in self.flat_out() if a in have]

    def reduced(self):
        out = set(self.flat_out())
        return sorted({a for k in range(len(self.inputs)) for a in self.flat_in(k)} - out)

    def spec(self, out_axes):
        ins = [''.join(self.letter[a] for a in self.flat_in(k)) for k in range(len(self.inputs))]
        return ','.join(ins) + '->' + ''.join(self.letter[a] for a in out_axes)

    def has_groups(self):
        return any(len(g) != 1 for side in self.inputs + [self.output] for g in side)

    def repeated(self):
        return any(len(set(self.flat_in(k))) != len(self.flat_in(k))
                   for k in range(len(self.inputs)))


def parse_side(text):
    groups, cur = [], None
    for tok in re.findall(r'\(|\)|[A-Za-z_][A-Za-z0-9_]*', text):
        if tok == '(':
            cur = []
        elif tok == ')':
            groups.append(cur)
            cur = None
        elif cur is not None:
            cur.append(tok)
        else:
            groups.append([tok])
    return groups


def solve_group(group, n, size):
    unknown = [a for a in group if a not in size]
    known = math.prod(size[a] for a in group if a in size)
    if len(unknown) > 1:
        raise ValueError(f'group {group}: give -D for all but one axis')
    if unknown:
        size[unknown[0]] = n // known


class Ops:
    """The few array operations the builders need, for one library."""

    def __init__(self, lib):
        self.lib = lib

    def reshape(self, x, shape):
        return x.reshape(tuple(shape))

    def einsum(self, spec, *xs):
        if self.lib == 'numpy':
            return np.einsum(spec, *xs, optimize=True)
        if self.lib == 'opt_einsum':
            import opt_einsum
            return opt_einsum.contract(spec, *xs)
        import torch
        return torch.einsum(spec, *xs)

    def reduce(self, x, op, axes):
        if self.lib == 'torch':
            import torch
            fn = {'max': torch.amax, 'min': torch.amin, 'mean': torch.mean, 'sum': torch.sum}.get(op)
            if fn is None:  # prod reduces one axis at a time
                for a in sorted(axes, reverse=True):
                    x = torch.prod(x, dim=a)
                return x
            return fn(x, dim=tuple(axes))
        return getattr(np, {'max': 'max', 'min': 'min', 'prod': 'prod', 'mean': 'mean', 'sum': 'sum'}[op])(
            x, axis=tuple(axes))

    def permute(self, x, perm):
        return x.permute(*perm) if self.lib == 'torch' else x.transpose(perm)

    def broadcast(self, x, axis_pos, shape):
        """Inserts new axes at axis_pos and broadcasts to shape."""
        for p in sorted(axis_pos):
            x = x.unsqueeze(p) if self.lib == 'torch' else np.expand_dims(x, p)
        return x.expand(*shape) if self.lib == 'torch' else np.broadcast_to(x, shape)

    def materialise(self, x):
        if self.lib == 'torch':
            return x.contiguous()
        return np.ascontiguousarray(x)


def build(lib, case, shapes):
    """fn(*arrays) for peer `lib` (numpy, opt_einsum, torch), or None."""
    e = Expr(case, shapes)
    ops = Ops(lib)
    if e.op not in ('sum', 'mean') and (len(e.inputs) > 1 or lib == 'opt_einsum' or e.repeated()):
        return None
    present = e.present()
    out_axes = e.flat_out()
    new_pos = [i for i, a in enumerate(out_axes) if a not in present]
    full = [e.size[a] for a in out_axes]
    count = math.prod(e.size[a] for a in e.reduced())
    scale = 1.0 / count if e.op == 'mean' else None
    by_einsum = e.op in ('sum', 'mean')
    spec = e.spec(present)
    in_axes0 = e.flat_in(0)

    def run(*xs):
        xs = [ops.reshape(x, e.in_sizes(k)) for k, x in enumerate(xs)]
        if by_einsum:
            y = ops.einsum(spec, *xs)
            if scale is not None:
                y = y * scale
        else:
            red = [i for i, a in enumerate(in_axes0) if a in e.reduced()]
            y = ops.reduce(xs[0], e.op, red)
            kept = [a for a in in_axes0 if a not in e.reduced()]
            y = ops.permute(y, [kept.index(a) for a in present])
        if new_pos:
            y = ops.broadcast(y, new_pos, full)
        return ops.reshape(ops.materialise(y), e.out_shape())
    return run


def build_einops(case, shapes):
    """einops on NumPy arrays, or None where einops cannot express the case."""
    import einops
    e = Expr(case, shapes)
    if e.repeated():
        return None
    if len(e.inputs) > 1:
        if e.has_groups() or len(e.inputs) > 2 or e.op != 'sum':
            return None
        return lambda *xs: np.ascontiguousarray(einops.einsum(*xs, case.expr))
    L = case.lengths()
    if e.reduced():
        return lambda x: np.ascontiguousarray(einops.reduce(x, case.expr, e.op, **L))
    if len(e.present()) < len(e.flat_out()):
        return lambda x: einops.repeat(x, case.expr, **L)
    return lambda x: np.ascontiguousarray(einops.rearrange(x, case.expr, **L))
