"""JAX CPU arrays, when jax is installed (CI installs it: see
docs/design.md): JAX in gives JAX out, inputs taken and results handed
over without copies, dtypes (bfloat16 included), 0-d and empty arrays,
and out= refused (JAX arrays are immutable)."""
import resource

import numpy as np
import pytest

import einc

jax = pytest.importorskip("jax")
jnp = jax.numpy


def test_jax_in_jax_out():
    r = np.random.default_rng(0)
    a = jnp.asarray(r.standard_normal((5, 7)).astype(np.float32))
    b = jnp.asarray(r.standard_normal((7, 3)).astype(np.float32))
    got = einc.einsum("i j, j k -> i k", a, b)
    assert isinstance(got, jax.Array) and got.dtype == jnp.float32
    assert got.devices() == a.devices()
    np.testing.assert_allclose(np.asarray(got), np.asarray(a @ b), rtol=1e-5,
                               atol=1e-5)
    x = jnp.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(
        np.asarray(einc.rearrange(x, "a b c -> c (a b)")),
        np.asarray(x).transpose(2, 0, 1).reshape(4, 6))
    np.testing.assert_array_equal(
        np.asarray(einc.reduce(x, "a b c -> b", "max")),
        np.asarray(x).max(axis=(0, 2)))
    got = einc.reduce(x, "a b c -> c", jnp.max)  # a JAX callable
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x).max((0, 1)))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.int32,
                                   jnp.bfloat16, jnp.bool_])
def test_jax_dtypes(dtype):
    x = jnp.asarray(np.arange(12).reshape(3, 4) % 3).astype(dtype)
    got = einc.rearrange(x, "i j -> j i")
    assert isinstance(got, jax.Array) and got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.asarray(x, np.float32).T)


def test_jax_bfloat16_contraction():
    a = jnp.ones((4, 8), jnp.bfloat16)
    got = einc.einsum("i j, j k -> i k", a, a.T)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.full((4, 4), 8.0))


def test_jax_zero_d_and_empty():
    s = jnp.asarray(np.float32(3.0))
    got = einc.einsum(" -> ", s)
    assert isinstance(got, jax.Array) and got.shape == ()
    assert float(got) == 3.0
    e = jnp.zeros((0, 4))
    got = einc.einsum("i j -> j", e)
    assert got.shape == (4,)
    np.testing.assert_array_equal(np.asarray(got), np.zeros(4))


def test_jax_result_adopted_without_copy(monkeypatch):
    """The result JAX gets is the very buffer einc wrote."""
    import einc._arrays as arrays

    made = []
    real = arrays.aligned_empty
    monkeypatch.setattr(arrays, "aligned_empty",
                        lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    got = einc.rearrange(jnp.ones((64, 32)), "i j -> j i")
    assert got.unsafe_buffer_pointer() == made[0].ctypes.data


def test_jax_no_copy_of_large_input_or_result():
    """A 64 MiB transpose raises the peak resident memory by about one
    result (64 MiB), not two or three: neither the input nor the result
    was copied on the way."""
    n = 4096
    x = jnp.ones((n, n), jnp.float32)  # 64 MiB
    x.block_until_ready()
    einc.rearrange(jnp.ones((8, 8)), "i j -> j i")  # warm
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    got = einc.rearrange(x, "i j -> j i")
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert got.shape == (n, n)
    assert grew < 1.5 * 64 * 1024, f"peak grew by {grew} KiB"


def test_jax_out_refused():
    with pytest.raises(TypeError, match="immutable"):
        einc.einsum("i j -> j i", jnp.ones((2, 3)), out=jnp.zeros((3, 2)))
