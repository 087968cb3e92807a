"""Forward-mode AD in JAX (issue 38 item 2; docs/design.md, "JAX
transformations"): jax.jvp, jacfwd and hessian of einc's functions, which
JAX refused for the custom_vjp einc's call was ("can't apply
forward-mode autodiff (jvp) to a custom_vjp function").

einc's call is the primitive einc_einsum, whose JVP rule runs the C
library's JVP programs and whose transpose rule (sum and mean) the
gradient programs. Oracles: JAX's own forward AD of jnp.einsum, jnp's
reductions and einops on JAX arrays (f64: 1e-12 of the reference's norm;
f32: 1e-5), and central differences to second order
(jax.test_util.check_grads, f64, eps 1e-6, rtol 1e-6; max and min at
eps 1e-8, where a step must not cross a tie). Two sizes each (JAX has no
lowering bound: every call is the primitive).
"""
import numpy as np
import pytest

import einc

jax = pytest.importorskip("jax")
jnp = jax.numpy
einops = pytest.importorskip("einops")
from jax.test_util import check_grads  # noqa: E402

import einc.einops as ee  # noqa: E402
from einc import _einc  # noqa: E402

# every test in f64 (conftest.py's x64)
pytestmark = [pytest.mark.skipif(not _einc.xla_ffi_targets(),
                                 reason="einc built without XLA's FFI header"),
              pytest.mark.usefixtures("x64")]


# name: (einc's call, the reference, small input shapes, larger)
CASES = {
    "matmul": (lambda a, b: einc.einsum("b i j, b j k -> b i k", a, b),
               lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
               [(2, 3, 4), (2, 4, 5)], [(4, 40, 30), (4, 30, 20)]),
    "chain": (lambda a, b, c: einc.einsum("i j, j k, k l -> i l", a, b, c),
              lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c),
              [(3, 4), (4, 5), (5, 2)], [(30, 40), (40, 50), (50, 20)]),
    "diagonal": (lambda a, b: einc.einsum("i i, i j -> j", a, b),
                 lambda a, b: jnp.einsum("ii,ij->j", a, b),
                 [(3, 3), (3, 4)], [(30, 30), (30, 60)]),
    "numpy": (lambda a, b: einc.einsum("ij,jk", a, b),
              lambda a, b: jnp.einsum("ij,jk", a, b),
              [(3, 4), (4, 5)], [(30, 40), (40, 50)]),
    "rearrange": (lambda a: einc.rearrange(a, "a (b c) -> c a b", c=2),
                  lambda a: einops.rearrange(a, "a (b c) -> c a b", c=2),
                  [(3, 4)], [(30, 40)]),
    "repeat": (lambda a: einc.repeat(a, "a b -> a c b", c=3),
               lambda a: einops.repeat(a, "a b -> a c b", c=3),
               [(3, 4)], [(30, 40)]),
    "sum": (lambda a: einc.reduce(a, "a b c -> a c", "sum"),
            lambda a: a.sum(1), [(3, 4, 5)], [(20, 10, 30)]),
    "mean": (lambda a: einc.reduce(a, "a b c -> a c", "mean"),
             lambda a: a.mean(1), [(3, 4, 5)], [(20, 10, 30)]),
    "max": (lambda a: einc.reduce(a, "a b c -> a c", "max"),
            lambda a: a.max(1), [(3, 4, 5)], [(20, 10, 30)]),
    "min": (lambda a: einc.reduce(a, "a b c -> c a", "min"),
            lambda a: a.min(1).T, [(3, 4, 5)], [(20, 10, 30)]),
    "prod": (lambda a: einc.reduce(a, "a b c -> a c", "prod"),
             lambda a: a.prod(1), [(3, 4, 5)], [(20, 10, 30)]),
    "einops.einsum": (lambda a, b: ee.einsum(a, b, "b i j, b j k -> b i k"),
                      lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
                      [(2, 3, 4), (2, 4, 5)], [(4, 40, 30), (4, 30, 20)]),
    "einops.reduce": (lambda a: ee.reduce(a, "a b -> b", "max"),
                      lambda a: einops.reduce(a, "a b -> b", "max"),
                      [(3, 4)], [(30, 40)]),
}
NAMES = sorted(CASES)
EXTREMA = ("max", "min", "einops.reduce")


