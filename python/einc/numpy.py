"""einc.numpy: numpy.einsum and numpy.einsum_path with numpy's signature,
call forms, keywords, errors and results, computed by einc's C library.

    >>> import einc.numpy as enp
    >>> enp.einsum('ij,jk->ik', a, b)                # as numpy.einsum
    >>> enp.einsum(a, [0, 1], b, [1, 2], [0, 2])     # the sublist form

What numpy does and einc keeps: the sublist (interleaved) form (ints 0-51
name A-Z then a-z, Ellipsis names '...'); out= of any dtype the casting
rule allows, written after the computation into a temporary where out
overlaps an input; dtype= (inputs cast under casting=); order= ('K'
follows the inputs' strides); optimize= False, True, 'greedy', 'optimal'
(einc's planner in each case: its search is exact for few operands) or an
explicit ['einsum_path', (i, j), ...] (pairs go to the planner as its
path; numpy's single-operand and many-operand steps are checked as numpy
checks them, then the planner chooses the pairs); bool einsum as numpy's,
an or of ands (computed as an int64 count, then != 0); numpy's exception
types (ValueError for subscripts and shapes, TypeError for types).

What einc cannot compute is handed to numpy itself: object, longdouble and
clongdouble arrays (DLPack has no type code for Python objects nor for x87
extended precision), and numpy's other non-numeric dtypes.
"""

from __future__ import annotations

import functools as _functools

import numpy as _np

from . import _core, _einc
from ._plan import Plan

