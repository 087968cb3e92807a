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

# einc.einsum's shortcut for eager torch calls on tensors that need grad
# (einc/_torch.py sets it): (args, numpy, reduce, lengths) -> the result,
# or NotImplemented for every other call. The general path would reach the
# same autograd node through route, some 20 us later.
eager_grad = None


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


class _AfterImport:
    """A sys.meta_path entry that runs callback() once module `name` has
    been imported (its module executed), without importing it: einc's
    torch integration registers itself when torch comes, and its
    torch.compile stand-ins when torch._dynamo does (importing Dynamo
    takes seconds: only programs that compile pay for it)."""

    def __init__(self, name, callback):
        self.name, self.callback = name, callback

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, callback = loader.exec_module, self.callback

        def exec_module(module):
            run(module)
            try:
                callback()
            except Exception:  # noqa: BLE001 (the import must not fail)
                pass  # einc then registers on its first call instead

        loader.exec_module = exec_module
        return spec


def after_import(name, callback):
    """callback() now when module `name` is loaded, else right after it
    is imported."""
    if name in sys.modules:
        callback()
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))
