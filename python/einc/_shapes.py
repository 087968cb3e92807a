"""Axis sizes as expressions of symbolic input sizes (torch.compile's and
torch.export's SymInts, jax.export's symbolic dimensions): the one solver
both frameworks use, so a traced batch or sequence length stays symbolic.

The binding's structure (which axes make each dim) does not depend on
the sizes, so it is read once from einc's binder on concrete stand-ins
(`hints`: a SymInt's example size, a JAX dimension evaluated at a
stand-in value); the sizes are then solved from the dims that hold one
unknown axis (a merged dim divides by its other axes), given lengths and
numbers fixed.
"""

from __future__ import annotations

import functools

from . import _einc


# Stand-ins for jax.export's symbolic dimensions: distinct per symbol,
# never 1 (a size-1 dim may broadcast), divisible by every small number
# (a merged dim '(h 2)' splits).
_STAND_IN = 720720
_stand_ins: dict = {}


def hint(d) -> int:
    """A size as an int without specializing it: a torch SymInt's hint
    (the example's size, read without a guard), a jax.export dimension
    evaluated with its symbols at their stand-ins, an int as it is."""
    if isinstance(d, int):
        return d
    node_hint = getattr(getattr(d, "node", None), "hint", None)
    if node_hint is not None:
        return int(node_hint)
    if hasattr(d, "_get_vars") and hasattr(d, "_evaluate"):  # jax's
        for v in sorted(d._get_vars()):
            _stand_ins.setdefault(v, _STAND_IN * (len(_stand_ins) + 2))
        return int(d._evaluate(_stand_ins))
    return int(d)


@functools.lru_cache(maxsize=4096)
def structure(expr, hints, numpy, reduction, lengths, rules):
    """(axes, dims) of the binding on these concrete shapes: axes as
    (name, size, role), each operand's dims (inputs, then the output) as
    tuples of axis indices."""
    _, axes, dims = _einc.bind(expr, hints, bool(numpy), reduction, "auto",
                               lengths, rules, True)
    return tuple(axes), tuple(dims)


def prod(values):
    out = 1
    for v in values:
        out = out * v
    return out


def solve(expr, shapes, hints, numpy, reduction, lengths, hint_lengths,
          rules=0):
    """(sizes, axes, dims, checks): every axis size as an expression of
    `shapes` (symbolic or not; `hints` are their concrete stand-ins),
    and checks, the (input dim, product of its axes) pairs the caller's
    framework should assert equal. None when some axis cannot be solved
    so (the caller specializes)."""
    given = dict(lengths)
    axes, dims = structure(expr, hints, numpy, reduction, hint_lengths,
                           rules)
    size = [given[name] if name in given else
            n if name.isdigit() or role == "repeated" else None
            for name, n, role in axes]
    solved = True
    while solved:
        solved = False
        for shape, hint, operand in zip(shapes, hints, dims):
            for d, ids in enumerate(operand):
                unknown = [i for i in ids if size[i] is None]
                if len(unknown) != 1 or (hint[d] == 1 and
                                         axes[unknown[0]][1] != 1):
                    continue  # (a size-1 dim may broadcast a longer axis)
                rest = prod(size[i] for i in ids if i != unknown[0])
                size[unknown[0]] = shape[d] if rest == 1 else shape[d] // rest
                solved = True
    if any(n is None for n in size):
        return None
    checks = [(shape[d], prod(size[i] for i in ids))
              for shape, hint, operand in zip(shapes, hints, dims)
              for d, ids in enumerate(operand)
              if hint[d] != 1 or prod(axes[i][1] for i in ids) == 1]
    return size, axes, dims, checks


def symbolic_program(program, size, axes, inverse):
    """A gradient or JVP program derived on the stand-ins of symbolic
    sizes, made valid for every size: its einsum steps are (their
    expressions do not depend on sizes); mean's scale becomes
    inverse(count), count the symbolic number of reduced elements; a
    repeat's lengths the symbolic sizes. `size` and `axes` are solve's.
    None for a program with a diagonal's scatter (its shape and strides
    are sizes): the caller specializes or refuses."""
    steps = program["steps"]
    if any(step["op"] == "scatter_diag" for step in steps):
        return None
    by_name = {name: size[i] for i, (name, _, _) in enumerate(axes)}
    count = prod(size[i] for i, (_, _, role) in enumerate(axes)
                 if role == "reduced")

    def symbolic(step):
        if step["op"] == "scale":  # mean's 1 / count
            return dict(step, scale=inverse(count))
        if step["op"] == "einsum" and step["lengths"]:  # a repeat's lengths
            return dict(step, lengths=tuple((name, by_name.get(name, n))
                                            for name, n in step["lengths"]))
        return step

    return dict(program, steps=[symbolic(step) for step in steps])
