"""einc: einsum and einops expressions compiled for CPUs and NVIDIA GPUs.

    >>> import numpy as np, einc
    >>> a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    >>> einc.einsum('i j, j k -> i k', a, b).shape
    (3, 5)
    >>> einc.rearrange(np.zeros((2, 6)), 'b (h d) -> b h d', h=3).shape
    (2, 3, 2)

Tensors are taken through DLPack without copies (numpy, torch, ...) and the
result is an array of the same library. einsum, rearrange, reduce, repeat,
pack, unpack and parse_shape follow einops' signatures; plan() shows what
einc will do (`einc plan`'s report), compile() keeps one plan for a hot
loop, check() gives an output shape, ShapeMemo checks shapes across
arguments. Every error is einc.EincError, whose message points a caret at
the culprit in the expression.

One einc context serves the process: threads may call einc at once (the
GIL is released while a plan runs) and share the compiled plans.
"""

from . import _core
from ._api import (EincError, ShapeMemo, backend_available, check, compile,
                   einsum, grad_program, jvp_program, pack, parse_shape,
                   plan, rearrange, reduce, repeat, unpack)
from ._plan import Plan

EinError = EincError  # the older name, kept for code written against it


def _torch_arrived():
    from . import _torch  # noqa: F401 (registers with einc._core)


def _jax_arrived():
    from . import _jax

    _jax._register()  # (a deserialized jax.export program needs the target)


# The framework adapters register themselves with einc._core when they
# are imported: torch's as soon as torch is imported, before or after
# einc (torch.compile must find einc's stand-ins before it traces a
# function calling einc); JAX's, with einc's XLA FFI target, as soon as
# jax is. einc itself imports neither framework.
_core.after_import("torch", _torch_arrived)
_core.after_import("jax", _jax_arrived)

__version__ = "0.1.0"

__all__ = [
    "EincError", "EinError", "Plan", "ShapeMemo", "backend_available",
    "check", "compile", "einsum", "grad_program", "jvp_program", "pack",
    "parse_shape", "plan",
    "rearrange", "reduce", "repeat", "unpack",
]
