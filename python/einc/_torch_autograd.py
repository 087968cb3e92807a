"""torch tensors in torch's graph: the route of a call on torch tensors
(registered with einc._core by einc/_torch.py), the views made by torch,
the calls lowered onto torch's operations (einc/_torch_lower.py), the
custom operator einc::einsum, the autograd Functions of eager calls, and
their backward and JVP by the C library's derivative programs (run by
einc/_torch_grad.py). einc/_torch.py says how the parts fit together."""

from __future__ import annotations

import functools

import torch

from . import _einc, _shapes, _torch_lower
from ._core import _reduction_name, evaluate, numpy_dialect
from ._torch_base import (_DETACH, _FUNC, _GRAPH, _JIT, _NEEDS_OUTPUT,
                          _PLAIN, _PLAIN_TYPES, EincError, _autocast,
                          _check_dense,
                          _axis_sizes, _compute, _dtype_name,
                          _dual_level_open, _hint, _hints, _layout, _mode,
                          _op_lengths, _op_lengths_of, _output_sizes, _prod,
                          _specialize, _structure, _symbolic)
from ._torch_grad import _interpret

def route(expr, tensors, *, reduce, numpy, lengths):
    """einc._core's question: the result of a call on torch tensors
    that the DLPack path must not serve, or NotImplemented."""
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        return NotImplemented
    _check_dense(tensors)
    reduction = _reduction_name(reduce)
    lengths = tuple(lengths)
    tensors = tuple(tensors)
    cast = _autocast(expr, tensors, numpy, reduction, lengths)
    mode = _mode(cast)
    if mode == _PLAIN:
        if cast is tensors:
            return NotImplemented
        return _dlpack(expr, cast, reduction, numpy, lengths)
    if mode == _DETACH:
        return _dlpack(expr, tuple(t.detach() for t in cast), reduction,
                       numpy, lengths)
    if mode == _JIT:
        return _jit(expr, cast, reduction, numpy, lengths)
    return _graph(expr, cast, reduction, numpy, lengths,
                  mode in (_GRAPH, _FUNC), mode == _FUNC)


def eager_grad(args, numpy, reduce, lengths):
    """einc.einsum's shortcut (einc._core.eager_grad) for the common
    training call: expression first, plain tensors of which one needs
    grad, grad recorded, nothing tracing, no autocast. It asks what
    _mode would, in the order that rejects other calls soonest; any other
    call is NotImplemented and goes the general way (route)."""
    if len(args) < 2 or not isinstance(args[0], str):
        return NotImplemented
    tensors = args[1:]
    if not _eager_recorded(tensors):
        return NotImplemented
    _check_dense(tensors)
    return _graph(args[0], tensors, _reduction_name(reduce), numpy,
                  lengths or (), True)


def _eager_recorded(tensors) -> bool:
    """Plain tensors, one of which needs grad, grad recorded, nothing
    tracing, no autocast: what _mode calls _GRAPH, asked in the order that
    rejects other calls soonest."""
    grad = False
    for t in tensors:
        if type(t) not in _PLAIN_TYPES:
            return False
        grad = grad or t.requires_grad
    return (grad and torch.is_grad_enabled()
            and torch._C._get_tracing_state() is None
            and not torch._C._len_torch_dispatch_stack()
            and not torch._C._are_functorch_transforms_active()
            and not torch._C._is_any_autocast_enabled())


def _jit(expr, tensors, reduction, numpy, lengths):
    """Under torch.jit.trace: the operator, which the trace records with
    its arguments, so the traced function computes on new inputs (of new
    shapes too). A view would be recorded as an as_strided of the traced
    shapes, so here every result is new."""
    if numpy is None:
            numpy = numpy_dialect(expr, [t.dim() for t in tensors])
    return torch.ops.einc.einsum(list(tensors), expr, reduction,
                                 bool(numpy), *_op_lengths(lengths))


def _dlpack(expr, tensors, reduction, numpy, lengths):
    """einc's own path for tensors that need no graph."""
    return evaluate(expr, tensors, reduce=reduction, numpy=numpy,
                    lengths=lengths)


_EAGER_LAYOUTS: dict = {}


