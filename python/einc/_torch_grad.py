"""The torch side of a gradient or JVP program (include/ein_grad.h).
einc._torch_autograd's Functions call _interpret from their
backward and jvp. An eager call whose tensors are all on the host or all
on one CUDA device runs the program in the C library (ein_grad_execute
through _einc.grad_run: every step through that device's plans, CUDA
work queued on torch's current stream), as the forward runs; a call that
torch records (a gradient made with create_graph, for a double backward)
or traces (torch.compile, torch.export, vmap and the other functorch
transforms, fake tensors), and tensors elsewhere, run the program's
steps as torch operations instead, so that the result is itself
differentiable and traceable (docs/design.md, "One gradient
interpreter")."""

from __future__ import annotations

import functools

import torch

from . import _einc
from ._arrays import cuda_stream
from ._core import _fast, evaluate
from ._grad import exact_prod_select, group_steps
from ._torch_base import (_DETACH, _PLAIN, EincError, _compute, _mode,
                          _prod)


def _interpret(program, inputs, output, dout, spec=None, wrt=0, jvp=False):
    """Runs a backward or JVP program (include/ein_grad.h) of input
    wrt of the call spec (expression, reduction, dialect, lengths). dout is
    the program's seed: the output's gradient, or for a JVP program the
    tangent of its input."""
    if program["needs_output"] and output is None:
        raise EincError("einc's backward program reads the forward "
                        "output, which was not saved")
    graph = _mode((dout, *inputs)) not in (_PLAIN, _DETACH)
    if not graph and spec is not None and _one_device(dout, inputs):
        return _in_c(program, spec, wrt, jvp, inputs, output, dout)
    return _lowered(program, inputs, output, dout, graph)


def _one_device(dout, inputs):
    """Whether dout and every input are on the host, or all on one CUDA
    device: where the C library runs the program."""
    device = dout.device
    return (device.type in ("cpu", "cuda")
            and all(t.device == device for t in inputs))


def _plain(t):
    """t as DLPack takes it: detached, its negative bit (and a complex
    tensor's conjugate bit) resolved (torch exports neither)."""
    t = t.detach().resolve_neg()
    return t.resolve_conj() if t.is_complex() else t


def _in_c(program, spec, wrt, jvp, inputs, output, dout):
    """The program run by the C library into a new tensor on dout's device
    (a gradient must not alias dout or an input: torch may keep it as
    .grad and add into it in place); CUDA work is queued on torch's
    current stream, as any torch operation's, without waiting for it."""
    expr, reduction, numpy, lengths = spec
    inputs = tuple(_plain(t) for t in inputs)
    output = _plain(output) if program["needs_output"] else None
    lengths = tuple((n, int(v)) for n, v in lengths)
    dtype, device = inputs[0].dtype, dout.device
    result = torch.empty(tuple(program["steps"][-1]["shape"]), dtype=dtype,
                         device=device)
    key = (expr, reduction, bool(numpy), lengths, wrt, jvp, dtype,
           tuple(t.shape for t in inputs), device)
    return _einc.grad_run(key, expr, inputs, output, _plain(dout), result,
                          bool(numpy), reduction, lengths, wrt, jvp,
                          cuda_stream(result) if device.type == "cuda"
                          else None)


def _lowered(program, inputs, output, dout, graph):
    """The program's steps as torch operations (einsum steps through
    einc), so the result is itself differentiable and traceable: for a
    recorded or traced call, and tensors on devices the C library does
    not run (meta, another accelerator, or spread over several)."""
    if program["conjugates"]:
        inputs = [t.conj() for t in inputs]
        output = output.conj() if output is not None else None
    if not graph:
        # Plain eager backward: einsum steps take einc's fast path on
        # detached tensors (the saved inputs require grad, which would send
        # each step through route and DLPack's general path).
        inputs = [t.detach() for t in inputs]
        output = output.detach() if output is not None else None
        dout = dout.detach()
    sources = {"dout": (dout,), "tangent": (dout,), "input": inputs,
               "output": (output,)}
    results = []
    for step in program["steps"]:
        operands = [results[i] if kind == "step" else sources[kind][i]
                    for kind, i in step["operands"]]
        if step["op"] == "einsum":
            results.append(_einsum_step(step, operands, graph))
        elif step["op"] == "prod_select" and graph:
            results.append(_exact_prod_select(program, step, operands))
        else:
            results.append(_STEPS[step["op"]](step, *operands))
    return results[-1]