__all__ = ["einsum", "einsum_path"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ORDERS = ("K", "A", "C", "F", "k", "a", "c", "f")
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_DLPACK_KINDS = "biufc"  # bool, signed, unsigned, float, complex
_fast = _einc.fast
_STRATEGIES = frozenset(("greedy", "optimal"))
_EIN_ERR_LIMIT = -11  # ein.h's status for a limit no plan meets
_core._fast_setup()  # arms einc's cached path for numpy arrays
_numpy_einsum = _np.einsum  # numpy's own, for what DLPack cannot carry
_numpy_einsum_path = _np.einsum_path  # its path: the type of a 0-d result


def _einsum_general(*operands, out=None, optimize=False, dtype=None,
                    order="K", casting="safe"):
    """numpy.einsum's whole contract, for the calls the builtin einsum
    does not serve itself."""
    return _einsum(operands, out, optimize, dtype, order, casting)


# The builtin (python/src/dropin.c) serves numpy.einsum's plain call from
# einc's cached path (python/src/call.c): subscripts first, keywords at their
# defaults or optimize a strategy, no bool input, every input of more
# than one dim with a last stride of one element (else order='K' follows
# its layout); everything else goes to _einsum_general.
einsum = _einc.fast_numpy_einsum(
    _einsum_general,
    "einsum(*operands, out=None, optimize=False, dtype=None, order='K', "
    "casting='safe')\n--\n\n"
    "numpy.einsum(subscripts, *operands, out=None, dtype=None, order='K',\n"
    "casting='safe', optimize=False), computed by einc.")


def _zero_d(args, kwargs, result):
    """The builtin's 0-d result (python/src/dropin.c) as numpy's type."""
    return _numpy_type(args[0], args[1:], kwargs.get("optimize", False)
                       if kwargs else False, result)


_einsum_general._zero_d = _zero_d


def _numpy_type(subscripts, arrays, optimize, result):
    """A 0-d result as the type numpy.einsum gives it (issue 37): its C
    einsum returns a numpy scalar, so optimize=False, one operand, and a
    last step of numpy's path of one or three operands give a scalar; a
    last step of two runs through matmul (a 0-d ndarray) when the two
    share an index, else through multiply (a scalar). Which is last is
    numpy's own path, asked of numpy.einsum_path (0-d results only)."""
    if not isinstance(result, _np.ndarray) or result.ndim != 0:
        return result
    want = _np.result_type(*arrays) if arrays else result.dtype
    if want != result.dtype or want.char == result.dtype.char:
        want = result.dtype  # the scalar of numpy's own name: longlong
    result = result.view(want)  # (einc's int64) where the inputs are
    if optimize is False or len(arrays) < 2:
        return result[()]
    shapes = tuple(a.shape for a in arrays)
    try:
        matmul = _last_step_matmul(subscripts, shapes, optimize)
    except TypeError:  # an unhashable optimize (an explicit path list)
        matmul = _last_step_matmul.__wrapped__(subscripts, shapes, optimize)
    return result if matmul else result[()]


@_functools.lru_cache(maxsize=256)
def _last_step_matmul(subscripts, shapes, optimize) -> bool:
    """Whether numpy's path for these shapes ends in a matmul: a pair that
    shares an index not of size 1 (numpy squeezes size-1 axes first, and
    multiplies a pair that shares none). Kept per call's key: a loop of
    0-d calls asks numpy's path search once."""
    views = [_np.broadcast_to(_np.empty(()), s) for s in shapes]
    operands, steps = _numpy_einsum_path(subscripts, *views,
                                         optimize=optimize, einsum_call=True)
    shapes = [a.shape for a in operands]
    for inds, eq, *_ in steps:  # the operands' shapes at the last step
        picked = [shapes.pop(i) for i in inds]
        terms, out = eq.split("->")[0].split(","), eq.split("->")[1]
        size = {}
        for t, shape in zip(terms, picked):
            for c, d in zip(t, shape):
                size[c] = max(size.get(c, 1), d)
        shapes.append(tuple(size[c] for c in out))
    if len(inds) != 2:
        return False
    longer = [{c for c, d in zip(t, s) if d != 1}
              for t, s in zip(terms, picked)]
    return bool(longer[0] & longer[1])


def _einsum(operands, out, optimize, dtype, order, casting):
    subscripts, arrays = _parse_call(operands)
    _check_keywords(out, dtype, order, casting)
    if not all(a.dtype.kind in _DLPACK_KINDS and a.dtype.itemsize <= 16
               and a.dtype.char not in "gG" for a in arrays):
        return _numpy_itself(subscripts, arrays, out, optimize, dtype, order,
                             casting)
    inputs, output = _split(subscripts, arrays)
    path = _explicit_path(optimize, inputs, len(arrays))
    if optimize is not False:
        inputs = _ellipsis_named(inputs, output, arrays)
    if out is None and _single_view(inputs, output):
        dtype, casting = None, "unsafe"  # numpy's view ignores them
    _check_out_rank(out, inputs, output, arrays)
    compute = _compute_dtype(arrays, dtype, casting, out)
    arrays = [a if a.dtype == compute else a.astype(compute)
              for a in arrays]
    expr = ",".join(inputs) + "->" + output
    limit = _memory_limit(optimize)
    if compute.kind == "b":
        result = _bool_einsum(expr, arrays, path, limit)
    else:
        result = _evaluate(expr, arrays, path, limit=limit)
    result = _deliver(result, arrays, out, order,
                      casting if optimize is False else "unsafe", expr)
    return result if out is not None else \
        _numpy_type(subscripts, arrays, optimize, result)


# ------------------------------------------------------------ the call form

def _parse_call(operands):
    """(subscripts, arrays) from either form."""
    if not operands:
        raise ValueError("No input operands")
    if isinstance(operands[0], str):
        subscripts = operands[0].replace(" ", "")
        arrays = [_np.asanyarray(x) for x in operands[1:]]
        return subscripts, arrays
    return _from_sublists(operands)


def _sublist_term(sub) -> str:
    """[0, 1, Ellipsis] -> 'AB...'."""
    try:
        items = list(sub)
    except TypeError:
        raise TypeError("each operand must be followed by a list of "
                        "subscripts (ints or Ellipsis)") from None
    term = []
    for s in items:
        if s is Ellipsis:
            term.append("...")
            continue
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError("For this input type lists must contain either "
                            "int or Ellipsis")
        s = s.__index__()
        if not 0 <= s < 52:
            raise ValueError(f"subscript is not within the valid range "
                             f"[0, 52): {s}")
        term.append(_LETTERS[s])
    return "".join(term)


def _from_sublists(operands):
    """numpy's interleaved form: op, sublist, op, sublist, ..., [output]."""
    pairs = len(operands) // 2
    arrays = [_np.asanyarray(operands[2 * i]) for i in range(pairs)]
    terms = [_sublist_term(operands[2 * i + 1]) for i in range(pairs)]
    subscripts = ",".join(terms)
    if len(operands) % 2:
        subscripts += "->" + _sublist_term(operands[-1])
    return subscripts, arrays


def _check_keywords(out, dtype, order, casting):
    if out is not None and not isinstance(out, _np.ndarray):
        raise TypeError("'out' must be an array")
    if order not in _ORDERS:
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' "
                         f"(got {order!r})")
    if casting not in _CASTINGS:
        raise ValueError(f"casting must be one of 'no', 'equiv', 'safe', "
                         f"'same_kind', or 'unsafe' (got {casting!r})")
    if dtype is not None:
        _np.dtype(dtype)  # TypeError for a name numpy does not know


