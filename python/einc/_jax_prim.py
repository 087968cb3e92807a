"""einc's JAX primitive ``einc_einsum``: its output's shape from einc's
binder, its lowering to the XLA custom call of einc's FFI handler
(python/src/xla_ffi.c; wrapped with einc's sharding rule where XLA
partitions the program: einc/_jax_sharding.py), its eager
implementation (einc's DLPack path) and its batching rule. The
derivative rules and the route into the primitive: einc/_jax.py."""

from __future__ import annotations

import string

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax._src import core as _jax_core

from ._core import EincError, bind

# The custom call's target, versioned: the name is the contract (the
# attributes xla_ffi.h lists, their meaning, the operand and result
# layout). A program exported with einc_eval_v1 runs on any later einc,
# which keeps registering v1's handler; a change to the contract gets a
# new name. So einc vouches for the target's stability to jax.export
# (einc._jax._declare_stable), and exported programs need no
# disabled_checks.
_TARGET = "einc_eval_v1"


# --- the call: a primitive lowered to one FFI custom call -------------------
#
# einc's call is a JAX primitive of its own, `einc_einsum`, with the rules
# JAX asks of one (the way jax.extend documents custom primitives): its
# output's shape from einc's binder, a lowering to the custom call of
# einc's handler, a batching rule (a named batch axis in the expression),
# a JVP rule (the C library's JVP programs: ein_jvp_create) and, for sum
# and mean, which are linear in each input, a transpose rule (the
# gradient program of the one linear input: ein_grad_create). JAX's grad
# is the transpose of the JVP, so jvp, jacfwd, hessian, grad and vmap all
# come from these rules. A jax.custom_vjp, which the call was before,
# cannot be differentiated forward (issue 38); a jax.custom_jvp cannot be
# transposed through an FFI call, and linear_call, which can, has no vmap
# rule.

einsum_p = Primitive("einc_einsum")


def _params(spec):
    expr, reduction, numpy, lengths = spec
    return dict(expr=expr, reduction=reduction, numpy=bool(numpy),
                lengths=tuple(lengths))


def _spec(params):
    return (params["expr"], params["reduction"], params["numpy"],
            params["lengths"])


def _bind(spec, tensors):
    if any(not isinstance(n, (int, np.integer)) for _, n in spec[3]):
        spec, tensors = _sizes_as_operand(spec, tensors)
    return einsum_p.bind(*_same_variance(tensors), **_params(spec))


def _same_variance(tensors):
    """Inside shard_map, operands made to vary along the same manual mesh
    axes (jax's pvary on those that do not), as jax's own primitives have
    them: the transpose of pvary is the psum that a replicated operand's
    gradient needs (grad of a shard_map that calls einc)."""
    insert = getattr(_jax_core, "auto_insert_reshard", None)
    if insert is None or len(tensors) < 2:
        return tensors
    return insert(*tensors)


def _sizes_as_operand(spec, tensors):
    """A call whose given lengths are jax.export's symbolic dimensions
    (a repeat's new axis, b=x.shape[0]; the backward of a sum): the
    custom call's attributes must be constants, so the lengths of axes
    only the output has come as an operand of ones of those sizes
    ('i -> b i' becomes 'i, b -> b i': x * 1 is exact), and lengths of
    axes an input has are left to the binder."""
    expr, reduction, numpy, lengths = spec
    if numpy:
        raise EincError(f"einc under jax.export: symbolic lengths with "
                        f"numpy's dialect ('{expr}')")
    lhs, _, rhs = expr.partition("->")
    inputs = set(lhs.replace("(", " ").replace(")", " ").replace(",", " ")
                 .split())
    symbolic = [(k, n) for k, n in lengths
                if not isinstance(n, (int, np.integer))]
    new = [(k, n) for k, n in symbolic if k not in inputs]
    kept = tuple((k, n) for k, n in lengths
                 if isinstance(n, (int, np.integer)))
    if new:
        lhs = f"{lhs}, {' '.join(k for k, _ in new)}" if tensors else \
            " ".join(k for k, _ in new)
        ones = jnp.ones(tuple(n for _, n in new), tensors[0].dtype)
        tensors = (*tensors, ones)
    return (f"{lhs}->{rhs}", reduction, numpy, kept), tuple(tensors)


def _abstract_eval(*avals, expr, reduction, numpy, lengths):
    shapes = tuple(tuple(a.shape) for a in avals)
    if not _symbolic(shapes):
        shape = bind(expr, shapes, reduce=reduction, numpy=numpy,
                     **dict(lengths))[0]
        _refusals(expr, shapes, avals[0].dtype, reduction, numpy, lengths)
    else:
        shape = _symbolic_output(expr, shapes, reduction, numpy, lengths)
    # Inside shard_map the output varies along the manual mesh axes any
    # input varies along (JAX's type of per-device values: its transpose
    # checks the cotangent's against it)
    # (_same_variance made the operands' alike)
    mat = getattr(avals[0], "manual_axis_type", None)
    if mat is not None and not getattr(mat, "empty", True):
        return jax.core.ShapedArray(
            shape, avals[0].dtype,
            sharding=_jax_core.get_cur_mesh_sharding(),
            manual_axis_type=mat)
    return jax.core.ShapedArray(shape, avals[0].dtype)


