"""einc.einsum, einc.check, einc.ShapeMemo and the one path every
evaluation takes (``evaluate``): options sorted out here, everything else in
the C library through the extension ``einc._einc``.
"""

from __future__ import annotations

import re
import sys

from . import _einc, _frameworks
from ._arrays import (FP8_OUTPUTS, _dtype_name, as_tensor, check_out,
                      cuda_stream, fp8_name, fp8_output, fp8_view, prepare)
from ._frameworks import route
# A size as an int without specializing a traced symbolic size (torch's
# SymInt: its hint; jax.export's dimension: a stand-in; einc/_shapes.py)
from ._shapes import hint as size_hint

EincError = _einc.EincError

_DEFAULT_REDUCTION = "sum"


def _is_symbolic(size) -> bool:
    """A traced symbolic size: torch's SymInt, jax.export's dimension."""
    return type(size).__name__ in ("SymInt", "_DimExpr")


def _lengths(axis_sizes) -> tuple:
    """{'h': 8} -> (('h', 8),), sizes checked to be ints. A traced
    symbolic size (torch's SymInt, b=x.shape[0] under torch.export) stays
    symbolic: int() would specialize the trace to the example's size."""
    out = []
    for name, size in axis_sizes.items():
        if isinstance(size, bool) or not (hasattr(size, "__index__")
                                          or _is_symbolic(size)):
            raise TypeError(f"axis length {name}={size!r} must be an int")
        out.append((name, size if _is_symbolic(size) else int(size)))
    return tuple(out)


MEMORY_FREE = -1  # ein.h's EIN_MEMORY_FREE


def memory_limit_bytes(memory_limit) -> int:
    """memory_limit= as ein_options takes it: None or 0 (no limit), a byte
    count, or 'free' (a third of the free memory of the device the call
    runs on: EIN_MEMORY_FREE)."""
    if memory_limit is None:
        return 0
    if isinstance(memory_limit, str):
        if memory_limit == "free":
            return MEMORY_FREE
        raise EincError(f"memory_limit={memory_limit!r}: give a byte count, "
                        f"0 or None (no limit), or 'free'")
    if isinstance(memory_limit, bool) or not hasattr(memory_limit,
                                                     "__index__"):
        raise TypeError(f"memory_limit={memory_limit!r} must be an int, "
                        f"None or 'free'")
    if int(memory_limit) < 0:
        raise EincError(f"memory_limit={memory_limit}: give a byte count, 0 "
                        f"or None (no limit), or 'free'")
    return int(memory_limit)


def _reduction_name(reduce) -> str:
    if reduce is None:
        return _DEFAULT_REDUCTION
    if callable(reduce):
        raise EincError(
            "einc.einsum compiles its reductions (sum, mean, max, min, "
            "prod, any, all); einc.reduce takes a callable fn(x, axes)")
    return str(reduce)


