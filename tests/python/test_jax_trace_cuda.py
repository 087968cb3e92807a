"""einc under jax.jit, jax.grad and jax.vmap on a GPU: the FFI handler for
XLA's CUDA platform runs ein_eval on the CUDA backend on the stream XLA
hands it. Skipped without a JAX GPU device (scripts/gpu_check.sh runs it on
a machine with a GPU; the handler is always built, python/src/xla_ffi_abi.h)."""
import numpy as np
import pytest

import einc

jax = pytest.importorskip("jax")
jnp = jax.numpy

from einc import _einc  # noqa: E402


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


pytestmark = pytest.mark.skipif(
    _gpu() is None or "CUDA" not in _einc.xla_ffi_targets(),
    reason="no JAX GPU device, or einc built without XLA's FFI header")


def close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    assert np.linalg.norm(got - want) <= tol * max(np.linalg.norm(want), 1.0)


def on_gpu(*shapes, seed=0):
    r = np.random.default_rng(seed)
    return [jax.device_put(r.standard_normal(s).astype(np.float32), _gpu())
            for s in shapes]


def test_jit_on_the_gpu_runs_einc_in_the_program():
    q, k = on_gpu((4, 8, 64, 32), (4, 8, 64, 32))
    f = jax.jit(lambda a, b: einc.einsum("b h i d, b h j d -> b h i j", a, b))
    text = f.lower(q, k).as_text()
    assert "custom_call @einc_eval" in text and "callback" not in text
    got = f(q, k)
    assert got.devices() == {_gpu()}
    close(got, jnp.einsum("bhid,bhjd->bhij", q, k), 1e-5)
    # the stream is XLA's: a chain of dependent calls sees each result
    g = jax.jit(lambda a: einc.einsum("b h i j, b h j d -> b h i d",
                                      jax.nn.softmax(f(a, a)), a))
    close(g(q), jnp.einsum("bhij,bhjd->bhid",
                           jax.nn.softmax(jnp.einsum("bhid,bhjd->bhij", q, q)),
                           q), 1e-4)


def test_grad_and_vmap_on_the_gpu():
    x, w = on_gpu((16, 32), (32, 8), seed=1)

    def mine(a, b):
        h = einc.rearrange(einc.einsum("n d, d f -> n f", a, b),
                           "n (g f) -> n g f", g=2)
        return jnp.sum(einc.reduce(h, "n g f -> n f", "max") ** 2)

    def theirs(a, b):
        h = (a @ b).reshape(16, 2, 4)
        return jnp.sum(h.max(1) ** 2)

    for g, h in zip(jax.jit(jax.grad(mine, (0, 1)))(x, w),
                    jax.grad(theirs, (0, 1))(x, w)):
        close(g, h, 1e-5)
    xs = on_gpu((5, 16, 32), seed=2)[0]
    close(jax.vmap(lambda a: einc.einsum("n d, d f -> n f", a, w))(xs),
          jnp.einsum("bnd,df->bnf", xs, w), 1e-5)
    close(jax.vmap(jax.grad(mine), in_axes=(0, None))(xs, w),
          jax.vmap(jax.grad(theirs), in_axes=(0, None))(xs, w), 1e-5)
