"""einc inside JAX's transformations (issues 25, 38): jax.jit, jax.grad,
jax.vmap, jax.jvp, jacfwd and hessian of einc.einsum, rearrange, reduce
and repeat.

A call whose inputs include a JAX tracer becomes einc's primitive
``einc_einsum``, lowered to an XLA custom call of einc's FFI handler
(python/src/xla_ffi.c), so it stays inside the compiled program and runs
ein_eval on XLA's buffers (on a GPU, on XLA's stream). Its rules:

- the output's shape and dtype come from einc's binder (no data needed);
- JVP: the C library's JVP program of each input with a tangent
  (einc._grad, ein_jvp_create), so jax.jvp, jacfwd and hessian work;
- transpose (sum and mean, linear in each input): the input's gradient
  program (ein_grad_create), so grad, JAX's transpose of the JVP, runs
  einc's backward; the programs' einsum steps are the primitive again
  (jit of grad stays inside XLA; grad of grad works) and their
  elementwise steps jnp operations;
- batching: a named batch axis added to the expression, so one einc call
  serves the whole batch.

Concrete jax.Arrays outside any transformation keep the DLPack path.

The adapter is this module (the route, registered with einc._core, and
the derivative rules), einc/_jax_prim.py (the primitive: shape,
lowering, batching) and einc/_jax_grad.py (the derivative programs'
steps as jnp operations and primitive calls).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from . import _core, _einc
from ._core import EincError, _reduction_name, numpy_dialect
from ._jax_grad import _run
from ._jax_prim import (_TARGET, _batch_rule, _bind, _lowering, _spec,
                        _symbolic, einsum_p)

_Tracer = jax.core.Tracer
_registered = False


def _register() -> None:
    """Registers einc's FFI handlers with XLA, once: on `import einc` when
    jax is imported (einc/__init__.py), so a deserialized jax.export
    program finds them in a new process."""
    global _registered
    if _registered:
        return
    targets = _einc.xla_ffi_targets()
    if not targets:
        raise EincError("this einc has no XLA FFI handler")
    for platform, capsule in targets.items():
        jax.ffi.register_ffi_target(_TARGET, capsule, platform=platform)
        mlir.register_lowering(einsum_p, _lowering,
                               platform=platform.lower())
    _declare_stable()
    _registered = True


def _declare_stable() -> None:
    """Adds einc's versioned target to jax.export's set of custom calls
    whose compatibility is guaranteed. The set is private to jax (there is
    no public registry for third-party targets); where a jax release
    moves it, export falls back to asking for
    disabled_checks=[DisabledSafetyCheck.custom_call('einc_eval_v1')]."""
    try:
        from jax._src.export import _export
    except ImportError:
        return
    stable = getattr(_export, "_CUSTOM_CALL_TARGETS_GUARANTEED_STABLE", None)
    if isinstance(stable, set):
        stable.add(_TARGET)


def route(expr, tensors, *, reduce, numpy, lengths):
    """einc's call as part of the JAX program being traced, or
    NotImplemented when no input is a tracer (the DLPack path)."""
    for t in tensors:
        if isinstance(t, _Tracer):
            break
    else:
        return NotImplemented
    _register()
    # (nested lists of numbers or tracers as arrays: jnp.result_type
    # cannot read a list's dtype)
    tensors = tuple(jnp.asarray(t) if isinstance(t, (list, tuple)) else t
                    for t in tensors)
    dtype = jnp.result_type(*tensors)  # as jnp.einsum promotes
    tensors = tuple(jnp.asarray(t, dtype) for t in tensors)
    if numpy is None:
        numpy = numpy_dialect(expr, [t.ndim for t in tensors])
    spec = (expr, _reduction_name(reduce), bool(numpy), tuple(lengths))
    return _differentiable(spec, len(tensors))(*tensors)


# --- derivatives: the C library's JVP and gradient programs ----------------

_DIFFERENTIABLE = ("float16", "bfloat16", "float32", "float64", "complex64",
                   "complex128")
_LINEAR = ("sum", "mean")  # reductions under which a call is multilinear


def _derivable(spec, tensors, wrt):
    dtype = jnp.dtype(tensors[wrt].dtype).name
    return dtype in _DIFFERENTIABLE and spec[1] not in ("any", "all")


def _jvp_rule(primals, tangents, **params):
    """The output's tangent: the sum, over the inputs with a tangent, of
    each one's JVP program run on it (sum and mean: the expression with
    the input replaced by its tangent; max and min: the tangent at the
    arg-extremum, ties averaged, as jnp.max's; prod: the product rule,
    exact with zeros)."""
    spec = _spec(params)
    out = _bind(spec, primals)
    total = None
    for k, t in enumerate(tangents):
        if type(t) is ad.Zero or not _derivable(spec, primals, k):
            continue
        part = _run(_program(spec, primals, k, True), primals, out, t,
                    spec, k, True)
        total = part if total is None else total + part
    if total is None:
        return out, _zero_tangent(out)
    return out, total


def _zero_tangent(out):
    """The tangent of an output nothing moved: float0 for integer and
    bool outputs, as JAX has them."""
    if jnp.issubdtype(out.dtype, jnp.inexact):
        return jnp.zeros_like(out)
    return np.zeros(out.shape, jax.dtypes.float0)


def _transpose_rule(ct, *tensors, **params):
    """A sum or mean is linear in each input: the transpose in the one
    linear input (an undefined primal) is that input's gradient program
    run on the cotangent (JAX's VJP is the transpose of the JVP, with no
    conjugation: the program's `conjugates` is not applied)."""
    spec = _spec(params)
    linear = [k for k, t in enumerate(tensors) if ad.is_undefined_primal(t)]
    if spec[1] not in _LINEAR or len(linear) != 1:
        raise NotImplementedError(
            f"einc: transposing '{spec[0]}' ({spec[1]}) in {len(linear)} "
            f"inputs: only a sum or mean in one input is linear")
    k, = linear
    if type(ct) is ad.Zero:
        return [None] * len(tensors)
    shaped = [t.aval if ad.is_undefined_primal(t) else t for t in tensors]
    grad = _run(_program(spec, shaped, k, False), shaped, None, ct, spec,
                k, False)
    return [grad if i == k else None for i in range(len(tensors))]


def _needs_devices() -> None:
    """The sharded lowering (custom_partitioning) needs the program's
    device assignment, which jax hands a lowering only for primitives in
    its (private) set of those that ask; without it the call lowers as on
    one device (XLA then gathers the inputs)."""
    try:
        from jax._src import dispatch
    except ImportError:
        return
    needs = getattr(dispatch, "prim_requires_devices_during_lowering", None)
    if isinstance(needs, set):
        needs.add(einsum_p)


_needs_devices()
ad.primitive_jvps[einsum_p] = _jvp_rule
ad.primitive_transposes[einsum_p] = _transpose_rule
batching.primitive_batchers[einsum_p] = _batch_rule


def _differentiable(spec, n):
    """The call of spec on n tensors: the primitive, whose rules make it
    differentiable and batchable."""
    del n
    return lambda *tensors: _bind(spec, tensors)


def _program(spec, tensors, wrt, jvp):
    """The gradient (jvp: JVP) program of input wrt; under jax.export's
    symbolic shapes derived on stand-ins and made symbolic
    (einc._shapes.symbolic_program)."""
    from . import _shapes
    from ._grad import program

    expr, reduction, numpy, lengths = spec
    shapes = tuple(tuple(t.shape) for t in tensors)
    symbolic = _symbolic(shapes)
    made = program(expr, tuple(tuple(_shapes.hint(d) for d in s)
                               for s in shapes) if symbolic else shapes,
                   wrt=wrt, reduce=reduction, numpy=numpy,
                   dtype=jnp.dtype(tensors[wrt].dtype).name,
                   lengths=lengths, jvp=jvp)
    if not symbolic:
        return made
    hints = tuple(tuple(_shapes.hint(d) for d in s) for s in shapes)
    solved = _shapes.solve(expr, shapes, hints, numpy, reduction, lengths,
                           tuple(lengths))
    made = None if solved is None else _shapes.symbolic_program(
        made, solved[0], solved[1], lambda count: ("inverse", count))
    if made is None:
        raise EincError(f"einc under jax.export: the derivative of '{expr}' "
                        f"needs concrete sizes (a diagonal's scatter), got "
                        f"{shapes}")
    return made


# The adapter registers its route with einc's core (einc/__init__.py
# imports this module when jax is imported, before or after einc)
_core.register_route("jax", route)