# -------------------------------------------------------------- subscripts

def _check_term(term, where):
    body = term.replace("...", "", 1)
    if "." in body:
        raise ValueError(f"invalid subscript '.' in einstein sum {where} "
                         f"string, subscripts must be letters")
    bad = [c for c in body if c not in _LETTERS]
    if bad:
        raise ValueError(f"invalid subscript '{bad[0]}' in einstein sum "
                         f"{where} string, subscripts must be letters")
    return body


def _split(subscripts, arrays):
    """(input terms, output term) checked as numpy checks them; the
    implicit output is made explicit (sorted letters seen once, ellipsis
    first), so einc reads the same expression numpy does."""
    lhs, arrow, rhs = subscripts.partition("->")
    if "-" in lhs or ">" in lhs or (arrow and ("-" in rhs or ">" in rhs)):
        raise ValueError("einstein sum subscripts string includes output "
                         "subscripts in the wrong place")
    inputs = lhs.split(",")
    if len(inputs) != len(arrays):
        raise ValueError(f"more operands provided to einstein sum function "
                         f"than specified in the subscripts string"
                         if len(arrays) > len(inputs) else
                         "fewer operands provided to einstein sum function "
                         "than specified in the subscripts string")
    for term, a in zip(inputs, arrays):
        _check_rank(_check_term(term, "subscripts"), term, a)
    if arrow:
        body = _check_term(rhs, "output")
        seen = set("".join(inputs))
        for c in body:
            if body.count(c) > 1:
                raise ValueError(f"einstein sum subscripts string includes "
                                 f"output subscript '{c}' multiple times")
            if c not in seen:
                raise ValueError(f"einstein sum subscripts string included "
                                 f"output subscript '{c}' which never "
                                 f"appeared in an input")
        return inputs, rhs
    return inputs, _implicit_output(inputs)


def _check_rank(body, term, a):
    if len(body) > a.ndim or ("..." not in term and len(body) != a.ndim):
        raise ValueError(f"operand has more dimensions than subscripts "
                         f"given in einstein sum, but no '...' ellipsis "
                         f"provided to broadcast the extra dimensions."
                         if len(body) < a.ndim else
                         f"einstein sum subscripts string contains too many "
                         f"subscripts for operand of {a.ndim} dimensions")


def _implicit_output(inputs) -> str:
    letters = "".join(t.replace("...", "") for t in inputs)
    once = sorted((c for c in set(letters) if letters.count(c) == 1),
                  key=_LETTERS.index)
    ellipsis = "..." if any("..." in t for t in inputs) else ""
    return ellipsis + "".join(once)


# -------------------------------------------------------------- optimize=

def _explicit_path(optimize, inputs, n):
    """optimize= as einc's path text, or None for the planner's search.
    numpy's path lists position tuples; einc takes pairs. A path with other
    steps (a single operand's trace, three at once) is checked as numpy
    checks it and the planner then picks the pairs: the result is the
    same, only the order differs."""
    if optimize is False or optimize is True or optimize is None:
        return None
    if not isinstance(optimize, (str, list, tuple)):
        raise TypeError(f"object of type '{type(optimize).__name__}' has "
                        f"no len()")
    if isinstance(optimize, tuple) and len(optimize) == 2 and \
            isinstance(optimize[0], str):
        optimize = optimize[0]  # (strategy, memory limit): _memory_limit
    if isinstance(optimize, str):
        if optimize not in _STRATEGIES and n > 2:
            # numpy looks the name up only where a path is searched for
            raise KeyError("Path name %s not found", optimize)
        return None
    if isinstance(optimize, (list, tuple)) and optimize and \
            optimize[0] == "einsum_path":
        steps = [tuple(int(i) for i in s) for s in optimize[1:]]
        _replay(steps, n)
        if n > 1 and all(len(s) == 2 for s in steps):
            return "[" + ", ".join(f"({i}, {j})" for i, j in steps) + "]"
        return None
    raise TypeError(f"Did not understand the path: {optimize!r}")


