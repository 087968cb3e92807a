"""einc's public functions, each the first hop of its call: einsum,
check and ShapeMemo; einops' rearrange, reduce, repeat, parse_shape, pack
and unpack; grad_program and jvp_program; plan and compile (whose Plan
is einc/_plan.py); backend_available. What a call then takes is
einc._core (evaluate, the registry of framework adapters) and the C
extension; docs/design.md, "Python package", draws the routes.
"""

from __future__ import annotations

import inspect
import math
import re

from . import _core, _einc
from ._core import (RULE_NO_REDUCE, EincError, _all_bool, _fast,
                    _fast_setup, _lengths, _reduction_name, _shape_of, bind,
                    bool_einsum, evaluate, memory_limit_bytes, numpy_dialect,
                    shape_kept, split_expr)
from ._einops import (_REDUCTIONS, _concatenate, _rearrange_with,
                      _reduce_callable, _single, _solve_unknown, _star_split)
from ._grad import program
from ._plan import Plan


def einsum(*args, reduce=None, backend="auto", out=None, numpy=None,
           scales=None, out_dtype=None, memory_limit=None, **axis_sizes):
    """Evaluates an einsum or einops expression on tensors.

    The expression comes first (``einsum(expr, a, b)``) or last, as in
    einops (``einsum(a, b, expr)``). It names axes with words separated by
    spaces, splits and merges with parentheses, and may use ``...``::

        >>> import numpy as np, einc
        >>> q = np.ones((2, 4, 8, 16), np.float32)
        >>> k = np.ones((2, 4, 8, 16), np.float32)
        >>> einc.einsum('b h i d, b h j d -> b h i j', q, k).shape
        (2, 4, 8, 8)
        >>> einc.einsum('ij,jk->ik', np.eye(2), np.eye(2)).shape  # numpy's
        (2, 2)

    numpy's dialect (one letter per axis, implicit output) is used with
    ``numpy=True``, or when the expression can only be read that way.
    ``reduce`` says how axes missing from the output are reduced ('sum',
    'mean', 'max', 'min', 'prod', 'any', 'all'; only 'sum' for several
    tensors). Keywords such as ``h=8`` give axis lengths. ``backend`` is
    'auto' (where the tensors live), 'cpu', 'cuda' or 'emu'. ``out``
    receives the result in place.

    Tensors are anything with ``__dlpack__`` (numpy, torch, ...), taken
    without copies; the result is an array of the same library. As with
    numpy.einsum, a one-tensor expression that only re-reads its input
    ('ij->ji', 'ii->i', 'b (h d) -> b h d') returns a view of a numpy array
    or torch CPU tensor: writing into it writes into the input. ``out=``
    always writes into out. Errors raise einc.EincError with the
    expression and a caret under the culprit.

    fp8 tensors (ml_dtypes' float8_e4m3fn/float8_e5m2 numpy arrays, torch's
    float8 tensors) take ``scales=(s1, s2, ...)``, one per tensor: the real
    value is stored x scale (default 1). The result is float32, or
    ``out_dtype='bfloat16'``/``'float16'``, accumulated in float32.

    bool tensors contract as numpy.einsum's do: products are ands and
    sums ors (``reduce`` 'sum'); 'any' and 'all' reduce one bool tensor.
    The result has the inputs' dtype, as numpy.einsum's does: a sum of
    int8 is int8 and wraps as numpy.einsum's does (convert first, or use
    einc.einops.reduce, which promotes as einops' backends do).

    ``memory_limit`` is the bytes one intermediate may take: the planner
    keeps every intermediate within it, slicing axes where no contraction
    order does (the same result, computed slice by slice); ``'free'``
    takes a third of the free memory of the device the call runs on;
    None or 0: no limit. A limit that even slicing cannot meet raises
    EincError naming the limit that would fit.
    """
    try:  # (zero-cost until it raises)
        if memory_limit or scales is not None or out_dtype is not None:
            expr, tensors = split_expr(args)
            return evaluate(expr, tensors, reduce=reduce, backend=backend,
                            out=out, numpy=numpy,
                            lengths=_lengths(axis_sizes), scales=scales,
                            out_dtype=out_dtype,
                            memory_limit=memory_limit_bytes(memory_limit))
        if out is None and backend == "auto":
            # The cached path of plain numpy and torch CPU calls
            # (python/src/call.c); None sends the call the general way.
            lengths = _lengths(axis_sizes) if axis_sizes else None
            result = _fast(args, numpy, reduce, lengths)
            if result is None and _fast_setup():  # numpy or torch just came
                result = _fast(args, numpy, reduce, lengths)
            if result is None and _core.eager_grad is not None:
                # torch tensors that need grad, eagerly: straight to autograd
                result = _core.eager_grad(args, numpy, reduce, lengths)
                if result is NotImplemented:
                    result = None
            if result is not None:
                return result
        expr, tensors = split_expr(args)
        return evaluate(expr, tensors, reduce=reduce, backend=backend,
                        out=out, numpy=numpy, lengths=_lengths(axis_sizes))
    except EincError:
        expr, tensors = split_expr(args)
        if reduce not in (None, "sum") or not _all_bool(tensors):
            raise
        return bool_einsum(expr, tensors, numpy=numpy,
                           lengths=_lengths(axis_sizes), backend=backend,
                           out=out)



