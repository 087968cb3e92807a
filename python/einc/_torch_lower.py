"""einc's plan as torch operations (issue 25, docs/design.md "Lowered
calls").

Where torch owns the execution, einc contributes the plan and torch runs
it: a call on small tensors that records autograd (eager), and every
call torch.compile traces, are written as torch's own view, reduction
and batched-matmul operations in the order einc's planner chose. torch's
autograd then records C++ nodes (an 8x8 matmul with grad costs what
torch.mm does, not an autograd.Function's Python round trip), and
Inductor sees matmuls and sums it can fuse with the code around them,
where einc's custom operator is opaque to it.

``program`` answers for one call structure (expression, shapes, dialect,
reduction, lengths): a list of steps over tensors, or None where the
expression needs what only einc's own path has (a diagonal, a broadcast
size-1 dimension, a max, min or prod reduction, whose gradient rules for
ties and zeros are einc's). Sizes are given per axis when the steps run,
so torch.compile's symbolic sizes stay symbolic.
"""

from __future__ import annotations

import functools

import torch

# Below this many elements (inputs and output together) an eager call that
# records autograd is lowered: per-call overhead outweighs einc's kernels
# there (bench/torch_autograd.py measures both sides; docs/design.md).
EAGER_MAX_ELEMENTS = 1 << 15
# False: every call takes einc's own path (its kernels, its gradient
# programs); the tests run both ways.
ENABLED = True

_LOWERED_REDUCTIONS = ("sum", "mean")


def _prod(values):
    out = 1
    for v in values:
        out = out * v
    return out


@functools.lru_cache(maxsize=4096)
def program(dims, ssa_path, reduction):
    """The steps of one call structure, or None (sizes are not part of
    it: compile takes them). dims: each input's dims, then the output's,
    as tuples of axis ids; ssa_path: einc's pairwise order (SSA pairs)
    for 3 inputs or more. Each step is a tuple compile writes as code."""
    if reduction not in _LOWERED_REDUCTIONS:
        return None
    inputs, out_dims = dims[:-1], dims[-1]
    if reduction != "sum" and len(inputs) > 1:
        return None
    flat = [tuple(a for d in operand for a in d) for operand in inputs]
    if any(len(set(f)) != len(f) for f in flat):
        return None  # a diagonal
    out_axes = tuple(a for d in out_dims for a in d)
    steps = [("input", k, inputs[k], flat[k]) for k in range(len(inputs))]
    live = dict(enumerate(flat))
    pairs = ssa_path if len(inputs) > 2 else ((0, 1),) if len(inputs) == 2 \
        else ()
    for j, (a, b) in enumerate(pairs):
        later = set(out_axes).union(*(ax for v, ax in live.items()
                                      if v not in (a, b)))
        new = len(inputs) + j
        steps.extend(_contract(a, b, live.pop(a), live.pop(b), later, new))
        live[new] = steps[-1][-1]
    (last, axes_now), = live.items()
    steps.extend(_finish(last, axes_now, out_axes, out_dims, reduction))
    return tuple(steps)


def _contract(a, b, la, lb, later, new):
    """Steps contracting values a and b (axes la, lb) into value `new`:
    axes of one side that nothing later needs are summed first; then one
    (batched) matmul of (batch, M, K) by (batch, K, N), its operands
    reshaped only where an M, K or N group is not one axis."""
    steps = []
    kept = {}
    for v, mine, other in ((a, la, lb), (b, lb, la)):
        drop = tuple(i for i, x in enumerate(mine)
                     if x not in other and x not in later)
        kept[v] = tuple(x for i, x in enumerate(mine) if i not in drop)
        if drop:
            steps.append(("sum", v, drop))
    la, lb = kept[a], kept[b]
    batch = tuple(x for x in la if x in lb and x in later)
    k = tuple(x for x in la if x in lb and x not in later)
    m = tuple(x for x in la if x not in lb)
    n = tuple(x for x in lb if x not in la)
    single = len(batch) <= 1 and len(m) == 1 and len(n) == 1 and len(k) == 1
    steps.append(("matmul", a, b, _perm(la, batch + m + k),
                  _perm(lb, batch + k + n), batch, m, k, n, single, new,
                  batch + m + n))
    return steps


def _perm(have, want):
    """The permutation taking axes `have` to `want`; None when none is."""
    perm = tuple(have.index(x) for x in want)
    return None if perm == tuple(range(len(perm))) else perm


