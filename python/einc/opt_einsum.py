"""einc.opt_einsum: opt_einsum's contract, contract_path and
contract_expression, computed by einc's C library.

    >>> from einc.opt_einsum import contract, contract_expression
    >>> contract('ab,bc->ac', a, b)
    >>> expr = contract_expression('ab,bc->ac', (2, 3), b, constants=[1])
    >>> expr(a)                 # one compiled einc plan per dtype, reused

Subscripts are any characters, as opt_einsum's (it names axes past the 52
letters with get_symbol's Unicode range): each is mapped onto an
identifier (x0, x1, ...) and the expression handed to einc's einops
dialect, whose axis names are identifiers. The interleaved form takes any
hashable, comparable labels. optimize= is a path option ('greedy',
'optimal', 'auto', ...: einc's planner), False (operands contracted in one
step order chosen by the planner; the value is the same), or an explicit
linear path [(0, 1), ...], which einc's planner takes as ein_options.path.
backend= and use_blas= are accepted as opt_einsum's; einc computes on
whatever library the arrays come from. memory_limit= is opt_einsum's (a
number of elements, 'max_input' for the largest of the inputs and the
output, -1 or None for none) and goes to einc's planner in bytes of the
computed dtype (ein_options.memory_limit: an order within it, or sliced
axes). Where no plan fits it, opt_einsum contracts every operand in one
step; so does contract_path's path here, and contract computes with the
planner's unlimited plan.

Arrays DLPack cannot carry (object, long double) are handed to
numpy.einsum on the same subscripts written in letters, where 52 suffice.
"""

from __future__ import annotations

import functools

from . import _core, _einc
from ._opt_einsum_terms import (_BASE, PathInfo, _arrays, _cache,
                                _check_ranks, _letters, _parse, _path_text,
                                _shape, _translate, get_symbol)
from ._plan import Plan, _ssa_to_linear

__all__ = ["contract", "contract_path", "contract_expression", "PathInfo",
           "get_symbol"]

_CONTRACT_KEYS = ("out", "dtype", "order", "casting", "use_blas",
                  "optimize", "memory_limit", "backend")
_NUMPY_EINSUM = []


def _numpy_einsum():
    """numpy's own einsum, as it was when first needed here."""
    if not _NUMPY_EINSUM:
        import numpy

        _NUMPY_EINSUM.append(numpy.einsum)
    return _NUMPY_EINSUM[0]


def _arm():
    """Arms einc's cached path for numpy arrays (numpy imported)."""
    import numpy  # noqa: F401

    _core._fast_setup()


# ------------------------------------------------------------ contract

def _contract_general(subscripts, *operands, out=None, dtype=None,
                      order="K", casting="safe", use_blas=True,
                      optimize=True, memory_limit=None, backend="auto"):
    """opt_einsum.contract's whole contract, for the calls the builtin
    contract does not serve itself."""
    subscripts, arrays = _parse((subscripts,) + operands)
    _check_keywords(out, dtype, order, casting)
    arrays = _arrays(arrays)
    expr, inputs, output = _translate(subscripts, len(arrays))[:3]
    _check_ranks(inputs, [_shape(a) for a in arrays])
    if _foreign(arrays):
        return _numpy_itself(inputs, output, arrays, out, dtype, order,
                             casting)
    path = _path_text(optimize, len(arrays))
    limit = _memory_elements(memory_limit, inputs, output,
                             [_shape(a) for a in arrays])
    if _numpy_dialect(expr) and "..." in expr and optimize is not False:
        from .numpy import _ellipsis_summed  # opt_einsum's path sums them

        expr = _ellipsis_summed(expr, arrays)
    lhs, _, rhs = expr.partition("->")  # (after the '...' is named)
    kept = (set(lhs.replace("...", "").split()) <= set(rhs.split())
            if " " in expr else set(lhs) - {"."} <= set(rhs))
    if len(inputs) == 1 and kept:
        dtype = None  # numpy's view of one operand ignores dtype=
    elif dtype is not None:
        arrays = _as_dtype(arrays, dtype, casting)
    result = _run(expr, arrays, path, limit)
    result = _finish(result, out, dtype, order, casting)
    if out is None and _zero_d_array(result):
        result = _contract_type(subscripts, [_shape(a) for a in arrays],
                                optimize, memory_limit, use_blas, result)
    return result


