"""einc inside JAX's transformations (issue 25): jax.jit, jax.grad and
jax.vmap of einc.einsum, rearrange, reduce and repeat.

A call whose inputs include a JAX tracer becomes an XLA custom call of
einc's FFI handler (python/src/xla_ffi.c), so it stays inside the
compiled program and runs ein_eval on XLA's buffers (on a GPU, on XLA's
stream). Around it:

- the output's shape and dtype come from einc's binder (no data needed);
- ``jax.custom_vjp`` gives the backward: the C library's gradient
  program (einc._grad), whose einsum steps are einc calls again (through
  the FFI, so jit of grad stays inside XLA, and differentiable, so grad of
  grad works) and whose elementwise steps are jnp operations;
- ``jax.custom_batching.custom_vmap`` batches a call by adding a named
  batch axis to the expression, so one einc call serves the whole batch.

Concrete jax.Arrays outside any transformation keep the DLPack path.
"""

from __future__ import annotations

import functools
import string

import jax
import jax.numpy as jnp
import numpy as np

from . import _einc
from ._api import EincError, _reduction_name, bind, numpy_dialect

_TARGET = "einc_eval"
_Tracer = jax.core.Tracer
_registered = False

_REBUILD = (
    "einc under jax.jit, jax.grad or jax.vmap needs einc built with XLA's "
    "FFI header, and this einc was built without it. Rebuild where jax is "
    "installed: pip install --no-build-isolation . (meson asks jax for "
    "the header), or pip install -Csetup-args=-Dxla_ffi_include=DIR . with "
    "DIR from python -c 'import jax.ffi; print(jax.ffi.include_dir())' "
    "(scripts/python_env.sh does this)")


def _register() -> None:
    """Registers einc's FFI handlers with XLA, once."""
    global _registered
    if _registered:
        return
    targets = _einc.xla_ffi_targets()
    if not targets:
        raise EincError(_REBUILD)
    for platform, capsule in targets.items():
        jax.ffi.register_ffi_target(_TARGET, capsule, platform=platform)
    _registered = True


def route(expr, tensors, *, reduce, numpy, lengths):
    """einc's call as part of the JAX program being traced, or
    NotImplemented when no input is a tracer (the DLPack path)."""
    for t in tensors:
        if isinstance(t, _Tracer):
            break
    else:
        return NotImplemented
    _register()
    dtype = jnp.result_type(*tensors)  # as jnp.einsum promotes
    tensors = tuple(jnp.asarray(t, dtype) for t in tensors)
    if numpy is None:
        numpy = numpy_dialect(expr, [t.ndim for t in tensors])
    spec = (expr, _reduction_name(reduce), bool(numpy), tuple(lengths))
    return _differentiable(spec, len(tensors))(*tensors)


# --- the call: one FFI custom call -----------------------------------------

def _ffi_call(spec, tensors):
    """The XLA custom call of einc's handler on tensors (one dtype)."""
    expr, reduction, numpy, lengths = spec
    shape = bind(expr, [t.shape for t in tensors], reduce=reduction,
                 numpy=numpy, **dict(lengths))[0]
    result = jax.ShapeDtypeStruct(shape, tensors[0].dtype)
    # custom_vmap (below) batches the call; sequential is only the answer
    # for a batching that reaches the primitive itself
    call = jax.ffi.ffi_call(_TARGET, result, vmap_method="sequential")
    return call(*tensors, expr=expr, reduction=reduction, numpy=int(numpy),
                length_names=" ".join(name for name, _ in lengths),
                length_sizes=np.array([size for _, size in lengths],
                                      np.int64))


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


@functools.lru_cache(maxsize=1024)
def _batchable(spec):
    """The FFI call of spec, batched under jax.vmap by _batched_spec."""

    @jax.custom_batching.custom_vmap
    def call(*tensors):
        return _ffi_call(spec, tensors)

    @call.def_vmap
    def _rule(axis_size, in_batched, *tensors):
        if not any(in_batched):
            return call(*tensors), False
        batched = _batched_spec(spec, in_batched)
        if batched is not None:
            return _batchable(batched)(*tensors), True
        return _sequential(call, in_batched, tensors), True

    return call


