"""The torch side of a gradient or JVP program (include/ein.h,
"gradients"): the steps the C library derives (einc._grad.program), run
as torch operations so the result is itself differentiable and
traceable. einc._torch's autograd Functions call _interpret from their
backward and jvp."""

from __future__ import annotations

import functools

import torch

from ._core import _fast, evaluate
from ._torch_base import (_DETACH, _PLAIN, EincError, _compute, _mode,
                          _prod)


def _interpret(program, inputs, output, dout):
    """Runs a backward or JVP program (include/ein.h, "gradients"): einsum
    steps through einc (views and the operator as any call), elementwise
    steps as torch ops, so the result is itself differentiable and
    traceable. dout is the program's seed: the output's gradient, or for
    a JVP program the tangent of its input."""
    if program["conjugates"]:
        inputs = [t.conj() for t in inputs]
        output = output.conj() if output is not None else None
    # Recorded (create_graph: a differentiable gradient) or traced
    # (compiled backward, fake tensors): every step goes through the routes.
    graph = _mode((dout, *inputs)) not in (_PLAIN, _DETACH)
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
        if any(x is None for x in operands):
            raise EincError("einc's backward program reads the forward "
                            "output, which was not saved")
        if step["op"] == "einsum":
            results.append(_einsum_step(step, operands, graph))
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