def _as_dtype(arrays, dtype, casting):
    """numpy arrays cast to dtype= before the contraction, as numpy.einsum
    (which opt_einsum calls with it) computes in it: bools summed into a
    float dtype are counted, not ored."""
    import numpy

    if not all(isinstance(a, numpy.ndarray) for a in arrays):
        return arrays
    return [a.astype(dtype, casting=casting) for a in arrays]


def _zero_d_array(result):
    return type(result).__module__ == "numpy" and \
        getattr(result, "ndim", 1) == 0 and hasattr(result, "base")


def _contract_type(subscripts, shape_list, optimize, memory_limit,
                   use_blas, result):
    """A 0-d result as opt_einsum.contract's type (issue 37): its last
    step runs through tensordot, which leaves a 0-d ndarray, only where it
    is a BLAS DOT (two operands of the same indices in the same order,
    none repeated, of the same sizes) and use_blas; otherwise through
    numpy.einsum, which returns a numpy scalar."""
    if not use_blas or optimize is False or len(shape_list) < 2:
        return result[()]
    key = (subscripts, tuple(tuple(s) for s in shape_list), optimize,
           memory_limit)
    try:
        dot = _last_step_dot(*key)
    except TypeError:  # an unhashable optimize (an explicit path list)
        dot = _last_step_dot.__wrapped__(*key)
    return result if dot else result[()]


@functools.lru_cache(maxsize=256)
def _last_step_dot(subscripts, shapes, optimize, memory_limit) -> bool:
    """Whether the last step is a BLAS DOT: by opt_einsum's own path where
    it is installed, else by its rule on einc's path. Kept per call's key:
    a loop of 0-d calls asks for the path once."""
    last = _peer_last_step(subscripts, shapes, optimize, memory_limit)
    if last is not None:
        return last
    _, info = contract_path(subscripts, *shapes, shapes=True,
                            optimize=optimize, memory_limit=memory_limit)
    inds, _, eq = info.contraction_list[-1][:3]
    left, right = eq.split("->")[0].split(",") if len(inds) == 2 \
        else ("", "x")
    return left == right and left != "" and len(set(left)) == len(left)


def _peer_last_step(subscripts, shape_list, optimize, memory_limit):
    """Whether opt_einsum's own path for these shapes ends in a tensordot
    (its BLAS flag without EINSUM), or None where opt_einsum is not
    installed. The last step depends on its optimizer's path ('greedy'
    and 'optimal' end differently), which only opt_einsum can say."""
    import importlib

    try:
        module = importlib.import_module("opt_einsum.contract")
        _, info = module.contract_path(subscripts, *shape_list, shapes=True,
                                       optimize=optimize,
                                       memory_limit=memory_limit)
    except Exception:  # noqa: BLE001 (not installed, or it refuses)
        return None
    blas = info.contraction_list[-1][4]
    return bool(blas) and "EINSUM" not in blas


_contract_general._zero_d = lambda args, kwargs, result: _contract_type(
    args[0], [_shape(a) for a in args[1:]], kwargs.get("optimize", True),
    kwargs.get("memory_limit"), kwargs.get("use_blas", True), result)


def _memory_elements(memory_limit, inputs, output, shape_list):
    """opt_einsum's memory_limit as a number of elements, or 0 for none
    (opt_einsum's errors for other values)."""
    if isinstance(memory_limit, str):
        if memory_limit != "max_input":
            raise ValueError("memory_limit must be None, int, or the string "
                             "Literal['max_input'].")
        _, out, size_dict = _letters(inputs, output, shape_list)
        largest = 1
        for s in out:
            largest *= size_dict[s]
        for shape in shape_list:
            size = 1
            for d in shape:
                size *= d
            largest = max(largest, size)
        return largest
    if memory_limit is None or memory_limit == -1:
        return 0
    if memory_limit < 1:
        raise ValueError("Memory limit must be larger than 0, or -1")
    return int(memory_limit)


def _itemsize(arrays):
    import numpy

    if all(isinstance(a, numpy.ndarray) for a in arrays):
        return numpy.result_type(*arrays).itemsize
    return _dtype_size(arrays[0].dtype)


def _dtype_size(dtype):
    """Bytes per element of a numpy or torch dtype."""
    size = getattr(dtype, "itemsize", None)
    if size is None:
        import numpy

        size = numpy.dtype(dtype).itemsize
    return size