def _sequential(call, in_batched, tensors):
    """The batch one element at a time (jax.lax.map), the fallback."""
    mapped = [t for t, b in zip(tensors, in_batched) if b]

    def one(xs):
        it = iter(xs)
        return call(*(next(it) if b else t
                      for t, b in zip(tensors, in_batched)))

    return jax.lax.map(one, mapped)


# --- grad: the C library's gradient program --------------------------------

_DIFFERENTIABLE = ("float16", "bfloat16", "float32", "float64", "complex64",
                   "complex128")


@functools.lru_cache(maxsize=1024)
def _differentiable(spec, n):
    """The batchable call of spec with einc's gradients as its VJP."""
    call = _batchable(spec)
    keep_output = spec[1] in ("max", "min", "prod")

    @jax.custom_vjp
    def f(*tensors):
        return call(*tensors)

    def fwd(*tensors):
        out = f(*tensors)  # differentiable again: grad of grad
        return out, (tensors, out if keep_output else None)

    def bwd(residuals, dout):
        tensors, out = residuals
        return tuple(_gradient(spec, k, tensors, out, dout)
                     for k in range(n))

    f.defvjp(fwd, bwd)
    return f


def _gradient(spec, wrt, tensors, out, dout):
    """d loss / d tensors[wrt] by running einc's gradient program; None
    (no cotangent) for dtypes without gradients."""
    dtype = jnp.dtype(tensors[wrt].dtype).name
    if dtype not in _DIFFERENTIABLE or spec[1] in ("any", "all"):
        return None
    from ._grad import program

    expr, reduction, numpy, lengths = spec
    prog = program(expr, tuple(tuple(t.shape) for t in tensors), wrt=wrt,
                   reduce=reduction, numpy=numpy, dtype=dtype,
                   lengths=lengths)
    # JAX's VJP is the transpose of the JVP, with no conjugation (torch
    # conjugates): prog["conjugates"] is not applied here.
    values = {"dout": [dout], "input": tensors, "output": [out]}
    results = []
    for step in prog["steps"]:
        operands = [results[i] if kind == "step" else values[kind][i]
                    for kind, i in step["operands"]]
        results.append(_STEPS[step["op"]](step, operands))
    return results[-1]


def _einsum_step(step, ops):
    spec = (step["expr"], step["reduction"], False, tuple(step["lengths"]))
    return _differentiable(spec, len(ops))(*ops)


def _prod_select(step, ops):
    """(g, p, x, z): g p / x with no zero in the group, g p at the one zero,
    0 with two or more (x made safe where that branch is not taken, so a
    second derivative sees no inf)."""
    g, p, x, z = ops
    safe = jnp.where(x == 0, jnp.ones_like(x), x)
    one_zero = jnp.where((z == 1) & (x == 0), g * p, jnp.zeros_like(g))
    return jnp.where(z == 0, g * p / safe, one_zero)


def _scatter_diag(step, ops):
    """Zeros of the step's shape with ops[0] written where view_strides
    point (a diagonal's elements in the C-contiguous result)."""
    src = ops[0]
    index = np.zeros(src.shape, np.int64)
    for d, stride in enumerate(step["view_strides"]):
        axis = np.arange(src.shape[d], dtype=np.int64) * stride
        index = index + axis.reshape((-1,) + (1,) * (src.ndim - d - 1))
    flat = jnp.zeros(int(np.prod(step["shape"])), src.dtype)
    flat = flat.at[index.reshape(-1)].set(src.reshape(-1))
    return flat.reshape(step["shape"])


def _one_if(cond, like):
    return jnp.where(cond, jnp.ones_like(like), jnp.zeros_like(like))


_STEPS = {
    "einsum": _einsum_step,
    "equal": lambda s, o: _one_if(o[0] == o[1], o[0]),
    "mul": lambda s, o: o[0] * o[1],
    "div": lambda s, o: o[0] / o[1],
    "scale": lambda s, o: o[0] * jnp.asarray(s["scale"], o[0].dtype),
    "is_zero": lambda s, o: _one_if(o[0] == 0, o[0]),
    "zero_to_one": lambda s, o: jnp.where(o[0] == 0, jnp.ones_like(o[0]),
                                          o[0]),
    "prod_select": _prod_select,
    "scatter_diag": _scatter_diag,
}