def _eager_layout(expr, tensors, dtype, numpy, reduction, lengths):
    """_layout for eager calls, keyed by what the tensors say as they say
    it (torch.Size and stride tuples: no conversions on a hit)."""
    key = (expr, dtype, numpy, reduction, lengths,
           *[(t.shape, t.stride()) for t in tensors])
    hit = _EAGER_LAYOUTS.get(key)
    if hit is None:
        if len(_EAGER_LAYOUTS) >= 4096:
            _EAGER_LAYOUTS.clear()
        hit = _EAGER_LAYOUTS[key] = _layout(
            expr, [t.shape for t in tensors], [t.stride() for t in tensors],
            dtype, numpy, reduction, lengths)
    return hit


def _graph(expr, tensors, reduction, numpy, lengths, eager, func=False):
    """A result in torch's graph: a torch view where the plan only
    re-reads an input, else einc's operator (eager: _EinsumFunction)."""
    first = tensors[0]
    for t in tensors:
        if t.dtype != first.dtype:
            raise EincError(f"einc takes tensors of one dtype: got "
                            f"{first.dtype} and {t.dtype}")
    lowered = _lowered(expr, tensors, reduction, numpy, lengths, eager)
    if lowered is not None:
        return lowered
    if eager:
        numpy, shape, view = _eager_layout(expr, tensors, first.dtype, numpy,
                                           reduction, lengths)
    elif _symbolic([t.shape for t in tensors] + [[v for _, v in lengths]]):
        # torch.compile's dynamic shapes: the operator, whose fake
        # implementation keeps the sizes symbolic. The numpy dialect is
        # read from the ranks. But a view must be torch's (issue 38: a
        # write into the input is seen through it): where the plan on the
        # sizes' hints is one (a diagonal; lowering made the others
        # permutes and reshapes), the sizes are specialized and the view
        # made as for static shapes.
        if numpy is None:
            numpy = numpy_dialect(expr, [t.dim() for t in tensors])
        view = _layout(expr, _hints(t.shape for t in tensors),
                       _hints(t.stride() for t in tensors), first.dtype,
                       numpy, reduction,
                       tuple((k, _hint(v)) for k, v in lengths))[2]
        if view is not None:
            numpy, shape, view = _layout(
                expr, tuple(tuple(int(d) for d in t.shape) for t in tensors),
                tuple(tuple(int(d) for d in t.stride()) for t in tensors),
                first.dtype, numpy, reduction,
                tuple((k, int(v)) for k, v in lengths))
    else:
        numpy, shape, view = _layout(
            expr, tuple(tuple(int(d) for d in t.shape) for t in tensors),
            tuple(tuple(int(d) for d in t.stride()) for t in tensors),
            first.dtype, numpy, reduction, lengths)
    if view is not None:
        source = tensors[view[0]]
        return source.as_strided(shape, view[1],
                                 int(source.storage_offset()) + view[2])
    if eager:
        fn = _EinsumTransformable if func else _EinsumFunction
        return fn.apply((expr, reduction, numpy, lengths), *tensors)
    _no_traced_forward_mode(expr)
    return torch.ops.einc.einsum(list(tensors), expr, reduction, numpy,
                                 *_op_lengths(lengths))


def _no_traced_forward_mode(expr):
    """The operator has no forward-mode formula (torch.library registers
    none), and under torch.compile a torch.func.jvp of it gave a wrong
    tangent with no error: a traced call that is not lowered raises
    instead while a JVP transform is active (eager calls take the
    autograd.Function, whose jvp is einc's JVP program)."""
    if not torch._C._are_functorch_transforms_active():
        return
    stack = torch._C._functorch.get_interpreter_stack() or ()
    from torch._C._functorch import TransformType

    if any(i.key() == TransformType.Jvp for i in stack):
        raise EincError(
            f"forward-mode AD (torch.func.jvp, jacfwd, hessian) of "
            f"'{expr}' inside torch.compile is not supported: einc runs "
            f"it as its own operator there, which torch gives no forward "
            f"derivative. Call the transform outside torch.compile, or "
            f"compile a function whose einc calls lower onto torch's "
            f"operations (no max/min/prod reduction, diagonal or size-1 "
            f"broadcast)")


# ----------------------------------------------------------------- lowered

