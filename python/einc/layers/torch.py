"""torch.nn layers on einc, with einops.layers.torch's constructors:

    >>> import torch, einc.layers.torch as L
    >>> net = torch.nn.Sequential(
    ...     L.Rearrange('b c (h p) (w q) -> b (h w) (p q c)', p=4, q=4),
    ...     L.EinMix('b t d -> b t e', weight_shape='d e', bias_shape='e',
    ...              d=48, e=32),
    ...     L.Reduce('b t e -> b e', 'mean'))
    >>> net(torch.zeros(2, 3, 16, 16)).shape
    torch.Size([2, 32])

They run einc.rearrange, einc.reduce and einc.einsum, so they train
(gradients by einc's backward programs), compile with
torch.compile(fullgraph=True) and export with torch.export. They also
script (torch.jit.script): the scripted form calls einc's operator
torch.ops.einc.einsum, so it needs einc imported where it runs (see
docs/design.md, "Export, deployment and sharding").
"""

from __future__ import annotations

import math

import torch

from .. import _torch  # noqa: F401 (torch.compile's stand-ins for einc)
from .._api import EincError, einsum
from .._api import rearrange, reduce
from .._einops import _dims
from ._scripted import _Scripted, _ScriptedMix, _ScriptedMixBias

__all__ = ["EinMix", "Rearrange", "Reduce"]


