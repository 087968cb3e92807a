"""What every part of einc's torch adapter shares: how a call on torch
tensors is served (_mode), axis sizes that stay symbolic under
torch.compile, the layout of a view, autocast's casting, and the forward
computation of einc's operator (_compute). einc/_torch.py says how the
parts fit together."""

from __future__ import annotations

import functools

import torch
from torch.autograd import forward_ad as _forward_ad

from . import _einc, _shapes
from ._arrays import dtype_code, prepare
from ._core import _fast, bind, numpy_dialect

EincError = _einc.EincError

# reductions whose gradient reads the forward output (ein_grad_needs_output)
_NEEDS_OUTPUT = ("max", "min", "prod")
# exact types computed on through DLPack once detached
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_AUTOCAST_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_PLAIN, _DETACH, _GRAPH, _TRACED, _JIT, _FUNC = range(6)


def _check_dense(tensors) -> None:
    """Sparse, nested and quantized tensors, refused with what they are
    and the way out, before any path reads their shape (a nested tensor's
    shape is torch's internal error, a quantized one DLPack's BufferError)
    or lowers them onto torch's operations (which took some sparse calls
    that need grad and not others: one rule for all of them)."""
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor) or (
                t.layout is torch.strided and not t.is_nested
                and not t.is_quantized):
            continue
        what = ("nested" if t.is_nested else "quantized" if t.is_quantized
                else "sparse")
        way = {"nested": "pad it (torch.nested.to_padded_tensor) or call "
                         "einc on each of its tensors (unbind())",
               "quantized": "call .dequantize() first",
               "sparse": "call .to_dense() first"}[what]
        layout = _dtype_name(t.layout)
        raise EincError(f"operand {i + 1} is a torch {what} tensor (layout "
                        f"{layout}, dtype {_dtype_name(t.dtype)}): einc "
                        f"takes dense tensors (torch.strided); {way}")


def _op_lengths(lengths) -> tuple:
    """(('h', 8), ('w', s0)) -> ('h,w', [8, s0]): the operator's two
    arguments (its schema has no list of str; sizes are SymInt, so a
    backward's repeat length stays symbolic under dynamic shapes)."""
    return ",".join(name for name, _ in lengths), [size for _, size in lengths]


def _op_lengths_of(names: str, sizes) -> tuple:
    return tuple(zip(names.split(","), sizes)) if names else ()


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _compact_strides(shape) -> tuple:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


def _hint(d) -> int:
    """A size as an int: a symbolic size's hint (what this trace runs on,
    taken without a guard), an int as it is."""
    if isinstance(d, int):
        return d
    hint = getattr(getattr(d, "node", None), "hint", None)
    return int(hint) if hint is not None else int(d)


def _hints(shapes) -> tuple:
    return tuple(tuple(_hint(d) for d in s) for s in shapes)


def _specialize(shapes) -> None:
    """A guard on each size: the trace specializes them."""
    for s in shapes:
        for d in s:
            int(d)


def _symbolic(shapes) -> bool:
    return any(not isinstance(d, int) for s in shapes for d in s)


_structure = _shapes.structure
_prod = _shapes.prod


def _axis_sizes(expr, shapes, numpy, reduction, lengths, rules=0):
    """Every axis size as an expression of the input sizes, which may be
    torch.compile's symbolic sizes (einc._shapes.solve), or None when
    some axis cannot be solved so (the caller specializes). Checks
    (torch._check) every input dim against its axes, so the shape
    environment knows the sizes einc requires equal."""
    solved = _shapes.solve(expr, shapes, _hints(shapes), numpy, reduction,
                           lengths, tuple((k, _hint(v)) for k, v in lengths),
                           rules)
    if solved is None:
        return None
    size, axes, dims, checks = solved
    for have, want in checks:
        torch._check(have == want)
    return size, axes, dims[-1]


def _output_sizes(expr, shapes, numpy, reduction, lengths, rules=0):
    """The output shape, symbolic where the input sizes are: sizes stay
    symbolic (no recompilation for a new batch or sequence length) where
    every axis follows from the inputs' sizes, else specialized."""
    solved = _axis_sizes(expr, shapes, numpy, reduction, lengths, rules)
    if solved is None:
        shapes = tuple(tuple(int(d) for d in s) for s in shapes)
        return bind(expr, shapes, reduce=reduction, numpy=numpy,
                    **{k: int(v) for k, v in lengths})[0]
    size, _, out_dims = solved
    return tuple(_prod(size[i] for i in ids) for ids in out_dims)


@functools.lru_cache(maxsize=4096)
def _layout_cached(expr, shapes, strides, dtype, numpy, reduction, lengths):
    if numpy is None:
        numpy = numpy_dialect(expr, [len(s) for s in shapes])
    code, bits = dtype_code(dtype)
    shape, view = _einc.view_layout(expr, shapes, strides, code, bits,
                                    bool(numpy), reduction, lengths)
    return bool(numpy), shape, view


def _layout(expr, shapes, strides, dtype, numpy, reduction, lengths):
    """(numpy dialect, output shape, view): view is None or (input,
    strides, offset) where the plan only re-reads that input. Constant to
    Dynamo: its arguments are (static shapes, strings)."""
    shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    strides = tuple(tuple(int(d) for d in s) for s in strides)
    return _layout_cached(expr, shapes, strides, _dtype_name(dtype), numpy,
                          reduction, tuple(lengths))