def _limited_plan(expr, shape_list, dtype, path, limit_bytes):
    """einc's Plan within limit_bytes, or, where no plan fits it (the
    planner's EIN_ERR_LIMIT), the unlimited one (opt_einsum contracts
    anyway)."""
    numpy_dialect = _numpy_dialect(expr)
    try:
        return Plan(expr, shape_list, dtype=dtype, numpy=numpy_dialect,
                    path=path, memory_limit=limit_bytes)
    except _core.EincError as e:
        if not limit_bytes or e.status != _EIN_ERR_LIMIT:
            raise
    return Plan(expr, shape_list, dtype=dtype, numpy=numpy_dialect,
                path=path)


_EIN_ERR_LIMIT = -11  # ein.h's status for a limit no plan meets


# The builtin (python/src/dropin.c) serves contract's plain call from
# einc's cached path (python/src/call.c): subscripts _translate has seen (_cache),
# keywords that leave the result as it is, no bool operands (an or of
# ands); everything else goes to _contract_general.
contract = _einc.fast_contract(
    _contract_general,
    "contract(subscripts, *operands, out=None, dtype=None, order='K', "
    "casting='safe', use_blas=True, optimize=True, memory_limit=None, "
    "backend='auto')\n--\n\nopt_einsum.contract, computed by einc.",
    _cache)


def _check_keywords(out, dtype, order, casting):
    if out is not None and not hasattr(out, "__dlpack__"):
        raise TypeError("'out' must be an array")
    if order not in ("K", "A", "C", "F", "k", "a", "c", "f"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' "
                         f"(got {order!r})")
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(f"casting must be one of 'no', 'equiv', 'safe', "
                         f"'same_kind', or 'unsafe' (got {casting!r})")
    if dtype is not None:
        import numpy

        numpy.dtype(dtype)  # TypeError for a name numpy does not know


def _foreign(arrays):
    """Arrays DLPack cannot carry: numpy object and long double arrays."""
    for a in arrays:
        dt = getattr(a, "dtype", None)
        if getattr(dt, "char", "") in ("O", "g", "G") or \
                getattr(dt, "kind", "") in ("O", "S", "U", "V"):
            return True
    return False


def _numpy_dialect(expr):
    return " " not in expr


def _run(expr, arrays, path, limit=0):
    """The contraction on einc (limit: opt_einsum's memory limit in
    elements, 0 for none)."""
    import numpy

    bools = arrays and all(getattr(a, "dtype", None) == numpy.bool_
                           for a in arrays)
    if bools and len(arrays) > 1:
        return _bool_run(expr, arrays, path, limit)
    numpy_dialect = _numpy_dialect(expr)
    if not numpy_dialect:
        arrays = _broadcast_ones(expr, arrays)
    try:
        if path is None and not limit:
            return _core.evaluate(expr, arrays, numpy=numpy_dialect)
        dtype = numpy.result_type(*arrays) if all(
            hasattr(a, "dtype") and isinstance(a, numpy.ndarray)
            for a in arrays) else arrays[0].dtype
        plan = _limited_plan(expr, [_shape(a) for a in arrays], dtype, path,
                             limit * _itemsize(arrays))
        return plan(*arrays)
    except _core.EincError as e:
        if bools:  # one bool operand summed: numpy's or
            return _bool_run(expr, arrays, path, limit)
        raise ValueError(str(e)) from None


def _bool_run(expr, arrays, path, limit):
    """numpy's bool contraction (an or of ands): einc counts in int64."""
    import numpy

    counts = _run(expr, [numpy.asarray(a, numpy.int64) for a in arrays],
                  path, limit)
    return numpy.not_equal(counts, 0, out=numpy.empty(numpy.shape(counts),
                                                      bool))


def _broadcast_ones(expr, arrays):
    """Past 52 symbols einc reads identifiers (its einops dialect), whose
    axes do not broadcast: a size-1 axis that another operand has longer
    is broadcast here (a numpy view, stride 0), as opt_einsum broadcasts."""
    terms = [t.split() for t in expr.split("->")[0].split(",")]
    if any("..." in t for t in terms):
        return arrays
    size = {}
    for t, a in zip(terms, arrays):
        for s, d in zip(t, _shape(a)):
            size[s] = max(size.get(s, 1), d)
    out = []
    for t, a in zip(terms, arrays):
        want = tuple(size[s] for s in t)
        if want != _shape(a) and hasattr(a, "__array__"):
            import numpy

            a = numpy.broadcast_to(a, want)
        out.append(a)
    return out


