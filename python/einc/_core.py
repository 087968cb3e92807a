"""The core of einc's Python package: what every route shares, and the
one evaluation every call ends in when no shortcut serves it
(``evaluate``: options sorted out here, everything else in the C library
through the extension ``einc._einc``).

Modules stack in one direction (tests/py_import_graph.py checks it):
``_einc`` (the C extension), ``_arrays`` and ``_shapes`` (leaves), this
module, the internals (``_einops``, ``_grad``, ``_plan``), the public
functions (``_api``), the framework adapters (``_torch``, ``_jax``) and
the drop-ins (``numpy``, ``opt_einsum``, ``torch``, ``einops``). This
module imports nothing above it: an adapter registers itself here when
its module is imported (``register_route``, ``eager_grad``,
``set_fast_armer``, ``traced_call``), and the package's ``__init__``
says when that happens (``after_import``: when the framework is
imported, before or after einc).
"""

from __future__ import annotations

import re
import sys

from . import _einc
from ._arrays import (FP8_OUTPUTS, _dtype_name, as_tensor, check_out,
                      cuda_stream, fp8_name, fp8_output, fp8_view, prepare)
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
_fast_ready = False  # numpy's side of _einc.fast armed
_fast_done = False  # and the torch adapter's (nothing left to arm)
_fast_armer = None  # the torch adapter's: fast_armer(numpy) -> armed


def set_fast_armer(armer) -> None:
    """The torch adapter's arming of _einc.fast for torch tensors, run
    once numpy's side is armed (torch's results are made as numpy
    arrays)."""
    global _fast_armer
    _fast_armer = armer


def _fast_setup() -> bool:
    """Arms _einc.fast (the cached path of plain numpy calls) once numpy is
    in use, and for torch CPU tensors once torch is; einc itself imports
    neither. Whether it armed anything new (the caller then tries _fast
    again, so the first call views where later ones do)."""
    global _fast_ready, _fast_done
    if _fast_done:
        return False
    if _pending:
        _arrived()  # a framework imported since: its adapter registers
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
    if _fast_ready and _fast_armer is not None and _fast_armer(np):
        _fast_done = armed = True
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
        if check_operands is not None:
            check_operands(tensors)  # (a nested tensor's shape raises)
        _einc.bind(expr, tuple(shape_hint(t) for t in tensors),
                   bool(numpy), _reduction_name(reduce), "auto",
                   tuple((k, size_hint(v)) for k, v in lengths), rules)
    written = out
    if memory_limit or out is not None:
        tensors, written = _unrecorded(
            tensors, out, "memory_limit=" if memory_limit else "out=")
    else:
        routed = route(expr, tensors, reduce=reduce, numpy=numpy,
                       lengths=lengths)
        if routed is not NotImplemented:
            return routed
    prepared = prepare(tensors)
    if numpy is None:
        numpy = numpy_dialect(expr, [len(t.shape) for t in prepared.tensors])
    out_arg = None if written is None else prepared.wrap_out(
        check_out(written))
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


def _unrecorded(tensors, out, what):
    """(tensors, out) for a call that no framework records (out= writes
    in place; a memory-limited call runs sliced in ein_eval). torch
    tensors that need a gradient are refused while grad is recorded (the
    result would have none: torch refuses out= there too) and detached
    under torch.no_grad() or inference_mode (DLPack exports no tensor
    that requires grad; the detached out shares out's memory)."""
    needs = [t for t in (*tensors, out) if getattr(t, "requires_grad", False)]
    if not needs:
        return tensors, out
    if sys.modules["torch"].is_grad_enabled():
        raise EincError(f"{what} with torch tensors that require grad: "
                        "this evaluation records no gradient; compute it "
                        f"under torch.no_grad(), or leave {what} out")
    return (tuple(t.detach() if getattr(t, "requires_grad", False) else t
                  for t in tensors),
            out.detach() if getattr(out, "requires_grad", False) else out)


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