@functools.lru_cache(maxsize=1024)
def _contracts(expr, shapes, numpy, reduction, lengths) -> bool:
    """Whether torch.einsum would run this as a matrix product (which
    autocast casts): an axis summed away that two inputs or more have
    with a size other than 1. torch sums an axis that only one input has
    nontrivially inside that input, and multiplies the rest elementwise
    (no cast): 'i,i->' on (1,) and (3,) is float32 under a bfloat16
    autocast, on (3,) and (3,) bfloat16."""
    axes = bind(expr, shapes, reduce=reduction, numpy=numpy,
                **dict(lengths))[1]
    counts = _nontrivial_counts(expr, shapes) if numpy else {}
    return reduction == "sum" and any(
        role == "reduced" and size != 1 and counts.get(name, 2) >= 2
        for name, size, role in axes)


def _nontrivial_counts(expr, shapes):
    """{letter: how many inputs have it with a size other than 1} of a
    numpy-dialect expression; letters under an ellipsis are not named
    (the caller counts an unnamed axis as shared)."""
    counts = {}
    terms = expr.replace(" ", "").split("->")[0].split(",")
    for term, shape in zip(terms, shapes):
        head, _, tail = term.partition("...")
        dims = (list(zip(head, shape))
                + list(zip(tail, shape[len(shape) - len(tail):]))
                if "..." in term else list(zip(term, shape)))
        for letter in {c for c, n in dims if n != 1}:
            counts[letter] = counts.get(letter, 0) + 1
    return counts


def _autocast(expr, tensors, numpy, reduction, lengths):
    """The inputs as torch.autocast has torch.einsum compute them: float
    inputs of a contraction in the autocast dtype (float64 stays)."""
    if len(tensors) < 2 or not torch._C._is_any_autocast_enabled():
        return tensors
    device = tensors[0].device.type
    if not torch.is_autocast_enabled(device):
        return tensors
    target = torch.get_autocast_dtype(device)
    if not any(t.dtype in _AUTOCAST_DTYPES and t.dtype != target
               for t in tensors):
        return tensors
    shapes = _hints(t.shape for t in tensors)
    if not _contracts(expr, shapes, numpy, reduction,
                      tuple((k, _hint(v)) for k, v in lengths)):
        return tensors
    return tuple(t.to(target) if t.dtype in _AUTOCAST_DTYPES else t
                 for t in tensors)


def _dual_level_open() -> bool:
    """Whether a torch.autograd.forward_ad dual level is open: only then
    can a tensor carry a tangent (a module attribute, read per call)."""
    return getattr(_forward_ad, "_current_level", -1) >= 0


def _has_tangent(tensors) -> bool:
    """Whether some tensor is a dual tensor of the open level."""
    return _dual_level_open() and any(
        _forward_ad.unpack_dual(t).tangent is not None for t in tensors)


def _mode(tensors) -> int:
    """How a call on these torch tensors is served: _PLAIN (DLPack),
    _DETACH (DLPack on detached tensors: grad not recorded), _GRAPH
    (autograd.Function, eager) or _TRACED (the operator, for tracers).
    Dual tensors (forward mode) are _GRAPH whatever their requires_grad:
    DLPack would drop their tangents."""
    if torch._C._get_tracing_state() is not None:
        return _JIT
    # (Dynamo never gets here: it traces the stand-ins at the end of this
    # file. AOTAutograd, export and make_fx trace with fake or functional
    # tensors, or under a dispatch mode; torch.func's transforms wrap
    # tensors DLPack cannot see through: the autograd.Function unwraps.)
    if torch._C._len_torch_dispatch_stack():
        return _TRACED
    if torch._C._are_functorch_transforms_active():
        return _FUNC  # _EinsumTransformable, which torch.func transforms
    grad = False
    for t in tensors:
        if type(t) not in _PLAIN_TYPES:
            return _TRACED  # FakeTensor, FunctionalTensor, other subclasses
        grad = grad or t.requires_grad
    if _has_tangent(tensors):
        return _GRAPH
    if not grad:
        return _PLAIN
    return _GRAPH if torch.is_grad_enabled() else _DETACH


def _compute(expr, tensors, reduction, numpy, lengths, checked=False):
    """The result of the call in a new tensor (never a view of an input,
    as an operator's result must not be): the fast path where it serves
    (and gives no view: `checked` says the layout was seen to give none),
    else ein_eval."""
    tensors = tuple(t.detach() for t in tensors) if torch.is_grad_enabled() \
        else tuple(tensors)  # (the fast path reads them as they are)
    result = _fast((expr,) + tensors, numpy, reduction, lengths or None)
    if result is not None and (checked or
                               not any(_shares(result, t) for t in tensors)):
        return result
    prepared = prepare(tuple(t.detach() for t in tensors))  # (DLPack's
    # Python export refuses tensors that require grad, whatever the mode)
    code, bits = prepared.retype
    return _einc.evaluate(expr, prepared.tensors, None, prepared.alloc,
                          bool(numpy), reduction, "auto", tuple(lengths),
                          code, bits, prepared.stream, prepared.sync)


def _shares(result, t) -> bool:
    return (result.numel() > 0 and t.numel() > 0 and
            result.untyped_storage().data_ptr()
            == t.untyped_storage().data_ptr())
