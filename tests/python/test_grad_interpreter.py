"""Which interpreter runs a gradient program (docs/design.md, "One
gradient interpreter"): eager calls on host memory go to the C library's
(_einc.grad_run), traced ones lower to framework operations; both give
the framework's own gradient (f64, 1e-12 relative to its norm)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import einc  # noqa: E402

CASES = [  # (expression, reduction, input shapes): every elementwise map
    ("b i j, b j k -> b i k", "sum", [(3, 40, 50), (3, 50, 30)]),
    ("a b -> a", "max", [(60, 70)]),
    ("a b -> b", "prod", [(60, 70)]),
    ("a b -> a", "mean", [(60, 70)]),
    ("i i j, j k -> i k", "sum", [(40, 40, 30), (30, 20)]),
]


# Every call on einc's own path (conftest.py's einc_kernels).
pytestmark = pytest.mark.usefixtures("einc_kernels")


def _count(module, name, monkeypatch):
    calls = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def _close(got, want):
    scale = max(float(abs(want).max()), 1.0)
    assert float(abs(got - want).max()) <= 1e-12 * scale


def _call(expr, reduction, xs):
    if reduction == "sum":
        return einc.einsum(expr, *xs)
    return einc.reduce(xs[0], expr, reduction)


def _torch_reference(expr, reduction, xs):
    if reduction == "sum":
        return torch.einsum(expr.replace(" ", ""), *xs)
    dim = 1 if expr == "a b -> a" else 0
    fn = {"max": lambda t: t.amax(dim), "prod": lambda t: t.prod(dim),
          "mean": lambda t: t.mean(dim)}[reduction]
    return fn(xs[0])


@pytest.mark.parametrize("expr,reduction,shapes", CASES)
def test_torch_eager_backward_runs_in_c(expr, reduction, shapes,
                                         monkeypatch):
    from einc import _torch_grad

    calls = _count(_torch_grad, "_in_c", monkeypatch)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s, generator=g, dtype=torch.float64,
                      requires_grad=True) for s in shapes]
    out = _call(expr, reduction, xs)
    dout = torch.randn(out.shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad(out, xs, dout)
    want = torch.autograd.grad(_torch_reference(expr, reduction, xs), xs,
                               dout)
    assert len(calls) == len(xs)
    for a, b in zip(got, want):
        _close(a, b)


def test_torch_complex_conjugates_in_c(monkeypatch):
    from einc import _torch_grad

    calls = _count(_torch_grad, "_in_c", monkeypatch)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(s, generator=g, dtype=torch.complex128,
                      requires_grad=True) for s in [(30, 40), (40, 20)]]
    out = einc.einsum("i j, j k -> i k", *xs)
    dout = torch.randn(out.shape, generator=g, dtype=torch.complex128)
    got = torch.autograd.grad(out, xs, dout)
    want = torch.autograd.grad(xs[0] @ xs[1], xs, dout)
    assert len(calls) == 2
    for a, b in zip(got, want):
        _close(a, b)


def test_torch_double_backward_lowers(monkeypatch):
    """create_graph records the gradient: the lowering, differentiable
    (the second backward, plain, runs the einsum steps' programs in C)."""
    from einc import _torch_grad

    calls = _count(_torch_grad, "_in_c", monkeypatch)
    x = torch.randn(60, 70, dtype=torch.float64, requires_grad=True)
    gx, = torch.autograd.grad(einc.reduce(x, "a b -> a", "prod").sum(), x,
                              create_graph=True)
    assert not calls
    hx, = torch.autograd.grad(gx.sum(), x)
    gw, = torch.autograd.grad(x.prod(1).sum(), x, create_graph=True)
    hw, = torch.autograd.grad(gw.sum(), x)
    _close(gx.detach(), gw.detach())
    _close(hx, hw)


def test_jax_eager_in_c_jit_lowered(monkeypatch, x64):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from einc import _jax_grad

    calls = _count(_jax_grad, "_in_c", monkeypatch)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal((30, 40)))
    w = jnp.asarray(rng.standard_normal((40, 20)))

    def f(x, w):
        return (einc.einsum("i j, j k -> i k", x, w) ** 2).sum()

    want = jax.grad(lambda x, w: ((x @ w) ** 2).sum(), (0, 1))(x, w)
    eager = jax.grad(f, (0, 1))(x, w)
    assert len(calls) == 2
    jitted = jax.jit(jax.grad(f, (0, 1)))(x, w)
    assert len(calls) == 2
    for a, b, c in zip(eager, jitted, want):
        _close(np.asarray(a), np.asarray(c))
        _close(np.asarray(b), np.asarray(c))
    t = jnp.asarray(rng.standard_normal((30, 40)))
    _, tan = jax.jvp(lambda x: einc.reduce(x, "a b -> a", "prod"), (x,),
                     (t,))
    _, ref = jax.jvp(lambda x: x.prod(1), (x,), (t,))
    assert len(calls) == 3
    _close(np.asarray(tan), np.asarray(ref))


@pytest.mark.parametrize("reduction", ["sum", "max", "prod"])
def test_jax_eager_bfloat16_grad(reduction, x64):
    """Eager jax.grad of bfloat16 arrays (jnp steps: numpy's bfloat16 has
    no DLPack export for the C route's buffers) as the float64 gradient,
    within 2e-2 of its norm; was a BufferError."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, (6, 7))
    w = rng.standard_normal((7, 5))

    def f(x, reduce_fn, w):
        return reduce_fn(x, w).astype(jnp.float64).sum()

    def ours(x, w):
        if reduction == "sum":
            return einc.einsum("i j, j k -> i k", x, w)
        return einc.reduce(x, "i j -> i", reduction)

    def ref(x, w):
        if reduction == "sum":
            return x @ w
        return x.max(1) if reduction == "max" else x.prod(1)

    got = jax.grad(f)(jnp.asarray(x, jnp.bfloat16), ours,
                      jnp.asarray(w, jnp.bfloat16))
    want = np.asarray(jax.grad(f)(jnp.asarray(x), ref, jnp.asarray(w)))
    assert got.dtype == jnp.bfloat16
    err = np.abs(np.asarray(got, np.float64) - want).max()
    assert err <= 2e-2 * np.linalg.norm(want)
