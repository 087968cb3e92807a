"""einc.einops against einops itself (issue 27): same values, shapes and
dtypes; einops' rules (rearrange neither reduces nor repeats, reduce
adds no axis); errors are einops.EinopsError and einc.EincError."""
import numpy as np
import pytest

import einc
from einc import einops as E

einops = pytest.importorskip("einops")
rng = np.random.default_rng(27)

CASES = [
    ("rearrange", "b h w -> w b h", {}),
    ("rearrange", "b (h d) w -> b h d w", {"h": 2}),
    ("rearrange", "b h w -> b (w h)", {}),
    ("rearrange", "b ... -> ... b", {}),
    ("reduce", "b h w -> b h", {"reduction": "max"}),
    ("reduce", "b h w -> b 1 w", {"reduction": "mean"}),
    ("reduce", "b (h 2) w -> b h w", {"reduction": "sum"}),
    ("reduce", "b h w -> b w", {"reduction": np.min}),
    ("reduce", "b h w -> w h b", {"reduction": "rearrange"}),
    ("repeat", "b h w -> b h w c", {"c": 3}),
    ("repeat", "b h w -> (b 2) h w", {}),
]


@pytest.mark.parametrize("fn,pattern,kw", CASES)
def test_same_as_einops(fn, pattern, kw):
    x = rng.random((2, 4, 6))
    kw = dict(kw)
    args = (kw.pop("reduction"),) if "reduction" in kw else ()
    want = getattr(einops, fn)(x, pattern, *args, **kw)
    got = getattr(E, fn)(x, pattern, *args, **kw)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_einsum_pack_unpack_parse_shape_asnumpy():
    a, b = rng.random((3, 4)), rng.random((4, 5))
    np.testing.assert_allclose(E.einsum(a, b, "i j, j k -> i k"),
                               einops.einsum(a, b, "i j, j k -> i k"),
                               rtol=1e-12)
    xs = [rng.random((2, 3)), rng.random((2, 3, 4))]
    got, ps = E.pack(xs, "a b *")
    want, wps = einops.pack(xs, "a b *")
    assert ps == wps
    np.testing.assert_array_equal(got, want)
    for g, w in zip(E.unpack(got, ps, "a b *"), einops.unpack(want, wps, "a b *")):
        np.testing.assert_array_equal(g, w)
    x = np.zeros((2, 3, 5))
    assert E.parse_shape(x, "b _ w") == einops.parse_shape(x, "b _ w")
    assert isinstance(E.asnumpy(x), np.ndarray)


@pytest.mark.parametrize("call", [
    lambda x: E.rearrange(x, "b h w -> b w"),         # reduces
    lambda x: E.rearrange(x, "b h w -> b h w c", c=2),  # adds an axis
    lambda x: E.reduce(x, "b h w -> b c", "sum", c=2),  # adds an axis
    lambda x: E.repeat(x, "b h w -> b w c", c=2),      # reduces
    lambda x: E.rearrange(x, "b h -> b h"),            # rank
    lambda x: E.reduce(x, "b h w -> b", "median"),     # unknown reduction
])
def test_einops_rules_and_error_types(call):
    x = np.zeros((2, 3, 4))
    for _ in range(2):  # planned, then the table
        with pytest.raises(einops.EinopsError) as e:
            call(x)
        assert isinstance(e.value, einc.EincError)
        assert isinstance(e.value, E.EinopsError)


def test_einsum_errors_as_einops():
    x = np.zeros((2, 3))
    with pytest.raises(ValueError):
        E.einsum(x, "i j")
    with pytest.raises(NotImplementedError):
        E.einsum(x, "(i j) -> i")
    with pytest.raises(einops.EinopsError):
        E.einsum(x, "i j -> k")


def test_torch_and_lists():
    torch = pytest.importorskip("torch")
    t = torch.randn(2, 3, 4)
    assert torch.equal(E.rearrange(t, "a b c -> c a b"),
                       einops.rearrange(t, "a b c -> c a b"))
    got = E.rearrange([t, t], "n a b c -> a n b c")
    assert isinstance(got, torch.Tensor) and got.shape == (2, 2, 3, 4)