def _finish(result, out, dtype, order, casting):
    """dtype=, order= and out= as numpy.einsum applies them."""
    import numpy

    if not isinstance(result, numpy.ndarray):
        if out is not None:
            out[...] = result
            return out
        return result
    if dtype is not None:
        result = result.astype(dtype, casting=casting)
    if order.upper() == "F" and result.ndim >= 2:  # (0-d stays 0-d)
        result = numpy.asfortranarray(result)
    if out is None:
        return result
    numpy.copyto(out, result, casting=casting)
    return out


def _numpy_itself(inputs, output, arrays, out, dtype, order, casting):
    """numpy.einsum for object and long double arrays, the symbols written
    as letters (numpy takes 52)."""
    import numpy

    letters = {}
    for s in [s for t in inputs for s in t] + output:
        if s != "..." and s not in letters:
            if len(letters) == 52:
                raise ValueError("numpy.einsum computes object and long "
                                 "double arrays here: 52 symbols at most")
            letters[s] = _BASE[len(letters)]

    def term(t):
        return "".join("..." if s == "..." else letters[s] for s in t)

    eq = ",".join(term(t) for t in inputs) + "->" + term(output)
    return _numpy_einsum()(eq, *arrays, out=out, dtype=dtype, order=order,
                        casting=casting, optimize=True)


# ------------------------------------------------------------ contract_path


def contract_path(subscripts, *operands, use_blas=True, optimize=True,
                  memory_limit=None, shapes=False, **kwargs):
    """opt_einsum.contract_path: (linear path, PathInfo), the path einc's
    planner takes (or the explicit one given)."""
    if kwargs:
        raise TypeError(f"contract_path() got an unexpected keyword "
                        f"argument {next(iter(kwargs))!r}")
    subscripts, arrays = _parse((subscripts,) + operands)
    shape_list = [tuple(int(d) for d in a) for a in arrays] if shapes \
        else [_shape(a) for a in _arrays(arrays)]
    expr, inputs, output = _translate(subscripts, len(shape_list))[:3]
    _check_ranks(inputs, shape_list)
    terms, out, size_dict = _letters(inputs, output, shape_list)
    limit = _memory_elements(memory_limit, inputs, output, shape_list)
    path = _planned_path(expr, shape_list, optimize, limit)
    info = PathInfo(["".join(t) for t in terms], "".join(out), path,
                    size_dict)
    return path, info


def _planned_path(expr, shape_list, optimize, limit=0):
    """The linear path einc's planner takes (float64, within `limit`
    elements; opt_einsum's one step of every operand where no plan fits
    it)."""
    n = len(shape_list)
    explicit = _path_text(optimize, n)
    if explicit is None and isinstance(optimize, (list, tuple)):
        return [tuple(s) for s in optimize]
    try:
        plan = Plan(expr, shape_list, dtype="float64",
                    numpy=_numpy_dialect(expr), path=explicit,
                    memory_limit=limit * 8)
    except _core.EincError as e:
        if limit and e.status == _EIN_ERR_LIMIT and n > 1:
            return [tuple(range(n))]
        raise ValueError(str(e)) from None
    return _ssa_to_linear(plan.ssa_path, n) if n > 1 else [(0,)]


# ------------------------------------------------------- contract_expression