class Rearrange(torch.nn.Module):
    """einc.rearrange(x, pattern, **axes_lengths) as a layer."""

    def __init__(self, pattern: str, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.axes_lengths = axes_lengths

    def forward(self, x):
        return rearrange(x, self.pattern, **self.axes_lengths)

    def __prepare_scriptable__(self):
        _check_no_reduction(self.pattern)
        return _Scripted(self.pattern, "sum", self.axes_lengths)

    def extra_repr(self) -> str:
        return _repr_args(repr(self.pattern), self.axes_lengths)


class Reduce(torch.nn.Module):
    """einc.reduce(x, pattern, reduction, **axes_lengths) as a layer."""

    def __init__(self, pattern: str, reduction, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = axes_lengths

    def forward(self, x):
        return reduce(x, self.pattern, self.reduction, **self.axes_lengths)

    def __prepare_scriptable__(self):
        if not isinstance(self.reduction, str):
            raise EincError("Reduce with a callable reduction does not "
                            "script (TorchScript cannot call it): give a "
                            "named reduction, or use torch.export")
        return _Scripted(self.pattern, self.reduction, self.axes_lengths)

    def extra_repr(self) -> str:
        return _repr_args(f"{self.pattern!r}, {self.reduction!r}",
                          self.axes_lengths)


class EinMix(torch.nn.Module):
    """A linear layer written as an einsum with its weight: the pattern
    maps the input's axes to the output's, weight_shape names the weight's
    axes (each given a length), bias_shape the axes of a bias added to the
    output (None: no bias)::

        EinMix('t b cin -> t b cout', weight_shape='cin cout',
               bias_shape='cout', cin=10, cout=20)
        EinMix('t b (head cin) -> t b (head cout)',
               weight_shape='head cin cout', head=4, cin=16, cout=16)

    As einops' EinMix: the weight is uniform in +-sqrt(3 / fan_in), the bias
    in +-sqrt(1 / fan_in), fan_in the product of the weight's axes absent
    from the output. The einsum runs in one einc call, compositions
    included ('(head cin)'); the bias is added before the output's axes
    are merged.
    """

    def __init__(self, pattern: str, weight_shape: str,
                 bias_shape: str | None = None, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.weight_shape = weight_shape
        self.bias_shape = bias_shape
        self.axes_lengths = axes_lengths
        left, arrow, right = pattern.partition("->")
        if not arrow:
            raise EincError(f"EinMix needs '->' in its pattern: {pattern!r}")
        weight = _names(weight_shape, "weight_shape", flat=True)
        left_names = set(_names(left, "pattern"))
        right_groups = _dims(right)
        right_names = [n for g in right_groups for n in g]
        _check_axes(weight, left_names, set(right_names), axes_lengths)
        flat = " ".join(right_names)
        self._einsum = f"{left.strip()}, {' '.join(weight)} -> {flat}"
        self._merge = (None if all(len(g) == 1 for g in right_groups)
                       else f"{flat} -> {right.strip()}")
        self._lengths = {n: s for n, s in axes_lengths.items()
                         if n in left_names and n not in weight}
        fan_in = math.prod(axes_lengths[n] for n in weight
                           if n not in right_names)
        self.weight = torch.nn.Parameter(_uniform(
            [axes_lengths[n] for n in weight], (3 / fan_in) ** 0.5))
        self.bias = None
        if bias_shape is not None:
            shape = _bias_shape(bias_shape, right_names, axes_lengths)
            self.bias = torch.nn.Parameter(_uniform(shape,
                                                    (1 / fan_in) ** 0.5))

    def forward(self, x):
        y = einsum(self._einsum, x, self.weight, **self._lengths)
        if self.bias is not None:
            y = y + _as_result(self.bias, y)
        if self._merge is not None:
            y = rearrange(y, self._merge)
        return y

    def __prepare_scriptable__(self):
        scripted = (_ScriptedMix if self.bias is None else
                    _ScriptedMixBias)(self._einsum, self._lengths,
                                      self._merge or "")
        scripted.weight = self.weight  # (the same parameters)
        if self.bias is not None:
            scripted.bias = self.bias
        return scripted

    def extra_repr(self) -> str:
        head = f"{self.pattern!r}, {self.weight_shape!r}"
        if self.bias_shape is not None:
            head += f", {self.bias_shape!r}"
        return _repr_args(head, self.axes_lengths)


def _check_no_reduction(pattern):
    """Rearrange's rule, checked when it is scripted (the operator takes
    no rules): every input axis is in the output."""
    left, _, right = pattern.partition("->")
    names = {n for g in _dims(right) for n in g}
    lost = [n for g in _dims(left) for n in g
            if n not in names and not n.isdigit() and n != "..."]
    if lost:
        raise EincError(f"rearrange never reduces: axes {lost} of "
                        f"{pattern!r} are not in the output (use Reduce)")


def _as_result(bias, y):
    """The bias in the einsum result's dtype where autocast made that a
    lower precision: nn.Linear computes its bias in the autocast dtype
    too, and einops' EinMix adds it in place into the result, so both
    return bfloat16 under autocast(bfloat16); a float32 bias would
    promote the sum back to float32 (issue 38)."""
    if bias.dtype == y.dtype or not torch.is_autocast_enabled(
            y.device.type):
        return bias
    return bias.to(y.dtype)


def _repr_args(head: str, lengths: dict) -> str:
    return head + "".join(f", {k}={v}" for k, v in lengths.items())


def _names(side: str, what: str, flat: bool = False):
    groups = _dims(side)
    if flat and ("(" in side or ")" in side):
        raise EincError(f"EinMix: {what} takes names only, no "
                        f"parentheses: {side!r}")
    names = [n for g in groups for n in g]
    if flat and "..." in names:
        raise EincError(f"EinMix: {what} cannot hold '...': {side!r}")
    return names


def _check_axes(weight, left, right, lengths):
    missing = [n for n in weight if n not in lengths]
    if missing:
        raise EincError(f"EinMix: give the length of weight axes {missing}")
    redundant = [n for n in weight if n not in left and n not in right]
    if redundant:
        raise EincError(f"EinMix: weight axes {redundant} are in neither "
                        f"side of the pattern")
    unknown = sorted(right - left - set(weight) - {"..."})
    if unknown:
        raise EincError(f"EinMix: output axes {unknown} are in neither the "
                        f"input nor the weight")
    unused = sorted(set(lengths) - left - set(weight))
    if unused:
        raise EincError(f"EinMix: axes {unused} are not used in the pattern")


def _bias_shape(bias_shape, right_names, lengths):
    """The bias as it broadcasts against the output's flat axes (from the
    right): the size of its axes, 1 for the others ('...' adds none), as
    einops shapes it; its axes must come after a '...'."""
    bias = _names(bias_shape, "bias_shape", flat=True)
    stray = [n for n in bias if n not in right_names or n not in lengths]
    if stray:
        raise EincError(f"EinMix: bias axes {stray} must be output axes "
                        f"with a length")
    after = (right_names[right_names.index("...") + 1:]
             if "..." in right_names else right_names)
    if any(n not in after for n in bias):
        raise EincError("EinMix: bias axes must come after '...' in the "
                        "output")
    return [lengths[n] if n in bias else 1 for n in right_names
            if n != "..."]


def _uniform(shape, bound):
    return torch.empty(shape).uniform_(-bound, bound)