def check(expr, *shapes, reduce=None, numpy=None, **axis_sizes) -> tuple:
    """The output shape of expr for inputs of these shapes (tuples, or
    arrays whose .shape is read), or EincError with a caret under the
    culprit::

        >>> einc.check('b h i d, b h j d -> b h i j', (8, 16, 64, 32),
        ...            (8, 16, 64, 32))
        (8, 16, 64, 64)
    """
    return bind(expr, shapes, reduce=reduce, numpy=numpy, **axis_sizes)[0]


class ShapeMemo:
    """jaxtyping-style shape checks across arguments: each check binds the
    names it sees first and checks the ones it has seen::

        >>> memo = einc.ShapeMemo()
        >>> x = memo.check('batch seq (heads d)', np.zeros((2, 10, 64)), heads=8)
        >>> q = memo.check('batch heads seq d', np.zeros((2, 8, 10, 8)))
        >>> memo['d']
        8
        >>> memo.check('batch heads seq d', np.zeros((2, 8, 11, 8)))
        einc.EincError: ...

    A spec is whitespace-separated dims: a name, a number, ``_`` (any one
    dim), ``*name`` or ``...`` (any run of dims), ``#name`` (the size or 1),
    ``n+1``/``2*h`` (expressions of bound names), ``(h d)`` (a product).
    A memo belongs to one thread at a time.
    """

    def __init__(self, **sizes):
        self._memo = _einc.ShapeMemo()
        for name, size in sizes.items():
            self._memo.check(name, (int(size),), name)

    def check(self, spec: str, x, what: str | None = None, **sizes):
        """Checks x (an array or a shape) against spec; returns x."""
        for name, size in sizes.items():
            self._memo.check(name, (int(size),), name)
        self._memo.check(spec, _shape_of(x), what)
        return x

    def __getitem__(self, name: str) -> int:
        size = self._memo.size(name)
        if size is None:
            raise KeyError(name)
        return size

    def get(self, name: str, default=None):
        size = self._memo.size(name)
        return default if size is None else size

    def clear(self) -> None:
        self._memo.clear()


# ---------------------------------------------------- einops' functions