def _refusals(expr, shapes, dtype, reduction, numpy, lengths):
    """The planner's refusals that the binder does not see (a reduction
    the dtype lacks, a max over an empty axis), raised while tracing as
    eager einc raises them, not from the compiled program's run. The
    rule stays the planner's (src/planner/contract.c): it plans the call
    for the CPU, only where it may refuse (dtypes other than real
    floating point, and empty inputs), so float calls pay nothing."""
    if jnp.issubdtype(dtype, jnp.floating) and \
            all(d != 0 for s in shapes for d in s):
        return
    from ._api import plan

    plan(expr, *shapes, dtype=jnp.dtype(dtype).name, reduce=reduction,
         numpy=numpy, backend="cpu", **dict(lengths))


def _symbolic(shapes) -> bool:
    return any(not isinstance(d, (int, np.integer)) for s in shapes
               for d in s)


def _symbolic_output(expr, shapes, reduction, numpy, lengths):
    """The output shape as expressions of jax.export's symbolic input
    dimensions (einc._shapes.solve), bound first on stand-in sizes
    (einc._shapes.hint) for einc's errors."""
    from ._shapes import hint, solve

    shapes = tuple(tuple(int(d) if isinstance(d, np.integer) else d
                         for d in s) for s in shapes)
    hints = tuple(tuple(hint(d) for d in s) for s in shapes)
    bind(expr, hints, reduce=reduction, numpy=numpy, **dict(lengths))
    solved = solve(expr, shapes, hints, numpy, reduction, lengths,
                   tuple(lengths))
    if solved is None:
        raise EincError(f"einc under jax.export: the sizes of '{expr}' do "
                        f"not follow from the symbolic input shapes {shapes}")
    size, _, dims, _ = solved
    return tuple(_prod(size[i] for i in ids) for ids in dims[-1])


def _prod(values):
    out = 1
    for v in values:
        out = out * v
    return out


def _impl(*tensors, expr, reduction, numpy, lengths):
    """Concrete arrays (a rule run eagerly, e.g. grad outside jit): einc's
    DLPack path, as outside any transformation."""
    from ._core import evaluate

    return evaluate(expr, tensors, reduce=reduction, numpy=numpy,
                    lengths=lengths)


def _lowering(ctx, *operands, expr, reduction, numpy, lengths):
    """The custom call of einc's FFI handler, with the attributes
    xla_ffi.c reads; in a program XLA partitions over several devices,
    wrapped with einc's sharding rule (einc/_jax_sharding.py)."""
    from . import _jax_sharding

    if _jax_sharding.partitioned(ctx):
        params = _params((expr, reduction, numpy, lengths))
        return _jax_sharding.lower(ctx, operands, _bind_params, params)
    return _ffi_lowering(ctx, *operands, expr=expr, reduction=reduction,
                         numpy=numpy, lengths=lengths)


def _bind_params(*tensors, **params):
    return einsum_p.bind(*tensors, **params)


def _ffi_lowering(ctx, *operands, expr, reduction, numpy, lengths):
    rule = jax.ffi.ffi_lowering(_TARGET)
    return rule(ctx, *operands, expr=expr, reduction=reduction,
                numpy=int(numpy),
                length_names=" ".join(name for name, _ in lengths),
                length_sizes=np.array([size for _, size in lengths],
                                      np.int64))


einsum_p.def_abstract_eval(_abstract_eval)
einsum_p.def_impl(_impl)


# --- vmap: a batch axis in the expression -----------------------------------

def _fresh_name(expr: str, numpy: bool) -> str | None:
    """An axis name that expr does not use: a letter for numpy's dialect
    (None when all 52 are taken), a word for einops'."""
    if numpy:
        free = [c for c in string.ascii_letters if c not in expr]
        return free[0] if free else None
    k = 0
    while f"vmap{k}" in expr:
        k += 1
    return f"vmap{k}"


def _numpy_output(lhs: str) -> str:
    """numpy's implicit output: '...' first (when any term has it), then
    the letters used once, in order of their character codes."""
    letters = lhs.replace("...", "").replace(",", "")
    once = sorted(c for c in set(letters) if letters.count(c) == 1)
    return ("..." if "..." in lhs else "") + "".join(once)


def _batched_spec(spec, in_batched):
    """spec with a new leading axis on the batched inputs and the output,
    or None when no name is free (then the batch runs one call at a
    time)."""
    expr, reduction, numpy, lengths = spec
    name = _fresh_name(expr, numpy)
    if name is None:
        return None
    lhs, arrow, rhs = expr.partition("->")
    if not arrow:
        if not numpy:
            return None
        rhs = _numpy_output(lhs)
    sep = "" if numpy else " "
    terms = [name + sep + term.strip() if batched else term
             for term, batched in zip(lhs.split(","), in_batched)]
    out = ",".join(terms) + "->" + name + sep + rhs.strip()
    return (out, reduction, numpy, lengths)


def _batch_rule(tensors, dims, **params):
    """vmap: the batched inputs' batch dim first, one call of the
    expression with a batch axis added (nested vmaps add one each)."""
    spec = _spec(params)
    in_batched = [d is not None for d in dims]
    tensors = [t if d is None else jnp.moveaxis(t, d, 0)
               for t, d in zip(tensors, dims)]
    batched = _batched_spec(spec, in_batched)
    if batched is not None:
        return _bind(batched, tensors), 0
    return _sequential(spec, in_batched, tensors), 0


def _sequential(spec, in_batched, tensors):
    """The batch one element at a time (jax.lax.map), the fallback."""
    mapped = [t for t, b in zip(tensors, in_batched) if b]

    def one(xs):
        it = iter(xs)
        return _bind(spec, [next(it) if b else t
                            for t, b in zip(tensors, in_batched)])

    return jax.lax.map(one, mapped)