@functools.lru_cache(maxsize=4096)
def _lower_plan(expr, hints, numpy, reduction, lengths):
    """(steps, axis sizes, matmul elements) of the lowered form of a call
    on inputs of these concrete shapes, or None: _torch_lower.program on
    einc's binding and path. matmul elements: the inputs' and output's
    elements when the program has a matmul (0 without one)."""
    axes, dims = _structure(expr, hints, numpy, reduction, lengths, 0)
    for hint, operand in zip(hints, dims):
        if any(h != _prod(axes[i][1] for i in ids)
               for h, ids in zip(hint, operand)):
            return None  # a size-1 dim broadcast over a longer axis
    ssa = ()
    if len(hints) > 2:
        from ._api import plan

        ssa = tuple(tuple(p) for p in plan(expr, *hints, reduce=reduction,
                                           numpy=numpy, **dict(lengths)
                                           ).ssa_path)
    steps = _torch_lower.program(dims, ssa, reduction)
    if steps is None:
        return None
    sizes = tuple(n for _, n, _ in axes)
    matmul = any(step[0] == "matmul" for step in steps)
    elements = sum(_prod(h) for h in hints) + _prod(
        _prod(sizes[i] for i in ids) for ids in dims[-1])
    return steps, sizes, elements if matmul else 0


@functools.lru_cache(maxsize=256)
def _symbolic_function(steps, ninputs):
    return _torch_lower.compile(steps, ninputs)


def _lowered(expr, tensors, reduction, numpy, lengths, eager):
    """The call as torch operations in einc's order (einc/_torch_lower.py),
    or None where einc's own path serves it: expressions the lowering
    does not take, and eager calls with a matmul over
    EAGER_MAX_ELEMENTS elements (einc's kernels win there). Under
    torch.compile every call it takes is lowered: Inductor owns the
    program and fuses what surrounds the matmuls."""
    if not _torch_lower.ENABLED:
        return None
    if eager:
        fn = _eager_function(expr, tensors, reduction, numpy, lengths, 0)
        return None if fn is None else fn(*tensors)
    shapes = tuple(tuple(t.shape) for t in tensors)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in shapes])
    plan = _lower_plan(expr, _hints(shapes), bool(numpy), reduction,
                       tuple((k, _hint(v)) for k, v in lengths))
    if plan is None:
        return None
    steps, sizes, _ = plan
    if _symbolic(shapes + (tuple(v for _, v in lengths),)):
        solved = _axis_sizes(expr, shapes, bool(numpy), reduction,
                             tuple(lengths))
        if solved is None:
            _specialize(shapes)
        else:
            sizes = solved[0]
    return _symbolic_function(steps, len(tensors))(sizes, *tensors)


_EAGER: dict = {}


def _eager_function(expr, tensors, reduction, numpy, lengths, rules):
    """The lowered function of an eager call (None: not lowered), made
    once per structure, keyed by what the tensors say as they say it (no
    conversions on a hit). `rules` (ein_options.axis_rules) are checked
    when the entry is made: a call that breaks them raises EincError."""
    key = (expr, numpy, reduction, lengths, rules, tensors[0].dtype,
           *[t.shape for t in tensors])
    fn = _EAGER.get(key, False)
    if fn is False:
        if len(_EAGER) >= 4096:
            _EAGER.clear()
        fn = _EAGER[key] = _make_eager(expr, tensors, reduction, numpy,
                                       lengths, rules)
    if fn is not None and len(tensors) > 1:
        first = tensors[0].dtype
        for t in tensors:
            if t.dtype is not first:
                return None  # (einc's path says which dtypes differ)
    return fn


def set_lowering(enabled: bool) -> None:
    """Whether calls are lowered onto torch's operations where they can be
    (the default) or all take einc's own path; the tests run both ways."""
    _torch_lower.ENABLED = bool(enabled)
    _EAGER.clear()
    _einc.fast_graph_clear()


def _graph_maker(expr, tensors, numpy, reduction, lengths, rules):
    """fastgrad.c's maker: the lowered function of an eager call that
    records autograd, or None (the general path)."""
    if not _torch_lower.ENABLED:
        return None
    _check_dense(tensors)  # (raised here, the call goes route's way)
    return _make_eager(expr, tensors, reduction, numpy, lengths, rules)


_einc.fast_setup_graph(_graph_maker)


