"""torch integration (issue 25): autograd, torch.compile, torch.export,
torch.jit.trace and autocast.

einc's eager path takes tensors through DLPack, which torch refuses for
tensors that require grad and which no tracer can see. This module takes
the calls that path must not serve (``route``, asked by
einc._core for every call with torch tensors) and sends them
through torch's own machinery:

- A result the plan only re-reads from one input (a transpose, split,
  merge, diagonal: ``_einc.view_layout`` says so, from the same
  ein_plan_output_view the fast path views with) is made by torch itself,
  ``x.as_strided(...)``: a real autograd view, with torch's version
  counter and in-place checks, and as_strided's gradient.
- Everything else is the custom operator ``einc::einsum`` (registered
  with torch.library.custom_op, with a fake implementation that gets the
  output shape from einc's binder, and an autograd formula), which
  torch.compile, torch.export, make_fx and torch.jit.trace record as one
  node. In eager mode a call that needs grad goes through an
  autograd.Function with the same forward and backward (cheaper than the
  operator's dispatch; see _EinsumFunction); under torch.func's
  transforms (grad, vmap) through its setup_context form. Under
  torch.jit.trace every result is the operator (no view: the trace would
  record the example's sizes in an as_strided).
- The backward is the program the C library derives (einc._grad.program:
  einsum steps and elementwise ones); its einsum steps go through the same
  route, so double backward and compiled backward work.
- Forward mode (torch.autograd.forward_ad's dual tensors, torch.func.jvp,
  jacfwd, hessian): the Functions' jvp runs the C library's JVP program
  for each input that has a tangent (einc._grad.program(jvp=True),
  ein_jvp_create) and sums them; lowered calls and views are torch's own
  operations, which have their forward derivatives already. A dual tensor
  needs no grad, so _mode asks for tangents before sending a call to
  DLPack, which would drop them (and python/src/call.c hands every torch call to
  Python while a dual level is open).
- Tensors that require grad when no gradient is recorded (torch.no_grad,
  inference_mode, an nn.Parameter in eval code) take einc's C fast path,
  which reads them through DLPack while torch.is_grad_enabled() is false;
  where it cannot serve, they are detached and take the DLPack path.
- Under torch.autocast, a contraction of float inputs is computed in the
  autocast dtype, as torch.einsum's matrix products are (torch casts its
  bmm, not its elementwise products or sums).

torch.compile's Dynamo cannot look into einc's C functions, so einc's
public functions get stand-ins (torch.compiler.substitute_in_graph) that
record one allow_in_graph node per call; AOTAutograd then runs it on fake
tensors and records the view or the operator. Sizes stay symbolic: the
fake implementation solves the output's sizes from the inputs' symbolic
ones (_output_sizes), so a new batch or sequence length neither breaks
the graph nor recompiles. einc imports this module as soon as torch is imported (before
or after einc: einc._core.after_import), and the stand-ins are
registered as soon as torch._dynamo is (only programs that compile pay
for importing Dynamo).

The adapter is four modules, each importing only those before it:
_torch_base (what the others share: _mode, symbolic sizes, layouts,
_compute), _torch_grad (the derivative programs run as torch
operations), _torch_autograd (route, views, lowered calls, the operator
and the autograd Functions) and this one, which registers the adapter
with einc._core and holds the torch.compile stand-ins.
"""


from __future__ import annotations

import torch

from . import _core, _einc
from ._torch_autograd import _graph, eager_grad, route, set_lowering
from ._torch_base import (EincError, _autocast, _check_dense, _hint, _hints,
                          _op_lengths, _op_lengths_of)

__all__ = ["route", "set_lowering"]

_TORCH_TO_NUMPY = {}


def _torch_numpy_dtype(t):
    """The numpy dtype of a torch tensor's elements."""
    return _TORCH_TO_NUMPY[t.dtype]


def _arm_fast(np) -> bool:
    """einc._core's arming of _einc.fast (python/src/call.c) for torch CPU
    tensors, once numpy's side is armed; False while torch is still being
    imported."""
    if not hasattr(torch, "from_numpy"):
        return False
    for name in ("float16", "float32", "float64", "int8", "int16",
                 "int32", "int64", "uint8", "bool", "complex64",
                 "complex128"):
        _TORCH_TO_NUMPY[getattr(torch, name)] = np.dtype(name)
    # bfloat16 results are made as uint16 arrays (python/src/inputs.c)
    _TORCH_TO_NUMPY[torch.bfloat16] = np.dtype("uint16")
    # torch 2.10 on: DLPack's C exchange table, no Python calls. The
    # guards send calls under jit tracing or a dispatch mode (make_fx)
    # and contractions under autocast to einc/_torch_autograd.py.
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
    return True


# ------------------------------------------------------ Dynamo stand-ins

def _in_graph(expr, reduction, numpy, names, rules, nsizes, *sizes_tensors):
    """The traced call as Dynamo records it: one node (allow_in_graph),
    run by AOTAutograd on fake tensors, where the view or the operator is
    chosen (the operator where sizes are symbolic). Axis lengths come as
    names and sizes (the first nsizes items of sizes_tensors), so a length
    the caller took from a tensor's shape stays symbolic. `rules`
    (ein_options.axis_rules: rearrange and repeat never reduce) are
    checked here, on the shapes, as the eager call checks them."""
    lengths = _op_lengths_of(names, sizes_tensors[:nsizes])
    tensors = sizes_tensors[nsizes:]
    if rules:  # (structural: the hints of symbolic sizes serve)
        _einc.bind(expr, _hints(t.shape for t in tensors), bool(numpy),
                   reduction, "auto",
                   tuple((k, _hint(v)) for k, v in lengths), rules)
    cast = _autocast(expr, tensors, numpy, reduction, lengths)
    return _graph(expr, cast, reduction, numpy, lengths, False)