def rearrange(tensor, pattern: str, **axes_lengths):
    """Reorders, splits, merges and squeezes axes::

        >>> images = np.zeros((32, 30, 40, 3))
        >>> einc.rearrange(images, 'b h w c -> b c h w').shape
        (32, 3, 30, 40)
        >>> einc.rearrange(np.zeros((2, 16)), 'b (h d) -> b h d', h=8).shape
        (2, 8, 2)

    Like einops, the result is a view of the tensor (numpy arrays and torch
    CPU tensors) when strides can express it: a transpose, a split, a merge
    of axes adjacent in memory, a squeeze. Writing into such a result
    writes into the tensor; ``.copy()`` (``.clone()``) gives one of your
    own. Other cases, and other array libraries, give a new array.

    A rearrange never reduces: an input axis missing from the output
    ('b s d -> b d') is an EincError with a caret under it; einc.reduce
    says how to reduce it.
    """
    if "->" not in pattern:
        raise EincError(f"rearrange needs '->' in its pattern: {pattern!r}")
    # numpy arrays and torch CPU tensors: a cached plan, or a view (tried
    # first in C; here for what C leaves, as numpy ints for lengths)
    return _rearrange_with(tensor, pattern, axes_lengths, RULE_NO_REDUCE)


# einc.rearrange is a builtin (python/src/builtins.c) that serves the calls
# its plan table knows with no Python frame, and hands every other call to
# the Python function above (kept as _rearrange; its name stays
# 'rearrange' for Python's own errors), whose docstring it shows.
_rearrange = rearrange
rearrange = _einc.fast_rearrange(
    _rearrange,
    "rearrange(tensor, pattern, **axes_lengths)\n--\n\n" +
    inspect.cleandoc(_rearrange.__doc__))


def reduce(tensor, pattern: str, reduction, **axes_lengths):
    """Rearranges and reduces the axes missing from the output with
    reduction ('min', 'max', 'sum', 'mean', 'prod', 'any', 'all'), or with
    a callable as einops takes one: ``reduction(x, axes)`` gets x with the
    kept axes first (in the output's order) and the reduced ones last, and
    axes, the tuple of the reduced positions; ``np.max``, ``np.median``,
    ``torch.amax`` fit::

        >>> x = np.arange(16.).reshape(1, 1, 4, 4)
        >>> einc.reduce(x, 'b c (h 2) (w 2) -> b c h w', 'max')
        array([[[[ 5.,  7.],
                 [13., 15.]]]])
        >>> einc.reduce(x, 'b c (h 2) (w 2) -> b c h w', np.median)
        array([[[[ 2.5,  4.5],
                 [10.5, 12.5]]]])

    The named reductions are compiled into one pass; a callable runs
    between two compiled rearranges. When nothing is reduced the result
    may be a view of the tensor, as rearrange's is.
    """
    if callable(reduction):
        return _reduce_callable(_single(tensor), pattern, reduction,
                                axes_lengths)
    if reduction not in _REDUCTIONS:
        raise EincError(
            f"unknown reduction {reduction!r}: einc compiles "
            f"{', '.join(_REDUCTIONS)}, or give a callable fn(x, axes)")
    lengths = _lengths(axes_lengths) if axes_lengths else None
    result = _fast((tensor, pattern), False, reduction, lengths)
    if result is None and _fast_setup():
        result = _fast((tensor, pattern), False, reduction, lengths)
    if result is not None:
        return result
    return evaluate(pattern, (_single(tensor),), reduce=reduction,
                    numpy=False, lengths=_lengths(axes_lengths))


# einc.reduce is a builtin as rearrange is: it serves the named
# reductions the plan table knows and hands the rest (callables, unknown
# names, lists of tensors, misses) to the Python reduce above.
_reduce = reduce
reduce = _einc.fast_reduce(
    _reduce,
    "reduce(tensor, pattern, reduction, **axes_lengths)\n--\n\n" +
    inspect.cleandoc(_reduce.__doc__))


def repeat(tensor, pattern: str, **axes_lengths):
    """Rearranges and adds (repeats along) new axes::

        >>> image = np.eye(2)
        >>> einc.repeat(image, 'h w -> h w c', c=3).shape
        (2, 2, 3)
        >>> einc.repeat(image, 'h w -> (h 2) (w 2)')
        array([[1., 1., 0., 0.],
               [1., 1., 0., 0.],
               [0., 0., 1., 1.],
               [0., 0., 1., 1.]])

    The result is always a new array (einops' torch backend may return an
    expanded view; a writable view repeating elements is a trap). A repeat
    never reduces: every input axis is in the output.
    """
    return evaluate(pattern, (_single(tensor),), numpy=False,
                    lengths=_lengths(axes_lengths), rules=RULE_NO_REDUCE)


