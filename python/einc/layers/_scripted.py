"""The forms torch.jit.script compiles for einc's layers
(einc/layers/torch.py, __prepare_scriptable__): calls of einc's operator
torch.ops.einc.einsum, which TorchScript can call. (No `from __future__
import annotations` here: TorchScript reads these annotations as types.)
"""

from typing import List

import torch


class _Scripted(torch.nn.Module):
    """What torch.jit.script compiles for Rearrange and Reduce: one call
    of einc's operator (a new tensor, never a view; its autograd is
    einc's backward program)."""

    sizes: List[int]

    def __init__(self, expr: str, reduction: str, lengths: dict):
        super().__init__()
        self.expr = expr
        self.reduction = reduction
        self.names = ",".join(lengths)
        self.sizes = [int(v) for v in lengths.values()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.einc.einsum([x], self.expr, self.reduction, False,
                                     self.names, self.sizes)


class _ScriptedMix(torch.nn.Module):
    """What torch.jit.script compiles for an EinMix without bias: the
    einsum with the weight, then the merge of the output's axes."""

    sizes: List[int]

    def __init__(self, expr: str, lengths: dict, merge: str):
        super().__init__()
        self.expr = expr
        self.names = ",".join(lengths)
        self.sizes = [int(v) for v in lengths.values()]
        self.merge = merge

    def mix(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.ops.einc.einsum([x, weight], self.expr, "sum", False,
                                     self.names, self.sizes)

    def merged(self, y: torch.Tensor) -> torch.Tensor:
        if self.merge == "":
            return y
        return torch.ops.einc.einsum([y], self.merge, "sum", False, "", [])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.merged(self.mix(x, self.weight))


class _ScriptedMixBias(_ScriptedMix):
    """_ScriptedMix with its bias, added in the einsum result's dtype
    (as nn.Linear under autocast)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.mix(x, self.weight)
        return self.merged(y + self.bias.to(y.dtype))