_NUMPY_TERM = re.compile(r"^[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


def numpy_dialect(expr: str, ranks) -> bool:
    """Whether an expression with no numpy= is numpy's: no whitespace or
    parentheses, every term letters (and at most one '...'), and either no
    '->' (only numpy infers the output) or the letters of each input term
    as many as its tensor's dims while some term has two letters or more
    (so the einops reading, one name per term, would not fit)."""
    if any(c.isspace() or c in "()" for c in expr):
        return False
    lhs, _, rhs = expr.partition("->")
    terms = lhs.split(",")
    if not all(_NUMPY_TERM.match(t) for t in terms + [rhs]):
        return False
    letters = [len(t.replace("...", "")) for t in terms]
    if "->" not in expr:
        return True  # only numpy infers the output
    if all(n <= 1 for n in letters + [len(rhs.replace("...", ""))]):
        return False  # one letter per term reads the same either way
    if ranks is None:
        return True
    return len(ranks) == len(terms) and all(
        n == r or ("..." in t and n <= r)
        for t, n, r in zip(terms, letters, ranks))


def split_expr(args):
    """(expr, tensors) from einc's order (expr first) or einops' (last)."""
    if args and isinstance(args[0], str):
        return args[0], args[1:]
    if args and isinstance(args[-1], str):
        return args[-1], args[:-1]
    raise TypeError("einsum needs an expression (a str), first or last")


_fast = _einc.fast
_fast_ready = False
_fast_torch = False


def _torch_numpy_dtype(t):
    """The numpy dtype of a torch tensor's elements."""
    return _TORCH_TO_NUMPY[t.dtype]


_TORCH_TO_NUMPY = {}


def _fast_setup() -> bool:
    """Arms _einc.fast (the cached path of plain numpy calls) once numpy is
    in use, and for torch CPU tensors once torch is; einc itself imports
    neither. Whether it armed anything new (the caller then tries _fast
    again, so the first call views where later ones do)."""
    global _fast_ready, _fast_torch
    if _fast_torch:
        return False
    armed = False
    np = sys.modules.get("numpy")
    if np is not None and not _fast_ready:
        from ._arrays import _numpy_exports_read_only

        # views need versioned DLPack (NumPy 2.1): legacy imports are
        # read-only
        _einc.fast_setup(np.ndarray, np.empty, numpy_dialect,
                         np.from_dlpack if _numpy_exports_read_only()
                         else None)
        _fast_ready = armed = True
    torch = sys.modules.get("torch")
    if _fast_ready and torch is not None and hasattr(torch, "from_numpy"):
        for name in ("float16", "float32", "float64", "int8", "int16",
                     "int32", "int64", "uint8", "bool", "complex64",
                     "complex128"):
            _TORCH_TO_NUMPY[getattr(torch, name)] = np.dtype(name)
        # bfloat16 results are made as uint16 arrays (fastpath.c)
        _TORCH_TO_NUMPY[torch.bfloat16] = np.dtype("uint16")
        # torch 2.10 on: DLPack's C exchange table, no Python calls. The
        # guards send calls under jit tracing or a dispatch mode (make_fx)
        # and contractions under autocast to einc/_torch.py.
        _einc.fast_setup_torch(torch.Tensor, torch._C._to_dlpack,
                               torch.from_numpy, _torch_numpy_dtype,
                               torch.Tensor.as_strided,
                               getattr(torch.Tensor,
                                       "__dlpack_c_exchange_api__", None),
                               (torch._C._get_tracing_state,
                                torch._C._len_torch_dispatch_stack),
                               torch._C._is_any_autocast_enabled,
                               torch.nn.Parameter, torch.is_grad_enabled,
                               torch.autograd.forward_ad)
        from . import _torch  # noqa: F401 (torch.compile's stand-ins)

        _fast_torch = armed = True
    return armed


RULE_NO_REDUCE = 1  # ein.h's EIN_RULE_NO_REDUCE: rearrange, repeat
RULE_NO_REPEAT = 2  # EIN_RULE_NO_REPEAT: einops' rearrange and reduce


def _scales_tuple(scales, n):
    if scales is None:
        return None
    if isinstance(scales, (str, bytes)) or not hasattr(scales, "__len__"):
        raise TypeError("scales= takes one scale per tensor (a sequence)")
    if len(scales) != n:
        raise EincError(f"{len(scales)} scales for {n} tensors: give one "
                        f"scale per tensor")
    return tuple(float(s) for s in scales)


def evaluate_fp8(expr, tensors, *, scales=None, out_dtype=None, reduce=None,
                 backend="auto", out=None, numpy=None, lengths=(), rules=0):
    """fp8 inputs (docs/design.md, "fp8 dtypes"): each tensor's real value
    is its stored value x its scale; the result is float32 (default),
    bfloat16 or float16 (out_dtype=, or out='s), accumulated in float32."""
    tensors = tuple(as_tensor(t) for t in tensors)
    if out_dtype is None:  # out='s dtype, else float32
        out_dtype = "float32" if out is None else out.dtype
    name = _dtype_name(out_dtype)
    if name not in FP8_OUTPUTS:
        raise EincError(f"out_dtype={name}: an fp8 evaluation gives float32, "
                        f"bfloat16 or float16 (einc never writes fp8)")
    name = FP8_OUTPUTS[name]
    views, types = zip(*(fp8_view(t) for t in tensors)) if tensors else ((),
                                                                         ())
    first = tensors[0] if tensors else None
    alloc, out_arg, (code, bits), unwrap = fp8_output(
        first, name, None if out is None else check_out(out))
    if numpy is None:
        numpy = numpy_dialect(expr, [len(t.shape) for t in views])
    result = _einc.evaluate_scaled(
        expr, tuple(views), tuple(types), out_arg, alloc, bool(numpy),
        _reduction_name(reduce), str(backend), lengths,
        _scales_tuple(scales, len(tensors)), code, bits,
        cuda_stream(first) if first is not None else None, False, rules)
    return out if out is not None else unwrap(result)


def evaluate(expr, tensors, *, reduce=None, backend="auto", out=None,
             numpy=None, lengths=(), rules=0, scales=None, out_dtype=None,
             memory_limit=0):
    """Runs expr on tensors through ein_eval and returns the result, an
    array of the inputs' library (or out). rules: ein_options.axis_rules,
    what the caller's contract forbids (RULE_NO_REDUCE, RULE_NO_REPEAT).
    fp8 tensors, scales= or out_dtype= go to evaluate_fp8. memory_limit:
    ein_options.memory_limit (memory_limit_bytes' value); a limited call
    runs through ein_eval itself (a framework's own lowering has none)."""
    if (scales is not None or out_dtype is not None
            or any(fp8_name(t) for t in tensors)):
        return evaluate_fp8(expr, tensors, scales=scales,
                            out_dtype=out_dtype, reduce=reduce,
                            backend=backend, out=out, numpy=numpy,
                            lengths=lengths, rules=rules)
    _fast_setup()  # numpy or torch imported since the last call
    if rules and ("torch" in sys.modules or "jax" in sys.modules):
        # a framework's own path (route) binds without einc's options:
        # the rules are checked here first, on the shapes alone
        # (on the sizes' hints: a traced symbolic size must not be
        # specialized by a check that only reads the structure)
        _einc.bind(expr, tuple(shape_hint(t) for t in tensors),
                   bool(numpy), _reduction_name(reduce), "auto",
                   tuple((k, size_hint(v)) for k, v in lengths), rules)
    if memory_limit:
        _no_grad_under_limit(tensors)
    elif out is None:
        routed = route(expr, tensors, reduce=reduce, numpy=numpy,
                       lengths=lengths)
        if routed is not NotImplemented:
            return routed
    prepared = prepare(tensors)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(t.shape) for t in prepared.tensors])
    out_arg = None if out is None else prepared.wrap_out(
        check_out(out))
    code, bits = prepared.retype
    result = _einc.evaluate(expr, prepared.tensors, out_arg, prepared.alloc,
                            bool(numpy), _reduction_name(reduce),
                            str(backend), lengths, code, bits,
                            prepared.stream, prepared.sync, rules,
                            memory_limit)
    return out if out is not None else prepared.unwrap(result)


