"""einc under JAX's transformations (issue 25): jax.jit, jax.grad and
jax.vmap of einc.einsum, rearrange, reduce and repeat, through XLA's FFI.

Oracles: numpy in f64 for values (f32 results within 1e-5 of the
reference's norm), JAX's own autodiff of jnp.einsum and of einops on JAX
arrays for gradients (f64, 1e-12), and central finite differences
(jax.test_util.check_grads, f64, h = 1e-6, rtol 1e-6). The jaxprs and the
lowered programs hold einc's FFI custom call and no host callback.
Skipped without jax, or where einc was built without XLA's FFI header."""
import numpy as np
import pytest

import einc

jax = pytest.importorskip("jax")
jnp = jax.numpy
einops = pytest.importorskip("einops")
from jax.test_util import check_grads  # noqa: E402

from einc import _einc, _jax, _jax_prim  # noqa: E402
from test_einops_random import rearrange_case, reduce_case, repeat_case  # noqa: E402
from test_einsum_random import random_case  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _einc.xla_ffi_targets(),
    reason="einc built without XLA's FFI header (see test_unbuilt_message)")




def close(got, want, tol):
    """Within tol of the reference's norm (the project's rule)."""
    kind = np.complex128 if np.iscomplexobj(want) else np.float64
    got, want = np.asarray(got, kind), np.asarray(want, kind)
    assert got.shape == want.shape
    scale = max(np.linalg.norm(want), 1e-300)
    assert np.linalg.norm(got - want) <= tol * max(scale, 1.0), (
        np.linalg.norm(got - want), scale)


def einsum_cases(n, seed, nonempty=False):
    r = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        np_expr, ein_expr, shapes = random_case(r)
        if nonempty and any(0 in s for s in shapes):
            continue
        out.append((np_expr, ein_expr, shapes))
    return out


def arrays(shapes, seed, dtype):
    r = np.random.default_rng(seed)
    return [r.standard_normal(s).astype(dtype) for s in shapes]


# --- jit: values ------------------------------------------------------------

@pytest.mark.parametrize("case", einsum_cases(24, 11))
def test_jit_einsum_random(case):
    np_expr, ein_expr, shapes = case
    ts = arrays(shapes, 1, np.float32)
    want = np.einsum(np_expr, *[t.astype(np.float64) for t in ts])
    jt = [jnp.asarray(t) for t in ts]
    got = jax.jit(lambda *a: einc.einsum(ein_expr, *a))(*jt)
    assert got.dtype == jnp.float32
    close(got, want, 1e-5)
    close(jax.jit(lambda *a: einc.einsum(np_expr, *a))(*jt), want, 1e-5)


def test_jit_einops_random():
    """rearrange and repeat move elements: identical values; reduce within
    f32's tolerance (five reductions)."""
    for seed in range(20):
        pattern, x, lengths = rearrange_case(seed)
        got = jax.jit(lambda a: einc.rearrange(a, pattern, **lengths))(
            jnp.asarray(x.astype(np.int32)))
        np.testing.assert_array_equal(
            got, einops.rearrange(x, pattern, **lengths), err_msg=pattern)
        pattern, x, lengths = repeat_case(seed)
        got = jax.jit(lambda a: einc.repeat(a, pattern, **lengths))(
            jnp.asarray(x.astype(np.float32)))
        np.testing.assert_array_equal(
            got, einops.repeat(x, pattern, **lengths), err_msg=pattern)
        pattern, x, lengths = reduce_case(seed)
        x = np.random.default_rng(seed).standard_normal(x.shape)
        for reduction in ("sum", "mean", "max", "min", "prod"):
            got = jax.jit(lambda a: einc.reduce(a, pattern, reduction,
                                                **lengths))(
                jnp.asarray(x.astype(np.float32)))
            close(got, einops.reduce(x, pattern, reduction, **lengths), 1e-5)


def test_jit_dtypes_and_promotion():
    x = jnp.arange(12, dtype=jnp.int32).reshape(3, 4)
    got = jax.jit(lambda a: einc.einsum("i j, j k -> i k", a, a.T))(x)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(got, np.asarray(x) @ np.asarray(x).T)
    # a tracer with a numpy array: promoted as jnp.einsum promotes
    w = np.ones((4, 2), np.float32)
    got = jax.jit(lambda a: einc.einsum("i j, j k -> i k", a, w))(x)
    assert got.dtype == jnp.einsum("ij,jk->ik", x, w).dtype
    np.testing.assert_array_equal(got, np.asarray(x) @ w)
    b = jnp.asarray(np.random.default_rng(0).random((3, 4)) > 0.5)
    got = jax.jit(lambda a: einc.reduce(a, "i j -> i", "any"))(b)
    np.testing.assert_array_equal(got, np.asarray(b).any(1))
    h = jnp.ones((2, 3), jnp.bfloat16)
    got = jax.jit(lambda a: einc.einsum("i j, k j -> i k", a, a))(h)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(got, np.float32), 3.0)


