"""The JAX side of a gradient or JVP program (include/ein.h,
"gradients"): the steps the C library derives (einc._grad.program), run
with einsum steps as einc's primitive (differentiable again) and the rest
as jnp operations. einc._jax's JVP and transpose rules call _run."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._jax_prim import _bind

def _run(prog, tensors, out, seed):
    """A gradient or JVP program's result: einsum steps as einc calls
    (differentiable again), the rest jnp operations; seed is dout or the
    tangent."""
    values = {"dout": [seed], "tangent": [seed], "input": tensors,
              "output": [out]}
    results = []
    for step in prog["steps"]:
        operands = [results[i] if kind == "step" else values[kind][i]
                    for kind, i in step["operands"]]
        results.append(_STEPS[step["op"]](step, operands))
    return results[-1]


def _einsum_step(step, ops):
    spec = (step["expr"], step["reduction"], False, tuple(step["lengths"]))
    return _bind(spec, ops)


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
    "prod_select": _prod_select,
    "scatter_diag": _scatter_diag,
}