def bool_einsum(expr, tensors, *, numpy=None, lengths=(), backend="auto",
                out=None):
    """numpy's bool einsum: products are ands, sums ors. einc counts the
    true products in int64 (no real count overflows it), then tests them
    (issue 37)."""
    counts = evaluate(expr, [_as_int64(t) for t in tensors], numpy=numpy,
                      lengths=lengths, backend=backend)
    result = counts != 0
    if out is None:
        return result
    out[...] = result
    return out


def _as_int64(t):
    if type(t).__module__.startswith("torch"):
        return t.to(sys.modules["torch"].int64)
    if hasattr(t, "astype"):  # numpy, JAX
        return t.astype("int64")
    import numpy as np

    return np.asarray(t).astype(np.int64)


def _all_bool(tensors) -> bool:
    return bool(tensors) and all(
        str(getattr(t, "dtype", "")).replace("torch.", "") in ("bool", "bool_")
        for t in tensors)


def _no_grad_under_limit(tensors):
    """A memory-limited call runs sliced in ein_eval, which no framework
    records: tensors that need a gradient are refused, not left without
    one."""
    if any(getattr(t, "requires_grad", False) for t in tensors):
        raise EincError("memory_limit= with torch tensors that require grad: "
                        "a sliced evaluation records no gradient; compute "
                        "it under torch.no_grad(), or leave the limit out")


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
            # (python/src/fastpath.c); None sends the call the general way.
            lengths = _lengths(axis_sizes) if axis_sizes else None
            result = _fast(args, numpy, reduce, lengths)
            if result is None and _fast_setup():  # numpy or torch just came
                result = _fast(args, numpy, reduce, lengths)
            if result is None and _frameworks.eager_grad is not None:
                # torch tensors that need grad, eagerly: straight to autograd
                result = _frameworks.eager_grad(args, numpy, reduce, lengths)
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


def shape_hint(x) -> tuple:
    """_shape_of with symbolic sizes read as their hints (size_hint)."""
    shape = x if isinstance(x, (tuple, list)) else x.shape
    return tuple(size_hint(d) for d in shape)


def shape_kept(x) -> tuple:
    """_shape_of with traced symbolic sizes kept symbolic (pack and
    unpack return and take the '*' shapes: int() would specialize them)."""
    shape = x if isinstance(x, (tuple, list)) else x.shape
    return tuple(d if _is_symbolic(d) else int(d) for d in shape)


def _shape_of(x) -> tuple:
    if isinstance(x, (tuple, list)):
        return tuple(int(d) for d in x)
    return tuple(int(d) for d in x.shape)


def bind(expr, shapes, *, reduce=None, numpy=None, **axis_sizes):
    """(output shape, [(axis, size, role), ...]) of expr on these shapes."""
    shapes = tuple(_shape_of(s) for s in shapes)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in shapes])
    return _einc.bind(expr, shapes, bool(numpy), _reduction_name(reduce),
                      "auto", _lengths(axis_sizes))


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
