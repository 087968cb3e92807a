"""The JAX side of a gradient or JVP program (include/ein_grad.h).
einc._jax's JVP and transpose rules call _run. On concrete
host arrays of a real dtype (eager jax.jvp, jax.grad and jax.vjp outside
jax.jit) the C library runs the program (ein_grad_execute through
_einc.grad_run: every step through the CPU backend's plans), as the
forward runs; under a trace (jax.jit, export, vmap, a JVP being
linearized) the steps run as einc's primitive (einsum steps,
differentiable again) and jnp operations, which XLA compiles
(docs/design.md, "One gradient interpreter"). Complex programs keep the
jnp steps: JAX's transpose takes no conjugation, the C program's does."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _einc
from ._grad import exact_prod_select, group_steps
from ._jax_prim import _bind


def _run(prog, tensors, out, seed, spec=None, wrt=0, jvp=False):
    """A gradient or JVP program's result for input wrt of the call spec
    (expression, reduction, dialect, lengths); seed is dout or the
    tangent."""
    if spec is not None and _concrete(prog, tensors, wrt, out, seed):
        return _in_c(prog, spec, wrt, jvp, tensors, out, seed)
    values = {"dout": [seed], "tangent": [seed], "input": tensors,
              "output": [out]}
    results = []
    for step in prog["steps"]:
        operands = [results[i] if kind == "step" else values[kind][i]
                    for kind, i in step["operands"]]
        if step["op"] == "prod_select":
            results.append(_exact_prod_select(prog, step, operands))
        else:
            results.append(_STEPS[step["op"]](step, operands))
    return results[-1]


def _concrete(prog, tensors, wrt, out, seed):
    """Whether every value the program reads is a concrete host array of
    a real dtype other than bfloat16 (a transpose's own input is an
    abstract value, which its program never reads). bfloat16 keeps the
    jnp steps: the C route's buffers are numpy arrays, and numpy's
    bfloat16 (ml_dtypes) has no DLPack export."""
    read = {i for step in prog["steps"] for kind, i in step["operands"]
            if kind == "input"}
    known = [tensors[i] for i in sorted(read)] + [seed]
    known += [out] if prog["needs_output"] else []
    return all(isinstance(t, jax.Array) and not isinstance(t, jax.core.Tracer)
               and not jnp.iscomplexobj(t) and t.dtype != jnp.bfloat16
               and all(d.platform == "cpu" for d in t.devices())
               for t in known + [tensors[wrt]] * (wrt in read))


def _in_c(prog, spec, wrt, jvp, tensors, out, seed):
    expr, reduction, numpy, lengths = spec
    ins = tuple(t if isinstance(t, jax.Array) else
                np.empty(t.shape, t.dtype) for t in tensors)
    dtype = np.dtype(ins[wrt].dtype)
    result = np.empty(tuple(prog["steps"][-1]["shape"]), dtype)
    lengths = tuple((n, int(v)) for n, v in lengths)
    key = ("jax", expr, reduction, bool(numpy), lengths, wrt, jvp,
           dtype.name, tuple(t.shape for t in ins))
    _einc.grad_run(key, expr, ins, out if prog["needs_output"] else None,
                   seed, result, bool(numpy), reduction, lengths, wrt, jvp)
    return jnp.asarray(result)


def _einsum_step(step, ops):
    spec = (step["expr"], step["reduction"], False, tuple(step["lengths"]))
    return _bind(spec, ops)


def _exact_prod_select(prog, step, ops):
    """PROD_SELECT with a derivative exact where x has zeros (einc._grad's
    exact_prod_select): a traced program may be differentiated again
    (jax.hessian, jax.jacfwd of jax.grad)."""
    reduce, back = group_steps(prog, step)

    def group(reduction):
        return lambda t: _einsum_step(
            back, [_einsum_step(dict(reduce, reduction=reduction), [t])])
    return exact_prod_select(jnp.where, *ops, group("prod"), group("sum"))


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


def _scale(scale, dtype):
    """A step's scale as an array: a number, or ('inverse', count) for
    1 / a symbolic count (jax.export's shapes)."""
    if isinstance(scale, tuple):
        return 1 / jnp.asarray(scale[1], dtype)
    return jnp.asarray(scale, dtype)


def _one_if(cond, like):
    return jnp.where(cond, jnp.ones_like(like), jnp.zeros_like(like))


_STEPS = {
    "einsum": _einsum_step,
    "equal": lambda s, o: _one_if(o[0] == o[1], o[0]),
    "mul": lambda s, o: o[0] * o[1],
    "div": lambda s, o: o[0] / o[1],
    "scale": lambda s, o: o[0] * _scale(s["scale"], o[0].dtype),
    "is_zero": lambda s, o: _one_if(o[0] == 0, o[0]),
    "zero_to_one": lambda s, o: jnp.where(o[0] == 0, jnp.ones_like(o[0]),
                                          o[0]),
    "scatter_diag": _scatter_diag,
}