def _make_eager(expr, tensors, reduction, numpy, lengths, rules):
    if any(t.dtype.itemsize == 1 and t.is_floating_point() for t in tensors):
        return None  # fp8: einc's path (torch has no fp8 matmul to lower to)
    hints = tuple(tuple(t.shape) for t in tensors)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in hints])
    if rules:
        _einc.bind(expr, hints, bool(numpy), reduction, "auto",
                   tuple(lengths), rules)
    plan = _lower_plan(expr, hints, bool(numpy), reduction, tuple(lengths))
    if plan is None or plan[2] > _torch_lower.EAGER_MAX_ELEMENTS:
        return None
    return _torch_lower.compile(plan[0], len(tensors), plan[1])


@torch.library.custom_op("einc::einsum", mutates_args=())
def einsum_op(tensors: list[torch.Tensor], expr: str, reduction: str,
              numpy: bool, names: str, sizes: list[int]) -> torch.Tensor:
    """einc's expression `expr` (numpy's dialect when `numpy`) over
    tensors, with reduction and axis lengths (names 'h,w', sizes [8, 2]);
    a new tensor."""
    return _compute(expr, tuple(tensors), reduction, numpy,
                    _op_lengths_of(names, sizes))


@einsum_op.register_fake
def _einsum_fake(tensors, expr, reduction, numpy, names, sizes):
    first = tensors[0]
    for t in tensors:
        if t.dtype != first.dtype:
            raise EincError(f"einc takes tensors of one dtype: got "
                            f"{first.dtype} and {t.dtype}")
    return first.new_empty(_output_sizes(
        expr, tuple(tuple(t.shape) for t in tensors), numpy, reduction,
        _op_lengths_of(names, sizes)))


def _setup_context(ctx, inputs, output):
    tensors, expr, reduction, numpy, names, sizes = inputs
    ctx.spec = (expr, reduction, numpy, _op_lengths_of(names, sizes))
    ctx.needs = tuple(t.requires_grad for t in tensors)
    ctx.nsizes = len(sizes)
    ctx.save_for_backward(*tensors, output if reduction in _NEEDS_OUTPUT
                          else None)


def _op_backward(ctx, dout):
    *tensors, output = ctx.saved_tensors
    grads = _gradients(ctx.spec, tensors, output, dout, ctx.needs)
    # One entry per input, in torch's structure for it: a list of ints is
    # a leaf (None), but an empty list reads as a list of tensors ([]).
    return (list(grads), None, None, None, None,
            [] if ctx.nsizes == 0 else None)


einsum_op.register_autograd(_op_backward, setup_context=_setup_context)


@einsum_op.register_vmap
def _einsum_vmap(info, in_dims, tensors, expr, reduction, numpy, names,
                 sizes):
    """torch.func.vmap: the operator once per batch element, stacked (a
    loop, not one batched plan: correct for every expression, numpy's
    dialect and implicit outputs included)."""
    pairs = list(zip(tensors, in_dims[0]))
    results = [
        torch.ops.einc.einsum(
            [t if d is None else t.select(d, b) for t, d in pairs],
            expr, reduction, numpy, names, sizes)
        for b in range(info.batch_size)]
    return torch.stack(results), 0


def _function_backward(ctx, dout):
    *tensors, output = ctx.saved_tensors
    return (None,) + tuple(_gradients(ctx.spec, tensors, output, dout,
                                      ctx.needs_input_grad[1:]))


def _function_jvp(ctx, spec_tangent, *tangents):
    """Forward mode: the output's tangent from the inputs' (None for an
    input without one), by the C library's JVP programs."""
    *tensors, output = ctx.saved_tensors
    return _tangent(ctx.spec, tensors, output, tangents)


def _saved_output(spec, output):
    """The output when the derivative programs read it (max, min, prod's
    backward; max and min's JVP), else None."""
    return output if spec[1] in _NEEDS_OUTPUT else None


class _EinsumFunction(torch.autograd.Function):
    """The eager form of einc::einsum's autograd (same forward, same
    backward): torch.autograd.Function costs less per call than a custom
    operator's dispatch. (ctx in forward: torch binds the arguments of
    setup_context-style Functions with inspect.signature on every call.)"""

    @staticmethod
    def forward(ctx, spec, *tensors):
        expr, reduction, numpy, lengths = spec
        output = _compute(expr, tensors, reduction, numpy, lengths, True)
        ctx.spec = spec
        ctx.save_for_backward(*tensors, _saved_output(spec, output))
        if _dual_level_open():  # (saving costs a training step otherwise)
            ctx.save_for_forward(*tensors, _saved_output(spec, output))
        return output

    backward = staticmethod(_function_backward)
    jvp = staticmethod(_function_jvp)