def parse_shape(x, pattern: str) -> dict:
    """{name: size} for the names of pattern, which lists x's dims
    (``_`` skips one, ``...`` any run)::

        >>> einc.parse_shape(np.zeros((2, 3, 5, 7)), 'batch _ h w')
        {'batch': 2, 'h': 5, 'w': 7}
    """
    spec = re.sub(r"\(\s*\)", " 1 ", pattern)  # '()' is a dim of 1
    if "(" in spec:
        raise EincError(f"parse_shape takes no composite axes: {pattern!r}")
    memo = _einc.ShapeMemo()
    memo.check(spec, _shape_of(x), "x")
    names = [t for t in pattern.split() if t.isidentifier() and t != "_"]
    return {name: memo.size(name) for name in names}


def pack(tensors, pattern: str):
    """Packs tensors into one along the '*' of pattern; returns (packed,
    shapes), the shapes that unpack needs::

        >>> a, b = np.zeros((2, 3, 5)), np.ones((2, 3, 4, 5))
        >>> packed, shapes = einc.pack([a, b], 'i j * k')
        >>> packed.shape, shapes
        ((2, 3, 5, 5), [(), (4,)])
    """
    before, after = _star_split(pattern)
    fixed = len(before) + len(after)
    flat, shapes = [], []
    for t in tensors:
        shape = shape_kept(t)
        if len(shape) < fixed:
            raise EincError(
                f"pack: a tensor of {len(shape)} dims does not fit {pattern!r}")
        star = [f"_s{i}" for i in range(len(shape) - fixed)]
        src = " ".join(before + star + after)
        dst = " ".join(before + [f"({' '.join(star)})"] + after)
        flat.append(rearrange(t, f"{src} -> {dst}"))
        shapes.append(shape[len(before):len(shape) - len(after)])
    return _concatenate(flat, len(before)), shapes


def unpack(tensor, packed_shapes, pattern: str):
    """The inverse of pack: a list of tensors of the given '*' shapes (one
    may have a -1, solved from the rest)::

        >>> packed = np.zeros((2, 3, 5, 5))
        >>> [t.shape for t in einc.unpack(packed, [(), (-1,)], 'i j * k')]
        [(2, 3, 5), (2, 3, 4, 5)]
    """
    before, after = _star_split(pattern)
    shape = shape_kept(tensor)
    if len(shape) != len(before) + len(after) + 1:
        raise EincError(f"unpack: a tensor of {len(shape)} dims does not fit "
                        f"{pattern!r}")
    total = shape[len(before)]
    shapes = _solve_unknown(packed_shapes, total)
    out, start = [], 0
    for s in shapes:
        n = math.prod(s)
        index = (slice(None),) * len(before) + (slice(start, start + n),)
        start += n
        star = [f"_s{i}" for i in range(len(s))]
        src = " ".join(before + [f"({' '.join(star)})"] + after)
        dst = " ".join(before + star + after)
        out.append(rearrange(tensor[index], f"{src} -> {dst}",
                             **dict(zip(star, s))))
    return out


# ------------------------------------------------- derivatives and plans

def grad_program(expr: str, *shapes, wrt: int = 0, reduce=None, numpy=None,
                 dtype: str = "float32", **lengths) -> dict:
    """The backward of `expr` with respect to input `wrt`, as einc derives
    and plans it::

        >>> p = einc.grad_program('b s d, d f -> b s f', (8, 128, 512),
        ...                       (512, 2048), wrt=1)
        >>> [s['expr'] for s in p['steps']]
        ['b s f, b s d -> d f']

    Returns {"needs_output", "conjugates", "flops", "bytes", "steps"}; each
    step has "op", "expr", "reduction", "lengths", "operands" (("dout", 0),
    ("input", i), ("output", 0) or ("step", j)), "scale", "shape",
    "view_strides", "flops" and "bytes". The last step's result is the
    gradient.
    """
    shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in shapes])
    return program(expr, shapes, wrt=int(wrt), reduce=_reduction_name(reduce),
                   numpy=bool(numpy), dtype=str(dtype),
                   lengths=_lengths(lengths))