_in_graph = torch.compiler.allow_in_graph(_in_graph)


def _traced_call(expr, tensors, reduction, numpy, lengths, rules=0):
    names, sizes = _op_lengths(lengths)
    return _in_graph(expr, reduction, numpy, names, rules, len(sizes),
                     *sizes, *tensors)


def _install_dynamo():
    """einc's public functions as Dynamo traces them: straight to the view
    or the operator (their eager forms start in C, which Dynamo cannot
    trace)."""
    from . import _api, _einops
    from . import einops as _einops_dropin
    from ._core import (RULE_NO_REDUCE, RULE_NO_REPEAT, _lengths,
                        _reduction_name, split_expr)

    substitute = torch.compiler.substitute_in_graph

    @substitute(_api.einsum)
    def einsum(*args, reduce=None, backend="auto", out=None, numpy=None,
               scales=None, out_dtype=None, memory_limit=None,
               **axis_sizes):
        if memory_limit:
            raise EincError("einc.einsum(memory_limit=...) cannot be traced "
                            "(the graph holds no sliced plan): call it "
                            "eagerly")
        if out is not None:
            raise EincError("einc.einsum(out=...) cannot be traced: use "
                            "the result")
        if scales is not None or out_dtype is not None:
            raise EincError("einc.einsum with fp8 scales= or out_dtype= "
                            "cannot be traced yet: call it eagerly")
        expr, tensors = split_expr(args)
        return _traced_call(expr, tensors, _reduction_name(reduce), numpy,
                            _lengths(axis_sizes))

    def single(tensor):
        if isinstance(tensor, (list, tuple)):
            return torch.stack(list(tensor))
        return tensor

    @substitute(_api.rearrange)
    def rearrange(tensor, pattern, **axes_lengths):
        return _traced_call(pattern, (single(tensor),), "sum", False,
                            _lengths(axes_lengths), RULE_NO_REDUCE)

    @substitute(_api.reduce)
    def reduce(tensor, pattern, reduction, **axes_lengths):
        if callable(reduction):
            return _einops._reduce_callable(single(tensor), pattern,
                                            reduction, axes_lengths)
        return _traced_call(pattern, (single(tensor),), reduction, False,
                            _lengths(axes_lengths))

    @substitute(_api.repeat)
    def repeat(tensor, pattern, **axes_lengths):
        return _traced_call(pattern, (single(tensor),), "sum", False,
                            _lengths(axes_lengths), RULE_NO_REDUCE)

    _install_dynamo_einops(substitute, single, _einops_dropin,
                           RULE_NO_REDUCE, RULE_NO_REPEAT, _lengths)


def _install_dynamo_einops(substitute, single, dropin, no_reduce, no_repeat,
                           lengths_of):
    """einc.einops' functions as Dynamo traces them, with einops' rules:
    rearrange neither reduces nor repeats, reduce does not repeat, repeat
    does not reduce."""

    @substitute(dropin.rearrange)
    def rearrange(tensor, pattern, **axes_lengths):
        return _traced_call(pattern, (single(tensor),), "sum", False,
                            lengths_of(axes_lengths), no_reduce | no_repeat)

    @substitute(dropin.reduce)
    def reduce(tensor, pattern, reduction, **axes_lengths):
        if callable(reduction):
            from ._einops import _reduce_callable

            return _reduce_callable(single(tensor), pattern, reduction,
                                    axes_lengths)
        rules = {"rearrange": no_reduce | no_repeat,
                 "repeat": no_reduce}.get(reduction, no_repeat)
        if reduction in ("rearrange", "repeat"):
            reduction = "sum"  # nothing is reduced: the rules say so
        return _traced_call(pattern, (single(tensor),), reduction, False,
                            lengths_of(axes_lengths), rules)

    @substitute(dropin.repeat)
    def repeat(tensor, pattern, **axes_lengths):
        return _traced_call(pattern, (single(tensor),), "sum", False,
                            lengths_of(axes_lengths), no_reduce)

    @substitute(dropin.einsum)
    def einsum(*tensors_and_pattern):
        *tensors, pattern = tensors_and_pattern
        dropin._check_einsum_axes(pattern)
        # numpy's form, which broadcasts size-1 dims as einops' backends do
        return _traced_call(dropin._numpy_form(pattern), tuple(tensors),
                            "sum", True, ())


# The adapter registers itself with einc's core: the route of calls on
# torch tensors, einsum's shortcut for eager calls that record autograd,
# the traced call of a compiled plan and the fast path's torch side; the
# torch.compile stand-ins once Dynamo is imported (only programs that
# compile pay for importing it).
_core.register_route("torch", route)
_core.eager_grad = eager_grad
_core.check_operands = _check_dense
_core.traced_call = _traced_call
_core.set_fast_armer(_arm_fast)
_core.after_import("torch._dynamo", _install_dynamo)