class ContractExpression:
    """A contraction compiled once: calls run einc's plan for the shapes
    given (one per dtype), constants bound at creation."""

    def __init__(self, subscripts, expr, shapes, constants, limit=0,
                 path_options=None):
        self.contraction = subscripts
        # optimize=, memory_limit=, use_blas= as given: the type of a 0-d
        # result follows opt_einsum's last step (_contract_type)
        path_options = path_options or {}
        self._optimize = path_options.get("optimize", True)
        self._memory_limit = path_options.get("memory_limit")
        self._use_blas = path_options.get("use_blas", True)
        self._limit = limit  # opt_einsum's memory limit, elements
        self._expr = expr
        self._shapes = shapes
        self._constants = constants  # {position: array}
        self.num_args = len(shapes) - len(constants)
        self._plans = {}  # dtype -> Plan
        self._hot = None  # the last plan's run_numpy, for a hot loop

    def _plan(self, arrays):
        key = getattr(arrays[0], "dtype", None) if arrays else None
        plan = self._plans.get(key)
        if plan is None:
            import numpy

            dtype = numpy.result_type(*arrays) if all(
                isinstance(a, numpy.ndarray) for a in arrays) else key
            plan = _limited_plan(self._expr, self._shapes, dtype, None,
                                 self._limit * _dtype_size(dtype))
            self._plans[key] = plan
            if key == dtype and not self._constants:
                self._hot = plan._plan.run_numpy
        return plan

    def __call__(self, *arrays, out=None, backend="auto",
                 evaluate_constants=False):
        hot = self._hot
        if hot is not None and out is None:
            # the last compiled plan's run_numpy: None unless the arrays
            # are plain numpy arrays of its count, dtype and layout
            result = hot(arrays)
            if result is not None:
                return self._typed(result)
        return self._typed(self._call(arrays, out)) if out is None else \
            self._call(arrays, out)

    def _typed(self, result):
        """A 0-d result as opt_einsum's expression gives it."""
        if not _zero_d_array(result):
            return result
        return _contract_type(self.contraction, list(self._shapes),
                              self._optimize, self._memory_limit,
                              self._use_blas, result)

    def _call(self, arrays, out):
        if len(arrays) != self.num_args:
            raise ValueError(f"This `ContractExpression` takes exactly "
                             f"{self.num_args} array arguments but received "
                             f"{len(arrays)}.")
        full = list(arrays)
        for pos in sorted(self._constants):
            full.insert(pos, self._constants[pos])
        full = _arrays(full)
        try:
            shapes = [_shape(a) for a in full]
            if [len(s) for s in shapes] != [len(s) for s in self._shapes]:
                raise ValueError("the arrays' ranks differ from the "
                                 "expression's")
            if _foreign(full):
                return contract(self.contraction, *full, out=out)
            # other sizes of the same ranks run, as opt_einsum's compiled
            # path runs them (its few checks); the plan is for the shapes
            same = (shapes == list(self._shapes) and
                    len({getattr(a, "dtype", None) for a in full}) == 1)
            if same:
                result = self._plan(full)(*full)
            else:
                result = _run(self._expr, full, None, self._limit)
            return _finish(result, out, None, "K", "unsafe")
        except (ValueError, _core.EincError) as err:
            raise ValueError(
                "Internal error while evaluating `ContractExpression`. Note "
                "that few checks are performed - the number and rank of the "
                "array arguments must match the original expression. The "
                f"internal error was: '{err}'") from err

    def __repr__(self) -> str:
        consts = (f", constants={sorted(self._constants)}"
                  if self._constants else "")
        return f"<ContractExpression('{self.contraction}'{consts})>"

    def __str__(self) -> str:
        return repr(self)


def contract_expression(subscripts, *shapes, constants=None, **kwargs):
    """opt_einsum.contract_expression: shapes (or arrays, at the positions
    `constants` names) now, arrays later; einc's plan compiled once."""
    if kwargs.get("optimize", True) is False:
        raise ValueError("Can only generate an expression if the "
                         "contraction path is optimized (optimize=True).")
    if kwargs.get("out") is not None:
        raise ValueError("'out' should only be specified when calling a "
                         "`ContractExpression`, not when building it.")
    unknown = set(kwargs) - set(_CONTRACT_KEYS)
    if unknown:
        raise TypeError(f"contract_expression() got an unexpected keyword "
                        f"argument {sorted(unknown)[0]!r}")
    subscripts, items = _parse((subscripts,) + shapes)
    constants = set(constants or ())
    shape_list = [_shape(x) if i in constants else
                  tuple(int(d) for d in x) for i, x in enumerate(items)]
    expr, inputs, output = _translate(subscripts, len(shape_list))[:3]
    _check_ranks(inputs, shape_list)
    try:
        Plan(expr, shape_list, dtype="float64",
             numpy=_numpy_dialect(expr))  # sizes agree
    except _core.EincError as e:
        raise ValueError(str(e)) from None
    held = {i: _arrays([items[i]])[0] for i in constants}
    limit = _memory_elements(kwargs.get("memory_limit"), inputs, output,
                             shape_list)
    return ContractExpression(subscripts, expr, shape_list, held, limit,
                              kwargs)


_arm()