def _inputs(name, shapes, dtype, seed):
    """Seeded inputs and tangents; prod's magnitudes in [0.5, 1.5]."""
    r = np.random.default_rng(seed)
    xs, ts = [], []
    for s in shapes:
        x = r.standard_normal(s)
        if name == "prod":
            x = r.choice([-1.0, 1.0], s) * r.uniform(0.5, 1.5, s)
        xs.append(jnp.asarray(x.astype(dtype)))
        ts.append(jnp.asarray(r.standard_normal(s).astype(dtype)))
    return tuple(xs), tuple(ts)


def close(got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)
    assert err <= tol, f"relative error {err:.3g}"


@pytest.mark.parametrize("size", ["small", "larger"])
@pytest.mark.parametrize("name", NAMES)
def test_jvp(name, size):
    """jax.jvp and jit(jvp) against the reference's forward AD."""
    f, reference, small, larger = CASES[name]
    xs, ts = _inputs(name, small if size == "small" else larger,
                     np.float64, 1)
    want_out, want = jax.jvp(reference, xs, ts)
    for jvp in (jax.jvp, jax.jit(jax.jvp, static_argnums=0)):
        out, tangent = jvp(f, xs, ts)
        close(out, want_out, 1e-12)
        close(tangent, want, 1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_against_differences(name):
    """Forward and reverse mode to second order against central
    differences (check_grads)."""
    f, _, small, _ = CASES[name]
    xs, _ = _inputs(name, small, np.float64, 2)
    eps = 1e-8 if name in EXTREMA else 1e-6
    check_grads(f, xs, order=2, modes=["fwd", "rev"], eps=eps, atol=1e-6,
                rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_jacfwd_and_hessian(name):
    """jacfwd (vmap of jvp: the batching rule adds a batch axis) and the
    hessian of a scalar of the call (jacfwd of grad), against the
    reference's, jitted."""
    f, reference, small, _ = CASES[name]
    xs, _ = _inputs(name, small, np.float64, 3)

    def scalar(call):
        return lambda *a: (call(*a) ** 2).sum()

    for k in range(len(xs)):
        close(jax.jit(jax.jacfwd(f, argnums=k))(*xs),
              jax.jacfwd(reference, argnums=k)(*xs), 1e-12)
        close(jax.jit(jax.hessian(scalar(f), argnums=k))(*xs),
              jax.hessian(scalar(reference), argnums=k)(*xs), 1e-12)


@pytest.mark.parametrize("name", ["matmul", "max", "prod", "diagonal"])
def test_float32(name):
    f, reference, _, larger = CASES[name]
    xs, ts = _inputs(name, larger, np.float32, 4)
    close(jax.jvp(f, xs, ts)[1], jax.jvp(reference, xs, ts)[1], 1e-5)


def test_ties_and_zeros():
    """max's tangent averages ties (jnp.max's rule); prod's product rule
    is exact at zeros."""
    x = jnp.asarray([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    t = jnp.asarray([[5.0, 1.0, 3.0], [1.0, 2.0, 6.0]])
    got = jax.jvp(lambda a: einc.reduce(a, "i j -> i", "max"), (x,), (t,))[1]
    np.testing.assert_allclose(got, [2.0, 3.0])
    np.testing.assert_allclose(got, jax.jvp(lambda a: a.max(1), (x,), (t,))[1])
    z = jnp.asarray([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]])
    ones = jnp.ones_like(z)
    got = jax.jvp(lambda a: einc.reduce(a, "i j -> i", "prod"), (z,),
                  (ones,))[1]
    np.testing.assert_allclose(got, [6.0, 0.0, 14.0])


def test_vmap_of_jvp_is_one_call():
    """jacfwd batches the JVP program's einsum into one call with a batch
    axis, as vmap does any call."""
    a = jnp.ones((3, 4))
    b = jnp.ones((4, 5))
    text = jax.jit(jax.jacfwd(lambda x: einc.einsum("i j, j k -> i k", x, b))
                   ).lower(a).as_text()
    assert 'expr = "vmap0 i j, j k ->vmap0 i k"' in text


def test_integer_inputs_have_no_tangent():
    """An integer call inside a differentiated function: no tangent (float0),
    as jnp's."""
    def f(x):
        # an integer tracer (through the traced x), with no tangent
        i = jnp.arange(6).reshape(2, 3) * (x[0] > 0).astype(jnp.int64)
        return x * einc.reduce(i, "a b -> a", "sum").astype(x.dtype)

    out, tangent = jax.jvp(f, (jnp.ones(2),), (jnp.ones(2),))
    np.testing.assert_allclose(tangent, [3.0, 12.0])