def test_zero_size(x64):
    """Empty results write nothing; a sum over an empty axis is zeros; a
    max over one is refused (as numpy does) with einc's message."""
    f = jax.jit(lambda a, b: einc.einsum("i j, j k -> i k", a, b))
    np.testing.assert_array_equal(f(jnp.ones((3, 0)), jnp.ones((0, 4))), 0.0)
    assert f(jnp.ones((0, 2)), jnp.ones((2, 4))).shape == (0, 4)
    g = jax.grad(lambda a, b: einc.einsum("i j, j k -> i k", a, b).sum(),
                 (0, 1))(jnp.ones((3, 0)), jnp.ones((0, 4)))
    assert [t.shape for t in g] == [(3, 0), (0, 4)]
    with pytest.raises(Exception, match="empty axis"):
        jax.jit(lambda a: einc.reduce(a, "i j -> i", "max"))(jnp.ones((3, 0)))


def test_lists_of_tracers_are_stacked():
    x = jnp.arange(6.0).reshape(2, 3)
    got = jax.jit(lambda a, b: einc.rearrange([a, b], "n i j -> i (n j)"))(
        x, x + 1)
    np.testing.assert_array_equal(
        got, einops.rearrange([np.asarray(x), np.asarray(x) + 1],
                              "n i j -> i (n j)"))


def test_errors_at_trace_time():
    x = jnp.ones((2, 6))
    with pytest.raises(einc.EincError, match="split"):
        jax.jit(lambda a: einc.rearrange(a, "b (h d) -> b h d"))(x)
    with pytest.raises(einc.EincError):
        jax.jit(lambda a: einc.einsum("i j, j k -> i k", a, a))(x)


def test_concrete_arrays_keep_the_dlpack_path(monkeypatch):
    """Outside transformations no FFI call is made (no compile per shape)."""
    calls = []
    monkeypatch.setattr(_jax, "_differentiable",
                        lambda *a: calls.append(a) or None)
    x = jnp.ones((2, 3))
    np.testing.assert_array_equal(einc.einsum("i j -> j i", x), 1.0)
    assert calls == []


# --- the program: an FFI custom call, no callback ----------------------------

def test_program_holds_the_ffi_call_and_no_callback(x64):
    def loss(q, k):
        s = einc.einsum("b i d, b j d -> b i j", q, k)
        return einc.reduce(einc.rearrange(s, "b i j -> b (i j)"), "b n -> b",
                           "max").sum()

    q, k = (jnp.ones((2, 3, 4)), jnp.ones((2, 5, 4)))
    for f, args in ((jax.jit(loss), (q, k)),
                    (jax.jit(jax.grad(loss, (0, 1))), (q, k)),
                    (jax.vmap(jax.grad(loss)), (q[None], k[None]))):
        jaxpr = str(jax.make_jaxpr(f)(*args))
        assert "einc_einsum[" in jaxpr  # einc's primitive (issue 38)
        assert "callback" not in jaxpr
        assert "einc_eval" in jax.jit(f).lower(*args).as_text()
    text = jax.jit(jax.grad(loss, (0, 1))).lower(q, k).as_text()
    assert text.count("custom_call @einc_eval") >= 5  # 3 forward, 2+ back
    assert "callback" not in text


def test_unregistered_message(monkeypatch):
    """An einc whose extension has no handler (none since issue 38: they
    are always built) fails with a clear EincError, not an XLA crash."""
    monkeypatch.setattr(_jax._einc, "xla_ffi_targets", lambda: {})
    monkeypatch.setattr(_jax, "_registered", False)
    with pytest.raises(einc.EincError, match="no XLA FFI handler"):
        _jax._register()


# --- grad --------------------------------------------------------------------

def jnp_loss(np_expr, weights):
    return lambda *a: jnp.sum(jnp.einsum(np_expr, *a) * weights)