def _replay(steps, n):
    """numpy's RuntimeError for a path that does not contract everything
    into one operand."""
    alive = n
    for s in steps:
        if len(set(s)) != len(s) or any(not 0 <= i < alive for i in s):
            raise RuntimeError(f"Invalid einsum_path step {s} for "
                               f"{alive} operands")
        alive -= len(s) - 1
    if alive != 1:
        raise RuntimeError(f"Invalid einsum_path is specified: {alive} "
                           f"more operands has to be contracted.")


# -------------------------------------------------------------- computing

def _single_view(inputs, output) -> bool:
    """Whether numpy's einsum returns a view of its one operand (every
    input axis kept, diagonals as strides): numpy makes it before it
    reads dtype= or casting=, so the view keeps the input's dtype."""
    return len(inputs) == 1 and set(inputs[0].replace(".", "")) <= \
        set(output)


def _ellipsis_named(inputs, output, arrays):
    """numpy's optimize= path (einsum_path) names '...' with unused
    letters, so an output without '...' sums its dims where numpy's
    optimize=False refuses: the same here."""
    if "..." in output or not any("..." in t for t in inputs):
        return inputs
    spare = [c for c in _LETTERS if c not in "".join(inputs)]
    dots = [a.ndim - len(t) + 3 if "..." in t else 0
            for t, a in zip(inputs, arrays)]
    if max(dots) > len(spare):
        return inputs  # (einc's error, as numpy's optimize=False)
    fill = "".join(spare[:max(dots)])
    return [t.replace("...", fill[len(fill) - k:] if k else "")
            for t, k in zip(inputs, dots)]


def _ellipsis_summed(expr, arrays):
    """expr ('a...,b...->ab') with the '...' an output lacks named by
    _ellipsis_named, so its dims are summed (torch.einsum and opt_einsum
    sum them too)."""
    lhs, _, rhs = expr.partition("->")
    if "..." in rhs or "..." not in lhs:
        return expr
    return ",".join(_ellipsis_named(lhs.split(","), rhs, arrays)) + "->" + \
        rhs


def _check_out_rank(out, inputs, output, arrays):
    """numpy checks the output's rank (and out='s) before any dtype."""
    dots = max((a.ndim - len(t) + 3 for t, a in zip(inputs, arrays)
                if "..." in t), default=0)
    if dots and "..." not in output:
        raise ValueError("output has more dimensions than subscripts given "
                         "in einstein sum, but no '...' ellipsis provided "
                         "to broadcast the extra dimensions.")
    if out is None:
        return
    want = len(output.replace("...", "")) + (dots if "..." in output else 0)
    if out.ndim != want:
        raise ValueError(f"out parameter does not have the correct number "
                         f"of dimensions, has {out.ndim} but should have "
                         f"{want}")


def _compute_dtype(arrays, dtype, casting, out=None):
    """The dtype einc computes in, as numpy's iterator: dtype=, else the
    promotion of the inputs and out= (numpy sums int8 inputs into a
    float64 out without wrapping, and counts bools into an integer out);
    each input cast to it under casting= (casting='no' refuses mixed
    dtypes), and out, which numpy reads and writes, cast from it."""
    if not arrays:
        raise ValueError("No input operands")
    if dtype is not None:
        target = _np.dtype(dtype)
    else:
        target = _np.result_type(*arrays, *([] if out is None else [out]))
    sources = [a.dtype for a in arrays] + ([] if out is None else
                                           [out.dtype])
    for source in sources:
        if not _np.can_cast(source, target, casting):
            raise TypeError(f"Cannot cast array data from {source!r} to "
                            f"{target!r} according to the rule {casting!r}")
    if not target.isnative:
        target = target.newbyteorder("=")
    return target