def _finish(v, axes_now, out_axes, out_dims, reduction):
    """Steps from value v (axes_now) to the output: what the output lacks
    reduced, the rest permuted into the output's order, repeats
    expanded, dims merged."""
    steps = []
    drop = tuple(i for i, x in enumerate(axes_now) if x not in out_axes)
    if drop:
        axes_now = tuple(x for i, x in enumerate(axes_now) if i not in drop)
        steps.append(("reduce", v, drop, reduction))
    present = tuple(x for x in out_axes if x in axes_now)
    repeated = tuple(i for i, x in enumerate(out_axes) if x not in axes_now)
    merged = len(out_dims) != len(out_axes) or any(len(d) != 1
                                                   for d in out_dims)
    steps.append(("output", v, _perm(axes_now, present), repeated, out_axes,
                  out_dims if merged else None))
    return steps


def compile(steps, ninputs, sizes=None):
    """The steps as one Python function of the input tensors, made once
    per call structure (a loop over steps would cost a few microseconds
    per call, which is what lowering is for). sizes: each axis's size,
    written into the code as numbers (eager calls); None: the function
    takes them as its first argument, `size` (torch.compile's symbolic
    sizes)."""
    fresh = set()
    lines = []
    for step in steps:
        lines.extend(_SOURCE[step[0]](step, _Sizes(sizes), fresh, ninputs))
    args = ", ".join(["size"] * (sizes is None) +
                     [f"v{k}" for k in range(ninputs)])
    for name in ("mm", "bmm"):  # one torch function of the inputs in
        if lines == [f"return torch.{name}({args})"]:  # order: itself, so
            return getattr(torch, name)  # a call runs no Python frame
    source = (f"def lowered({args}):\n" +
              "".join(f"    {line}\n" for line in lines))
    scope = {"torch": torch}
    exec(source, scope)  # noqa: S102 (source made above from the steps)
    return scope["lowered"]


class _Sizes:
    """Source text of a product of axis sizes: a number when the sizes are
    known, else a product of size[i]."""

    def __init__(self, sizes):
        self.sizes = sizes

    def __call__(self, ids):
        if self.sizes is not None:
            return str(_prod(self.sizes[i] for i in ids))
        return "*".join(f"size[{i}]" for i in ids) or "1"

    def shape(self, groups):
        return "(" + "".join(f"{self(g)}, " for g in groups) + ")"


def _input_source(step, size, fresh, ninputs):
    _, k, dims, flat = step
    if len(dims) == len(flat) and all(len(d) == 1 for d in dims):
        return []
    fresh.add(k)  # split merged dims, drop literal 1s
    return [f"v{k} = v{k}.reshape({size.shape((a,) for a in flat)})"]


def _sum_source(step, size, fresh, ninputs):
    _, v, drop = step
    fresh.add(v)
    return [f"v{v} = v{v}.sum({drop})"]


def _matmul_source(step, size, fresh, ninputs):
    _, a, b, pa, pb, batch, m, k, n, single, new, out = step
    ta = f"v{a}" if pa is None else f"v{a}.permute{pa}"
    tb = f"v{b}" if pb is None else f"v{b}.permute{pb}"
    fresh.add(new)
    if single:  # each group one axis: the operands are already 2-D or 3-D
        return [f"v{new} = torch.{'bmm' if batch else 'mm'}({ta}, {tb})"]
    groups = ((batch,) if batch else ()) + (m, k)
    ta = f"{ta}.reshape({size.shape(groups)})"
    groups = ((batch,) if batch else ()) + (k, n)
    tb = f"{tb}.reshape({size.shape(groups)})"
    return [f"v{new} = torch.{'bmm' if batch else 'mm'}({ta}, {tb})"
            f".reshape({size.shape((a,) for a in out)})"]


def _reduce_source(step, size, fresh, ninputs):
    _, v, drop, reduction = step
    fresh.add(v)
    return [f"v{v} = v{v}.{'mean' if reduction == 'mean' else 'sum'}"
            f"({drop})"]


def _output_source(step, size, fresh, ninputs):
    _, v, perm, repeated, out_axes, out_dims = step
    out = f"v{v}" if perm is None else f"v{v}.permute{perm}"
    for i in repeated:
        out += f".unsqueeze({i})"
    if repeated:
        out += f".expand({size.shape((a,) for a in out_axes)})"
    if out_dims is not None:
        out += f".reshape({size.shape(out_dims)})"
    if out == f"v{v}" and v not in fresh:  # an identity: a new view, as
        out += ".view_as(" + out + ")"  # any call's result is
    return [f"return {out}"]


_SOURCE = {"input": _input_source, "sum": _sum_source,
           "matmul": _matmul_source, "reduce": _reduce_source,
           "output": _output_source}