@pytest.mark.parametrize("case", einsum_cases(16, 12, nonempty=True))
def test_grad_einsum_random(case, x64):
    """jax.grad and jit(grad) against JAX's autodiff of jnp.einsum (f64),
    and against central differences."""
    np_expr, ein_expr, shapes = case
    ts = [jnp.asarray(t) for t in arrays(shapes, 2, np.float64)]
    out_shape = np.einsum(np_expr, *[np.zeros(s) for s in shapes]).shape
    w = jnp.asarray(np.random.default_rng(3).standard_normal(out_shape))
    mine = lambda *a: jnp.sum(einc.einsum(ein_expr, *a) * w)  # noqa: E731
    argnums = tuple(range(len(ts)))
    want = jax.grad(jnp_loss(np_expr, w), argnums)(*ts)
    for got in (jax.grad(mine, argnums)(*ts),
                jax.jit(jax.grad(mine, argnums))(*ts)):
        for g, h in zip(got, want):
            close(g, h, 1e-12)
    check_grads(mine, ts, order=1, modes=["rev"], eps=1e-6, atol=1e-6,
                rtol=1e-6)


REDUCTIONS = ("sum", "mean", "max", "min", "prod")


@pytest.mark.parametrize("seed", range(6))
def test_grad_einops_random(seed, x64):
    """rearrange, repeat and the five reductions: jit(grad) against einops
    on JAX arrays (JAX's own autodiff); one of the seven per seed also
    against central differences (eager, so the cheap share)."""
    r = np.random.default_rng(seed)
    calls = []
    for make, fn, extra in ((rearrange_case, einops.rearrange, [()]),
                            (repeat_case, einops.repeat, [()]),
                            (reduce_case, einops.reduce,
                             [(red,) for red in REDUCTIONS])):
        pattern, x, lengths = make(seed)
        x = jnp.asarray(r.uniform(0.5, 1.5, x.shape) * r.choice([-1, 1],
                                                                x.shape))
        calls += [(fn, pattern, args, lengths, x) for args in extra]
    for i, (fn, pattern, args, lengths, x) in enumerate(calls):
        ours = getattr(einc, fn.__name__)
        w = jnp.asarray(r.standard_normal(fn(x, pattern, *args,
                                             **lengths).shape))

        def mine(a):
            return jnp.sum(ours(a, pattern, *args, **lengths) * w)

        def theirs(a):
            return jnp.sum(fn(a, pattern, *args, **lengths) * w)

        close(jax.jit(jax.grad(mine))(x), jax.grad(theirs)(x), 1e-12)
        if i == seed % len(calls):
            check_grads(mine, (x,), order=1, modes=["rev"], eps=1e-6,
                        atol=1e-6, rtol=1e-6)