def _evaluate(expr, arrays, path, out=None, limit=0):
    """The contraction; limit: numpy's memory limit in elements, which
    einc's planner keeps by its order or by slicing (numpy contracts all
    operands at once where no pair fits; where even slicing cannot, einc
    runs unlimited: numpy's limit never refuses a call)."""
    if limit:
        plan = _plan(expr, arrays, path, limit)
        if plan is not None:
            return plan(*arrays, out=out)
    try:
        if path is None and out is None:
            # the cached path: numpy's views of one operand ('ij->ji')
            result = _fast((expr, *arrays), True, None, None)
            if result is not None:
                return result
        if path is None:
            return _core.evaluate(expr, arrays, numpy=True, out=out)
        plan = Plan(expr, [a.shape for a in arrays], dtype=arrays[0].dtype,
                    numpy=True, path=path)
        return plan(*arrays, out=out)
    except _core.EincError as e:
        raise ValueError(str(e)) from None


def _bool_einsum(expr, arrays, path, limit=0):
    """numpy's bool einsum is an or of ands: einc counts the true products
    in int64 (no count of real shapes overflows it) and tests them."""
    counts = _evaluate(expr, [a.astype(_np.int64) for a in arrays], path,
                       limit=limit)
    return _np.asarray(counts) != 0


def _memory_limit(optimize) -> int:
    """numpy's optimize=(strategy, memory_limit): the elements one
    intermediate may take (0: none given)."""
    if isinstance(optimize, tuple) and len(optimize) == 2 and \
            isinstance(optimize[0], str) and optimize[1] is not None:
        return max(int(optimize[1]), 1)
    return 0


def _deliver(result, arrays, out, order, casting, expr):
    """The result in the order asked for, or written into out."""
    if out is None:
        if len(arrays) == 1 and result.base is not None and \
                _np.may_share_memory(result, arrays[0]):
            return result  # a view, made as numpy's own (views.c)
        return _ordered(_np.asarray(result), arrays, order.upper(), expr)
    if not _np.can_cast(result.dtype, out.dtype, casting):
        raise TypeError(f"Cannot cast array data from {result.dtype!r} to "
                        f"{out.dtype!r} according to the rule {casting!r}")
    if out.shape != result.shape:
        raise ValueError(f"output operand of shape {out.shape} does not "
                         f"match the result's shape {result.shape} in "
                         f"einstein sum '{expr}'")
    _np.copyto(out, result, casting="unsafe")
    return out


def _ordered(result, arrays, order, expr):
    if order == "C" or result.ndim < 2:
        return result
    if order == "F" or (order == "A" and arrays and all(
            a.flags.f_contiguous and not a.flags.c_contiguous
            for a in arrays)):
        return _np.asfortranarray(result)
    if order == "K" and any(not a.flags.c_contiguous for a in arrays) \
            and not any(_np.may_share_memory(result, a) for a in arrays):
        return _like_inputs(result, arrays, expr)
    return result


def _axis_strides(expr, arrays, ndim):
    """For each output axis, its stride in the first input that has it."""
    lhs, _, rhs = expr.partition("->")
    found = {}
    for term, a in zip(lhs.split(","), arrays):
        head, dots, tail = term.partition("...")
        nell = a.ndim - len(head) - len(tail)
        names = list(head) + [f"...{nell - k}" for k in range(nell)] + \
            list(tail)
        for name, st in zip(names, a.strides):
            found.setdefault(name, abs(st))
    head, dots, tail = rhs.partition("...")
    nell = ndim - len(head) - len(tail)
    names = list(head) + [f"...{nell - k}" for k in range(nell)] + list(tail)
    return [found.get(n, 0) for n in names]


def _like_inputs(result, arrays, expr):
    """order='K': the result's axes laid out in memory as the inputs lay
    out theirs (numpy's iterator orders the output by their strides)."""
    keys = _axis_strides(expr, arrays, result.ndim)
    perm = sorted(range(result.ndim), key=lambda d: -keys[d])
    copy = _np.empty(tuple(result.shape[p] for p in perm), result.dtype)
    view = copy.transpose(_np.argsort(perm))
    view[...] = result
    return view


def _numpy_itself(subscripts, arrays, out, optimize, dtype, order, casting):
    """Arrays DLPack cannot carry (object, long double, strings): numpy
    computes them, with numpy's own errors."""
    return _numpy_einsum(subscripts, *arrays, out=out, optimize=optimize,
                      dtype=dtype, order=order, casting=casting)