class _EinsumTransformable(torch.autograd.Function):
    """_EinsumFunction in the form torch.func's transforms (grad, vmap)
    take, which the operator's autograd is not: setup_context, and a vmap
    rule (one call per batch element, stacked)."""

    @staticmethod
    def forward(spec, *tensors):
        expr, reduction, numpy, lengths = spec
        return _compute(expr, tensors, reduction, numpy, lengths, True)

    @staticmethod
    def setup_context(ctx, inputs, output):
        spec, *tensors = inputs
        ctx.spec = spec
        ctx.save_for_backward(*tensors, _saved_output(spec, output))
        ctx.save_for_forward(*tensors, _saved_output(spec, output))

    backward = staticmethod(_function_backward)
    jvp = staticmethod(_function_jvp)

    @staticmethod
    def vmap(info, in_dims, spec, *tensors):
        results = [
            _EinsumTransformable.apply(spec, *[
                t if d is None else t.select(d, b)
                for t, d in zip(tensors, in_dims[1:])])
            for b in range(info.batch_size)]
        return torch.stack(results), 0


# ---------------------------------------------------------------- backward

@functools.lru_cache(maxsize=4096)
def _program(expr, shapes, wrt, reduction, numpy, dtype, lengths,
             jvp=False):
    from . import _grad

    return _grad.program(expr, shapes, wrt=wrt, reduce=reduction,
                         numpy=numpy, dtype=dtype, lengths=lengths, jvp=jvp)


def _gradients(spec, tensors, output, dout, needs):
    """The gradient of each input whose entry of needs is true (None for
    the others), by the C library's backward program."""
    expr, reduction, numpy, lengths = spec
    shapes = tuple(tuple(t.shape) for t in tensors)
    dtype = _dtype_name(tensors[0].dtype)
    grads = []
    for k, need in enumerate(needs):
        if not need:
            grads.append(None)
            continue
        program = _program(expr, _hints(shapes), k, reduction, bool(numpy),
                           dtype, tuple((n, _hint(v)) for n, v in lengths))
        if _symbolic(shapes + ((v for _, v in lengths),)):
            program = _symbolic_program(program, spec, shapes)
        grads.append(_interpret(program, tensors, output, dout, spec, k))
    return grads


def _tangent(spec, tensors, output, tangents):
    """The output's tangent: the sum, over the inputs that have a tangent,
    of the C library's JVP program for that input (ein_jvp_create: the
    expression with the input replaced by its tangent; max and min the
    tangent at the arg-extremum; prod the product rule), run as the
    backward's programs are, so it is differentiable and traceable."""
    expr, reduction, numpy, lengths = spec
    shapes = tuple(tuple(t.shape) for t in tensors)
    dtype = _dtype_name(tensors[0].dtype)
    total = None
    for k, tangent in enumerate(tangents):
        if tangent is None:
            continue
        program = _program(expr, _hints(shapes), k, reduction, bool(numpy),
                           dtype, tuple((n, _hint(v)) for n, v in lengths),
                           True)
        if _symbolic(shapes + ((v for _, v in lengths),)):
            program = _symbolic_program(program, spec, shapes)
        part = _interpret(program, tensors, output, tangent, spec, k, True)
        total = part if total is None else total + part
    return total


def _symbolic_program(program, spec, shapes):
    """A backward program derived on the hints of symbolic sizes, made
    valid for every size (einc._shapes.symbolic_program); a diagonal's
    scatter (its shape and strides are sizes) specializes them."""
    expr, reduction, numpy, lengths = spec
    made = None
    if not any(step["op"] == "scatter_diag" for step in program["steps"]):
        solved = _axis_sizes(expr, shapes, numpy, reduction, tuple(lengths))
        if solved is not None:
            made = _shapes.symbolic_program(program, solved[0], solved[1],
                                            lambda count: 1 / count)
    if made is None:
        _specialize(shapes)
        return program
    return made