def jvp_program(expr: str, *shapes, wrt: int = 0, reduce=None, numpy=None,
                dtype: str = "float32", **lengths) -> dict:
    """Forward mode: input `wrt`'s part of the output's tangent, as einc
    derives and plans it (the output's tangent is the sum of these over
    the inputs that have one)::

        >>> p = einc.jvp_program('b s d, d f -> b s f', (8, 128, 512),
        ...                      (512, 2048), wrt=1)
        >>> [s['expr'] for s in p['steps']]
        ['b s d, d f -> b s f']

    The dict is grad_program's; the operand ("tangent", 0) is input wrt's
    tangent, and the last step's result is shaped as the output. max and
    min take the tangent at the arg-extremum (ties averaged), prod the
    tangent times the product of the others (exact with zeros).
    """
    shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in shapes])
    return program(expr, shapes, wrt=int(wrt), reduce=_reduction_name(reduce),
                   numpy=bool(numpy), dtype=str(dtype),
                   lengths=_lengths(lengths), jvp=True)


def plan(expr, *tensors_or_shapes, dtype=None, reduce=None, backend="auto",
         numpy=None, device=None, peak=None, bandwidth=None,
         plan_time=0.0, seed=0, objective="flops", memory_limit=None,
         **axis_sizes) -> Plan:
    """Plans expr for inputs given as arrays or shapes, without running it::

        >>> p = einc.plan('i j, j k, k l -> i l', (1000, 10), (10, 1000),
        ...               (1000, 10))
        >>> p.path, p.flops
        ([(1, 2), (0, 1)], 400000.0)
        >>> print(p)          # `einc plan`'s report

    dtype defaults to the first array's, else float32. plan_time, seed and
    objective steer the order search past 12 operands (Plan's doc).
    memory_limit: the bytes one intermediate may take (None: no limit;
    'free': a third of the device's free memory); the planner slices
    where no order keeps within it (p.units slices, p.memory_limit).
    """
    if dtype is None:
        dtype = next((t.dtype for t in tensors_or_shapes
                      if hasattr(t, "dtype")), "float32")
    return Plan(expr, tensors_or_shapes, dtype=dtype, reduce=reduce,
                backend=backend, numpy=numpy, device=device, peak=peak,
                bandwidth=bandwidth, plan_time=plan_time, seed=seed,
                objective=objective, memory_limit=memory_limit,
                **axis_sizes)


def compile(expr, *shapes, dtype="float32", reduce=None, backend="auto",
            numpy=None, plan_time=0.0, seed=0, objective="flops",
            memory_limit=None, **axis_sizes) -> Plan:
    """A callable that runs expr with one plan compiled now, as
    opt_einsum.contract_expression does::

        >>> f = einc.compile('b i j, b j k -> b i k', (8, 64, 32),
        ...                  (8, 32, 16))
        >>> a = np.ones((8, 64, 32), np.float32)
        >>> b = np.ones((8, 32, 16), np.float32)
        >>> f(a, b).shape
        (8, 64, 16)

    memory_limit: the bytes one intermediate may take (None: no limit;
    'free': a third of the device's free memory, resolved now); each call
    then runs slice by slice where no order keeps within it.
    """
    return Plan(expr, shapes, dtype=dtype, reduce=reduce, backend=backend,
                numpy=numpy, plan_time=plan_time, seed=seed,
                objective=objective, memory_limit=memory_limit, **axis_sizes)


def backend_available(name: str = "cuda", device: int = 0):
    """None when backend `name` can run here, else the reason it cannot."""
    return _einc.backend_check(name, device)