# ------------------------------------------------------------ einsum_path

def einsum_path(*operands, optimize="greedy", einsum_call=False):
    """numpy.einsum_path: (['einsum_path', (i, j), ...], report), the path
    einc's planner takes (optimize=False: numpy's one step of all
    operands; an explicit path: that path) and a report in numpy's
    layout."""
    subscripts, arrays = _parse_call(operands)
    inputs, output = _split(subscripts, arrays)
    inputs = _ellipsis_named(inputs, output, arrays)
    explicit = _explicit_path(optimize, inputs, len(arrays))
    expr = ",".join(inputs) + "->" + output
    limit = _memory_limit(optimize)
    plan = _plan(expr, arrays, explicit, limit) if limit else None
    if plan is None:  # (within no limit, or none given)
        plan = _plan(expr, arrays, explicit)  # checks shapes in every case
    if optimize is False or (limit and plan.memory_limit == 0):
        # numpy's one step of every operand (where no pair fits a limit)
        steps = [tuple(range(len(arrays)))]
    elif isinstance(optimize, (list, tuple)) and optimize and \
            optimize[0] == "einsum_path":
        steps = [tuple(s) for s in optimize[1:]]
    else:
        steps = [tuple(p) for p in plan.path]
    return ["einsum_path"] + steps, _report(inputs, output, arrays, steps,
                                            plan)


def _plan(expr, arrays, path, limit=0):
    """The plan (limit: elements one intermediate may take; None where
    even slicing cannot keep within it)."""
    try:
        dtype = _np.result_type(*arrays) if arrays else _np.float64
    except TypeError:  # (bfloat16 with int32): numpy's path needs none
        dtype = _np.dtype(_np.float64)
    if dtype.kind not in "iufc" or dtype.char in "gG":
        dtype = _np.float64  # the path depends on shapes only
    try:
        return Plan(expr, [a.shape for a in arrays], dtype=dtype,
                    numpy=True, path=path,
                    memory_limit=limit * _np.dtype(dtype).itemsize)
    except _core.EincError as e:
        if limit and e.status == _EIN_ERR_LIMIT:
            return None
        raise ValueError(str(e)) from None


def _sizes(inputs, arrays):
    """Each letter's size, and the ellipsis written out as letters unused
    elsewhere (numpy's report shows them so)."""
    used = set("".join(inputs))
    spare = [c for c in _LETTERS[::-1] if c not in used]
    longest = max((a.ndim - len(t) + 3 for t, a in zip(inputs, arrays)
                   if "..." in t), default=0)
    fill = "".join(spare[:longest][::-1])
    sizes, terms = {}, []
    for t, a in zip(inputs, arrays):
        k = a.ndim - len(t) + 3 if "..." in t else 0
        t = t.replace("...", fill[len(fill) - k:] if k else "")
        for c, n in zip(t, a.shape):
            if n != 1 or c not in sizes:
                sizes[c] = n
        terms.append(t)
    return terms, fill, sizes


def _report(inputs, output, arrays, steps, plan) -> str:
    """numpy's report: the counts, then one line per contraction."""
    from ._opt_einsum_terms import _flops, _replay

    terms, fill, sizes = _sizes(inputs, arrays)
    output = output.replace("...", fill)
    listing, scales, size_list, cost = _replay(terms, output, steps, sizes)
    every = set("".join(terms))
    naive = _flops(every, sizes, len(terms), bool(every - set(output)))
    lines = [
        f"  Complete contraction:  {','.join(terms)}->{output}",
        f"         Naive scaling:  {len(set(''.join(terms)))}",
        f"     Optimized scaling:  {max(scales, default=0)}",
        f"      Naive FLOP count:  {naive:.3e}",
        f"  Optimized FLOP count:  {cost:.3e}",
        f"   Theoretical speedup:  {naive / max(cost, 1):.3f}",
        f"  Largest intermediate:  {max(size_list, default=1):.3e} elements",
        "-" * 74,
        f"{'scaling':>6} {'current':>24} {'remaining':>40}",
        "-" * 74,
    ]
    for scale, (_, _, step, remaining, _) in zip(scales, listing):
        rest = ",".join(remaining) + "->" + output
        lines.append(f"{scale:>4}    {step:>24} {rest:>40}")
    return "\n".join(lines)