def test_grad_prod_with_zeros_and_max_ties(x64):
    """prod is exact at zeros (one zero, two zeros); max shares ties
    evenly (torch.amax's rule)."""
    x = jnp.asarray([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]])
    got = jax.grad(lambda a: einc.reduce(a, "i j -> i", "prod").sum())(x)
    np.testing.assert_allclose(got, [[6, 0, 0], [0, 0, 0], [8, 4, 2]])
    t = jnp.asarray([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    got = jax.grad(lambda a: einc.reduce(a, "i j -> i", "max").sum())(t)
    np.testing.assert_allclose(got, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])


def test_grad_of_grad(x64):
    """The backward's einsums are einc calls with VJPs of their own."""
    r = np.random.default_rng(5)
    a, b = (jnp.asarray(r.standard_normal(s)) for s in ((3, 4), (4, 5)))

    def f(x, y):
        return jnp.sum(jnp.sin(einc.einsum("i j, j k -> i k", x, y)))

    check_grads(f, (a, b), order=2, modes=["rev"], eps=1e-6, atol=1e-6,
                rtol=1e-6)


def test_complex_grad_follows_jax(x64):
    """JAX's convention (the VJP transposes the JVP, no conjugation)."""
    r = np.random.default_rng(6)
    a, b = (jnp.asarray(r.standard_normal(s) + 1j * r.standard_normal(s))
            for s in ((3, 4), (4, 2)))

    def mine(x, y):
        return jnp.real(jnp.sum(einc.einsum("i j, j k -> i k", x, y) ** 2))

    def theirs(x, y):
        return jnp.real(jnp.sum(jnp.einsum("ij,jk->ik", x, y) ** 2))

    for g, h in zip(jax.grad(mine, (0, 1))(a, b),
                    jax.grad(theirs, (0, 1))(a, b)):
        close(g, h, 1e-12)


# --- vmap --------------------------------------------------------------------

@pytest.mark.parametrize("case", einsum_cases(8, 13, nonempty=True))
def test_vmap_einsum_random(case, x64):
    """vmap over random axes of some inputs (one einc call for the batch),
    and vmap of grad, grad of vmap."""
    np_expr, ein_expr, shapes = case
    r = np.random.default_rng(7)
    axes = [int(r.integers(0, len(s) + 1)) if r.random() < 0.7 else None
            for s in shapes]
    if all(a is None for a in axes):
        axes[0] = 0
    ts = [jnp.asarray(np.moveaxis(r.standard_normal((3,) + s), 0, a))
          if a is not None else jnp.asarray(r.standard_normal(s))
          for s, a in zip(shapes, axes)]
    for expr in (ein_expr, np_expr):
        got = jax.vmap(lambda *a: einc.einsum(expr, *a), in_axes=axes)(*ts)
        want = jax.vmap(lambda *a: jnp.einsum(np_expr, *a), in_axes=axes)(*ts)
        close(got, want, 1e-12)
        mine = lambda *a: jnp.sum(einc.einsum(expr, *a) ** 2)  # noqa: E731
        theirs = lambda *a: jnp.sum(jnp.einsum(np_expr, *a) ** 2)  # noqa
        arg = tuple(range(len(ts)))
        got = jax.jit(jax.vmap(jax.grad(mine, arg), in_axes=axes))(*ts)
        want = jax.vmap(jax.grad(theirs, arg), in_axes=axes)(*ts)
        for g, h in zip(got, want):
            close(g, h, 1e-12)
        summed = lambda *a: jnp.sum(jax.vmap(mine, in_axes=axes)(*a))  # noqa
        summed_ref = lambda *a: jnp.sum(jax.vmap(theirs, in_axes=axes)(*a))  # noqa
        for g, h in zip(jax.grad(summed, arg)(*ts),
                        jax.grad(summed_ref, arg)(*ts)):
            close(g, h, 1e-12)


def test_vmap_is_one_call_with_a_batch_axis():
    q, k = jnp.ones((5, 3, 4)), jnp.ones((6, 4))
    f = jax.vmap(lambda a: einc.einsum("i d, j d -> i j", a, k))
    text = jax.jit(f).lower(q).as_text()
    assert text.count("custom_call @einc_eval") == 1
    assert 'expr = "vmap0 i d, j d ->vmap0 i j"' in text


def test_vmap_nested_and_reductions(x64):
    r = np.random.default_rng(8)
    x = jnp.asarray(r.standard_normal((2, 3, 4, 5)))
    for red in REDUCTIONS:
        f = jax.vmap(jax.vmap(lambda a: einc.reduce(a, "i j -> j", red)),
                     in_axes=2)
        want = jax.vmap(jax.vmap(lambda a: einops.reduce(a, "i j -> j", red)),
                        in_axes=2)(x)
        close(f(x), want, 1e-12)
        g = jax.grad(lambda a: jnp.sum(f(a) ** 2))(x)
        h = jax.grad(lambda a: jnp.sum(jax.vmap(jax.vmap(
            lambda b: einops.reduce(b, "i j -> j", red)), in_axes=2)(a) ** 2))(x)
        close(g, h, 1e-12)


def test_vmap_numpy_implicit_output():
    """numpy's implicit output ('...' first, then letters by code:
    upper case before lower) made explicit for the batch axis."""
    r = np.random.default_rng(9)
    a = jnp.asarray(r.standard_normal((4, 2, 3)).astype(np.float32))
    b = jnp.asarray(r.standard_normal((3, 5)).astype(np.float32))
    for expr in ("bA,Ac", "Ba,ac", "...a,ac"):
        got = jax.vmap(lambda x: einc.einsum(expr, x, b, numpy=True))(a)
        want = jax.vmap(lambda x: jnp.einsum(expr, x, b))(a)
        close(got, want, 1e-5)


def test_vmap_sequential_fallback(monkeypatch):
    """Where no axis name is free the batch runs one call at a time."""
    monkeypatch.setattr(_jax_prim, "_fresh_name", lambda expr, numpy: None)
    r = np.random.default_rng(10)
    a = jnp.asarray(r.standard_normal((4, 2, 3)).astype(np.float32))
    b = jnp.asarray(r.standard_normal((3, 5)).astype(np.float32))
    f = jax.vmap(lambda x: einc.einsum("i j, j k -> i k", x, b))
    close(f(a), jnp.einsum("nij,jk->nik", a, b), 1e-5)
    assert 'expr = "i j, j k -> i k"' in jax.jit(f).lower(a).as_text()


# --- the example -------------------------------------------------------------

def test_train_example(capsys):
    """examples/train_jax.py: the transformer block with einc and with
    jnp.einsum/einops trains to the same losses under jit(grad)."""
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location(
        "train_jax", ROOT / "examples" / "train_jax.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(["--steps", "6"]) == 0
    assert "same losses" in capsys.readouterr().out
