"""Checks of python/einc against references outside einc (einops, numpy,
opt_einsum, torch, finite differences), written for the mutants of
scripts/mutants.py's python/einc samples that no test killed
(bench/results/2026-11-29-mutants-python.md names each): every assertion
here compares with what the reference library does or gives, or with a
rule the docstrings state."""
import numpy as np
import pytest

import einc
from einc import einops as E

einops = pytest.importorskip("einops")


def test_einops_reduce_with_a_callable_adds_no_axis():
    """einops.reduce never adds an axis, whatever the reduction: a
    callable one raises EinopsError as einops' own does (einc's reduce
    by a callable rearranges first, which could repeat)."""
    x = np.random.default_rng(40).random((2, 3))
    with pytest.raises(einops.EinopsError):
        einops.reduce(x, "a b -> a c", np.max, c=2)
    with pytest.raises(einops.EinopsError):
        E.reduce(x, "a b -> a c", np.max, c=2)


@pytest.mark.parametrize("pattern", ["... ->", "a ... ->", "... -> ()"])
def test_einops_reduce_of_a_list_to_0d_has_einops_type(pattern):
    """A list of tensors reduced to 0-d: a numpy scalar or a 0-d array as
    einops gives it (the rank of '...' counts the stacking axis)."""
    xs = [np.arange(3.0), np.arange(3.0) + 1]
    want = einops.reduce(xs, pattern, "sum")
    got = E.reduce(xs, pattern, "sum")
    assert type(got) is type(want) and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)


def test_one_letter_terms_read_as_einops():
    """An expression whose terms have one letter each reads the same in
    both dialects, so it is read as einops' (einc.einsum's docstring):
    named axes do not broadcast there, where numpy's einsum broadcasts a
    size-1 dim; numpy=True gives numpy's result."""
    a, b = np.ones(1), np.arange(3.0)
    with pytest.raises(einc.EincError, match="broadcast"):
        einc.einsum("i,i->i", a, b)
    np.testing.assert_array_equal(einc.einsum("i,i->i", a, b, numpy=True),
                                  np.einsum("i,i->i", a, b))


@pytest.mark.parametrize("eq,sa,sb", [("i,i->i", (1,), (3,)),
                                      ("i,i->", (3,), (3,)),
                                      ("ij,jk->ik", (2, 3), (3, 4)),
                                      ("i,i->", (1,), (3,)),
                                      ("i,i->", (1,), (1,)),
                                      ("ij,jk->ik", (2, 1), (1, 4)),
                                      ("ij,jk->ik", (2, 3), (1, 4)),
                                      ("ij,ij->i", (2, 3), (1, 3)),
                                      ("...j,...j->...", (2, 3), (1, 3)),
                                      ("bij,bjk->bik", (1, 2, 3),
                                       (4, 3, 5))])