def test_jax_lists_and_zero_size_stay_jax():
    """issue 27's JAX bugs: a list of JAX arrays gave a numpy array; a
    zero-size result raised (not aligned ... copy=False)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    a = jnp.arange(6.0).reshape(2, 3)
    got = einc.rearrange([a, a + 1], "n x y -> x n y")
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(np.asarray(got),
                                  np.stack([a, a + 1], 1))
    packed, ps = einc.pack([a, jnp.ones((2, 3, 4))], "x *")
    assert isinstance(packed, jax.Array) and packed.shape == (2, 15)
    empty = einc.einsum("a b -> b a", jnp.ones((0, 3)))
    assert isinstance(empty, jax.Array) and empty.shape == (3, 0)
    assert einc.einsum("i j, j k -> i k", jnp.ones((2, 0)),
                       jnp.ones((0, 3))).shape == (2, 3)


# --- size-1 broadcasting in einsum (issue 38 item 5) -------------------------

BROADCASTS = [
    ("b i, b i -> b", (4, 3), (1, 3)),
    ("b i, b i -> b i", (1, 3), (4, 1)),
    ("b h i, h j -> b i j", (2, 1, 3), (5, 4)),
    ("... i, ... i -> ...", (2, 1, 3), (4, 3)),
]


@pytest.mark.parametrize("pattern,sa,sb", BROADCASTS)
def test_einsum_broadcasts_size_one_as_einops(pattern, sa, sb):
    """einops hands the backend's einsum the pattern in numpy's letters,
    which broadcasts a size-1 dim against a named axis; so does
    einc.einops.einsum, on numpy, torch and JAX, first call and cached."""
    r = np.random.default_rng(38)
    a, b = r.standard_normal(sa), r.standard_normal(sb)
    want = einops.einsum(a, b, pattern)
    for _ in range(2):  # the Python function, then the builtin's table
        np.testing.assert_allclose(E.einsum(a, b, pattern), want, rtol=1e-12)
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for _ in range(2):
        torch.testing.assert_close(E.einsum(ta, tb, pattern),
                                   einops.einsum(ta, tb, pattern),
                                   rtol=1e-12, atol=1e-12)
    jax = pytest.importorskip("jax")
    ja, jb = jax.numpy.asarray(a, np.float32), jax.numpy.asarray(b, np.float32)
    np.testing.assert_allclose(E.einsum(ja, jb, pattern),
                               einops.einsum(ja, jb, pattern), rtol=1e-5)


def test_einsum_broadcast_with_grad_and_compile():
    """The broadcast on torch's autograd and under torch.compile."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(38)
    a = torch.randn(4, 3, generator=g, dtype=torch.float64,
                    requires_grad=True)
    b = torch.randn(1, 3, generator=g, dtype=torch.float64,
                    requires_grad=True)
    got = E.einsum(a, b, "b i, b i -> b")
    want = einops.einsum(a, b, "b i, b i -> b")
    torch.testing.assert_close(got, want)
    ga = torch.autograd.grad(got.sum(), (a, b))
    wa = torch.autograd.grad(want.sum(), (a, b))
    for x, y in zip(ga, wa):
        torch.testing.assert_close(x, y)
    compiled = torch.compile(lambda x, y: E.einsum(x, y, "b i, b i -> b"),
                             fullgraph=True)
    torch.testing.assert_close(compiled(a.detach(), b.detach()),
                               want.detach())


def test_einsum_errors_name_the_axes():
    """A size that no broadcast explains is reported with the pattern's
    names (einc's einops dialect finds it)."""
    with pytest.raises(einops.EinopsError, match="axis 'batch' is 2"):
        E.einsum(np.zeros((4, 3)), np.zeros((2, 3)),
                 "batch i, batch i -> batch")


def _in(lib, a):
    if lib == "torch":
        return pytest.importorskip("torch").from_numpy(a.copy())
    if lib == "jax":
        return pytest.importorskip("jax").numpy.asarray(a)
    return a


@pytest.mark.parametrize("lib", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32",
                                   "int64", "bool", "float16", "float64"])
@pytest.mark.parametrize("reduction", ["sum", "prod", "any", "all", "max"])
def test_reduce_dtype_as_einops(lib, dtype, reduction):
    """reduce's result has the dtype and values einops' backend gives: a
    sum or product of small integers or bools promoted (600 threes of
    int8 sum to 1800, not a wrapped 8-bit value), any and all as bool
    (torch's uint8 any stays uint8), max unchanged. Both sides run the
    same pattern through the builtin path and the general one (an axis
    length given)."""
    a = (np.arange(2 * 600).reshape(2, 600) % 3 + 1).astype(dtype)
    x = _in(lib, a)
    for pattern, kw in (("a b -> a", {}), ("a (b c) -> a", {"c": 2})):
        want = einops.reduce(x, pattern, reduction, **kw)
        got = E.reduce(x, pattern, reduction, **kw)
        assert type(got) is type(want) and got.dtype == want.dtype, (
            got.dtype, want.dtype)
        if dtype.startswith("float"):  # (a product's order rounds)
            np.testing.assert_allclose(np.asarray(got, np.float64),
                                       np.asarray(want, np.float64),
                                       rtol=1e-12 if dtype == "float64"
                                       else 2e-2)
        else:
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("lib", ["numpy", "torch", "jax"])
def test_reduce_mean_of_integers_raises_as_einops(lib):
    x = _in(lib, np.ones((2, 3), np.int32))
    with pytest.raises(NotImplementedError, match="non-floating"):
        einops.reduce(x, "a b -> a", "mean")
    with pytest.raises(NotImplementedError, match="non-floating"):
        E.reduce(x, "a b -> a", "mean")


def test_reduce_sum_that_needs_grad_stays_in_c():
    """A float sum of a torch tensor that needs grad is still served by
    the builtin's graph path (the integer refusal keeps it open): no
    Python frame of einc.einops runs."""
    torch = pytest.importorskip("torch")
    import sys

    x = torch.randn(4, 6, requires_grad=True)
    E.reduce(x, "a b -> a", "sum")  # planned
    frames = []

    def tracer(frame, event, arg):
        if event == "call" and "einc" in frame.f_code.co_filename:
            frames.append(frame.f_code.co_name)

    sys.setprofile(tracer)
    try:
        y = E.reduce(x, "a b -> a", "sum")
    finally:
        sys.setprofile(None)
    assert y.requires_grad
    assert "_reduce" not in frames, frames
    torch.testing.assert_close(y, x.sum(1))