# ------------------------------------------------------------ adapters

# The framework adapters' routes, by framework: route(expr, tensors, *,
# reduce, numpy, lengths) -> the result through the framework's own
# machinery, or NotImplemented for tensors it does not own or that the
# plain DLPack path serves (einc/_torch.py, einc/_jax.py register theirs).
_routes: dict = {}

# einc.einsum's shortcut for eager torch calls on tensors that need grad
# (einc/_torch.py sets it): (args, numpy, reduce, lengths) -> the result,
# or NotImplemented for every other call. The general path would reach the
# same autograd node through route, some 20 us later.
eager_grad = None

# The torch adapter's refusal of tensors no path takes (sparse, nested,
# quantized: einc's error naming the way out), asked before the shapes
# are read for the rules' check (route asks it too, for other calls).
check_operands = None

# A traced call of a compiled plan (einc/_plan.py, under torch.compile):
# (expr, tensors, reduction, numpy, lengths) -> one graph node; set by
# the torch adapter.
traced_call = None


def register_route(name: str, route) -> None:
    """Adds (or replaces) framework `name`'s route."""
    _routes[name] = route


def route(expr, tensors, *, reduce, numpy, lengths):
    """The result of the call through a framework's machinery, or
    NotImplemented when the plain DLPack path serves it."""
    if _pending:
        _arrived()
    for framework_route in _routes.values():
        result = framework_route(expr, tensors, reduce=reduce, numpy=numpy,
                                 lengths=lengths)
        if result is not NotImplemented:
            return result
    return NotImplemented


# Callbacks waiting for their module: name -> [callback]. after_import
# runs them when the module is imported; _arrived runs those whose
# import's hook failed (or whose module came in another way) on the next
# call that consults the adapters.
_pending: dict = {}


class _AfterImport:
    """A sys.meta_path entry that runs the callbacks of module `name` once
    it has been imported (its module executed), without importing it.

    Why a hook: torch.compile's Dynamo must find einc's stand-ins
    (torch.compiler.substitute_in_graph) before it traces a function that
    calls einc, and a deserialized jax.export program must find einc's
    XLA FFI target before it runs; neither goes through einc first, so
    when the framework is imported after einc nothing else would install
    them in time. Neither torch nor jax offers a callback for this, and
    einc must not import them itself (importing einc stays cheap)."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # (the search below must not find it)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            # A find_spec without an import (an availability check:
            # importlib.util.find_spec("torch")) leaves the hook waiting.
            sys.meta_path.insert(0, self)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            sys.meta_path.remove(self)
            return spec
        run = loader.exec_module

        def exec_module(module):
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            run(module)
            try:  # (only this module's: another in sys.modules may be
                # one still being imported, e.g. torch while it imports
                # torch._dynamo)
                _run_pending(name)
            except Exception:  # noqa: BLE001 (the import must not fail)
                pass  # the next call that consults the adapters retries

        loader.exec_module = exec_module
        return spec


def after_import(name, callback) -> None:
    """callback() now when module `name` is loaded, else right after it
    is imported (or, failing that, on the next call that consults the
    adapters)."""
    if name in sys.modules:
        callback()
        return
    if name not in _pending:
        _pending[name] = []
        sys.meta_path.insert(0, _AfterImport(name))
    _pending[name].append(callback)


def _arrived() -> None:
    """Runs the callbacks of every awaited module now loaded (from a call:
    no import is under way then)."""
    for name in [n for n in _pending if n in sys.modules]:
        _run_pending(name)


def _run_pending(name) -> None:
    """Runs module `name`'s callbacks in order; one that raises stays
    pending, with those after it, for the next call that consults the
    adapters."""
    callbacks = _pending.pop(name, [])
    while callbacks:
        try:
            callbacks[0]()
        except BaseException:
            _pending.setdefault(name, [])[:0] = callbacks
            raise
        callbacks.pop(0)