def test_torch_dropin_under_autocast_as_torch(eq, sa, sb):
    """einc.torch.einsum under torch.autocast (CPU, bfloat16) as
    torch.einsum there: numpy's letters (a size-1 dim broadcasts), the
    result's dtype (a contraction is cast, a product without a sum is
    not, nor a sum over an axis only one input has with a size other
    than 1), its values within bfloat16's tolerance."""
    torch = pytest.importorskip("torch")
    import einc.torch as et

    g = torch.Generator().manual_seed(40)
    a, b = torch.randn(sa, generator=g), torch.randn(sb, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.einsum(eq, a, b)
        got = et.einsum(eq, a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.double(), want.double(), rtol=2e-2,
                               atol=2e-2 * float(want.double().norm()))


def _prod_grads(torch, reduce_prod):
    """The gradient of a prod over b of x (a, b) weighted by w, and its
    derivative along v (create_graph: einc's gradient program lowered to
    torch operations), in float64. Rows: no zero, one zero, two zeros, no
    zero; -1 in two of them (a division by x must divide by -1)."""
    x = torch.tensor([[2.0, -1.0, 3.0], [0.0, 4.0, -1.0], [0.0, 0.0, 5.0],
                      [1.5, -2.0, 0.5]], dtype=torch.float64,
                     requires_grad=True)
    g = torch.Generator().manual_seed(40)
    w = torch.randn(4, generator=g, dtype=torch.float64)
    v = torch.randn(4, 3, generator=g, dtype=torch.float64)
    (d1,) = torch.autograd.grad((reduce_prod(x) * w).sum(), x,
                                create_graph=True)
    (d2,) = torch.autograd.grad((d1 * v).sum(), x)
    return d1, d2


def test_prod_gradients_with_zeros_and_minus_one_as_torch():
    """A prod reduction's gradient as torch.prod's everywhere, its second
    derivative finite everywhere (no NaN from the branch torch.where
    drops) and as torch.prod's in the rows without a zero."""
    torch = pytest.importorskip("torch")
    got = _prod_grads(torch, lambda t: einc.einsum("a b -> a", t,
                                                   reduce="prod"))
    want = _prod_grads(torch, lambda t: t.prod(dim=1))
    torch.testing.assert_close(got[0], want[0], rtol=1e-12, atol=1e-12)
    assert torch.isfinite(got[1]).all()
    rows = [0, 3]
    torch.testing.assert_close(got[1][rows], want[1][rows], rtol=1e-12,
                               atol=1e-12)


def test_prod_second_derivative_at_zeros_as_torch():
    """d2 f / dx_i dx_j of a product with x_i = 0 is the product of the
    others, not 0 (torch.prod gives it), in the rows with one and two
    zeros too."""
    torch = pytest.importorskip("torch")
    got = _prod_grads(torch, lambda t: einc.einsum("a b -> a", t,
                                                   reduce="prod"))
    want = _prod_grads(torch, lambda t: t.prod(dim=1))
    torch.testing.assert_close(got[1], want[1], rtol=1e-12, atol=1e-12)


def _groups_with_zeros():
    """x (6, 2, 3) whose groups (a b c -> a: the six elements of a row)
    hold 0, 1, 2 (in both b), 3, 6 zeros and 1 zero again, with w."""
    rng = np.random.default_rng(41)
    x = rng.standard_normal((6, 2, 3))
    x[1, 0, 1] = 0
    x[2, 0, 0] = x[2, 1, 2] = 0
    x[3, 0, 0] = x[3, 1, 1] = x[3, 1, 2] = 0
    x[4] = 0
    x[5, 1, 0] = 0
    return x, rng.standard_normal(6)


def test_prod_hessian_with_zeros_as_jax():
    """jax.hessian of a prod reduction over two axes (a traced gradient
    program, differentiated again) as jnp.prod's, in every row: with
    zeros the Hessian's entries are products of the other elements."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x, w = _groups_with_zeros()
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        got = jax.hessian(lambda t: (einc.reduce(t, "a b c -> a", "prod")
                                     * w).sum())(jnp.asarray(x))
        want = jax.hessian(lambda t: (t.prod(axis=(1, 2)) * w).sum())(
            jnp.asarray(x))
    finally:
        jax.config.update("jax_enable_x64", before)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want),
                               rtol=1e-12, atol=1e-12)


def test_prod_hessian_with_zeros_as_torch_func():
    """torch.func.hessian (forward over reverse, through einc's recorded
    gradient program) of the same prod as torch.prod's."""
    torch = pytest.importorskip("torch")
    x, w = _groups_with_zeros()
    w = torch.tensor(w)
    got = torch.func.hessian(lambda t: (einc.reduce(
        t, "a b c -> a", "prod") * w).sum())(torch.tensor(x))
    want = torch.func.hessian(lambda t: (t.prod(2).prod(1) * w).sum())(
        torch.tensor(x))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("eq,sa,sb", [
    ("a b i k, a b k j -> a b i j", (2, 3, 4, 5), (2, 3, 5, 6)),
    ("b i k, b k j -> b i j", (3, 4, 5), (3, 5, 6)),
    ("i k, k j -> i j", (4, 5), (5, 6)),
    ("a b i c k, b a k j -> b a j c i", (2, 3, 4, 2, 5), (3, 2, 5, 6)),
])
def test_small_eager_grad_calls_as_torch(eq, sa, sb):
    """Small eager calls that record autograd (lowered to torch's bmm and
    reshapes): the value and both gradients as torch.einsum's in
    float64, with one, two or no batch axes and merged groups."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(40)
    a = torch.randn(sa, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(sb, generator=g, dtype=torch.float64, requires_grad=True)
    got = einc.einsum(eq, a, b)
    letters = {}  # the same expression in torch's letters
    numpy_eq = "".join(letters.setdefault(c, "pqrstuvw"[len(letters)])
                       if c.isalpha() else c for c in eq.replace(" ", ""))
    want = torch.einsum(numpy_eq, a, b)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    dout = torch.randn(want.shape, generator=g, dtype=torch.float64)
    for x, y in zip(torch.autograd.grad(got, (a, b), dout),
                    torch.autograd.grad(want, (a, b), dout)):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_compiled_max_with_a_symbolic_length_as_torch():
    """Under torch.compile with dynamic shapes, a length given by another
    tensor's symbolic size (h) on a tensor of static shape, in a
    reduction einc does not lower (max): the values torch's reshape and
    amax give, for three sizes of h from one compiled graph."""
    torch = pytest.importorskip("torch")

    def f(y):
        x = torch.arange(12.0, dtype=torch.float64)
        return einc.einsum("(h d) -> h", x, reduce="max", h=y.shape[0])

    compiled = torch.compile(f, dynamic=True, fullgraph=True)
    for n in (3, 4, 6):
        want = torch.arange(12.0, dtype=torch.float64).reshape(n, -1).amax(1)
        torch.testing.assert_close(compiled(torch.zeros(n)), want,
                                   rtol=0, atol=0)
