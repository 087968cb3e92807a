"""Where a call leaves einc's DLPack path for a framework's own machinery.

einc's eager path takes tensors through DLPack. Inside training code that
is not enough: torch tensors that require grad (or that torch.compile,
torch.export or torch.jit trace) must go through einc's torch custom
operators (einc/_torch.py), and JAX tracers (jax.jit, jax.grad,
jax.vmap) through XLA's FFI (einc/_jax.py). ``route`` is the one place
that decides; each framework module answers for its own tensors and
returns NotImplemented for the rest. Neither framework is imported here:
a module is asked only when its framework is already in sys.modules.
"""

from __future__ import annotations

import sys


def route(expr, tensors, *, reduce, numpy, lengths):
    """The result of the call through a framework's machinery, or
    NotImplemented when the plain DLPack path serves it."""
    if "torch" in sys.modules:
        from . import _torch

        result = _torch.route(expr, tensors, reduce=reduce, numpy=numpy,
                              lengths=lengths)
        if result is not NotImplemented:
            return result
    if "jax" in sys.modules:
        from . import _jax

        result = _jax.route(expr, tensors, reduce=reduce, numpy=numpy,
                            lengths=lengths)
        if result is not NotImplemented:
            return result
    return NotImplemented