def _einsum_step(step, operands, graph):
    """One einsum step of a backward program: through einc's routes when
    the gradient is itself recorded (double backward, compiled backward),
    else a new tensor (a gradient must not alias dout or an input: torch
    may keep it as .grad and add into it in place)."""
    lengths = tuple(step.get("lengths") or ())
    reduction = step.get("reduction") or "sum"
    if not graph:
        big = max(range(len(operands)), key=lambda k: operands[k].numel())
        follow = _in_operand_order(step["expr"], big)
        if follow is None:
            return _compute(step["expr"], operands, reduction, False, lengths)
        expr, perm = follow
        return _compute(expr, operands, reduction, False,
                        lengths).permute(perm)
    result = _fast((step["expr"],) + tuple(operands), False, reduction,
                   lengths or None)
    if result is not None:
        return result
    return evaluate(step["expr"], tuple(operands), reduce=reduction,
                    numpy=False, lengths=lengths)


@functools.lru_cache(maxsize=4096)
def _in_operand_order(expr, k):
    """An elementwise step whose output has exactly operand k's axes in
    another order (the gradient of 'i j, j i ->' is ', j i -> i j'): the
    expression with the output in operand k's order and the permutation
    that views it in the asked order, or None. Computed in the large
    operand's order, the step reads it in order instead of transposing it
    (2048x2048: 39 ms -> 8 ms); the gradient is a permuted view, as
    torch's own is. Plain names only (no merges, numbers or ellipses)."""
    if "(" in expr or "." in expr or "->" not in expr:
        return None
    inputs, output = expr.split("->")
    operands = [term.split() for term in inputs.split(",")]
    out = output.split()
    if (k >= len(operands) or sorted(operands[k]) != sorted(out)
            or operands[k] == out or len(set(out)) != len(out)
            or any(not name.isidentifier() for name in out)):
        return None
    order = operands[k]
    return (f"{inputs}-> {' '.join(order)}",
            tuple(order.index(name) for name in out))


def _prod_select(step, g, p, x, z):
    """z == 0: g * p / x (no zero in the group); z == 1 and x == 0: g * p
    (the one zero); else 0. Divisions by zero stay out of both branches,
    so a second derivative has no NaN either."""
    safe_x = torch.where(x == 0, torch.ones_like(x), x)
    gp = g * p
    return torch.where(z == 0, gp / safe_x,
                       torch.where((z == 1) & (x == 0), gp,
                                   torch.zeros_like(gp)))


def _exact_prod_select(program, step, operands):
    """PROD_SELECT for a recorded backward: the same values, with a
    derivative that is exact where x has zeros (einc._grad's
    exact_prod_select: a double backward, torch.func.hessian)."""
    reduce, back = group_steps(program, step)

    def group(reduction):
        def run(t):
            part = _einsum_step(dict(reduce, reduction=reduction), [t], True)
            return _einsum_step(back, [part], True)
        return run
    return exact_prod_select(torch.where, *operands, group("prod"),
                             group("sum"))


def _scatter_diag(step, a):
    """Zeros of the step's shape with `a` on its diagonal view. Written
    as an index_put at the view's flat positions: as_strided_scatter has
    no vmap rule, so jacfwd and hessian (vmap over the backward) failed
    on a diagonal."""
    shape = tuple(step["shape"])
    flat = torch.zeros((), dtype=torch.long, device=a.device)
    for n, stride in zip(a.shape, step["view_strides"]):
        # (broadcasting adds each dim's offsets: the grid of positions)
        flat = flat.unsqueeze(-1) + torch.arange(n, device=a.device) * stride
    return a.new_zeros(_prod(shape)).index_put(
        (flat.reshape(-1),), a.reshape(-1)).reshape(shape)


def _as_values(mask, like):
    return mask.to(like.dtype)


_STEPS = {  # the elementwise steps (einsum steps: _einsum_step)
    "equal": lambda s, a, b: _as_values(a == b, a),
    "mul": lambda s, a, b: a * b,
    "div": lambda s, a, b: a / b,
    "scale": lambda s, a: a * s["scale"],
    "is_zero": lambda s, a: _as_values(a == 0, a),
    "zero_to_one": lambda s, a: torch.where(a == 0, torch.ones_like(a), a),
    "prod_select": _prod_select,
    "scatter_diag": _scatter_diag,
}
