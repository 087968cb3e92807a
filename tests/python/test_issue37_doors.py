"""Issue 37's doors: memory limits from Python, each peer's exact result
type, bool einsum as numpy and torch define it. Each case failed on main
at e5c1c14."""
import numpy as np
import pytest

import einc
import einc.numpy as enp
import einc.opt_einsum as eoe
import einc.einops as eeo


def _chain(rng):
    return [rng.standard_normal((6, 5)), rng.standard_normal((5, 7)),
            rng.standard_normal((7, 4))]


def _rel(got, want):
    return np.linalg.norm(np.asarray(got) - want) / np.linalg.norm(want)


# ------------------------------------------------------------ memory limits

def test_einsum_memory_limit_slices_and_matches(rng):
    a, b, c = _chain(rng)
    want = np.einsum("ij,jk,kl->il", a, b, c)
    got = einc.einsum("i j, j k, k l -> i l", a, b, c, memory_limit=96)
    assert _rel(got, want) <= 1e-12
    p = einc.plan("i j, j k, k l -> i l", a, b, c, memory_limit=96)
    assert p.units > 1 and p.memory_limit == 96


def test_memory_limit_free_resolves_on_the_device(rng):
    a, b, c = _chain(rng)
    p = einc.plan("i j, j k, k l -> i l", a, b, c, memory_limit="free")
    assert p.memory_limit > 1 << 20 and p.units == 1
    f = einc.compile("i j, j k, k l -> i l", a.shape, b.shape, c.shape,
                     dtype="float64", memory_limit=96)
    assert f.units > 1
    assert _rel(f(a, b, c), np.einsum("ij,jk,kl->il", a, b, c)) <= 1e-12


@pytest.mark.parametrize("bad", [-5, "lots"])
def test_memory_limit_bad_values(rng, bad):
    a, b, c = _chain(rng)
    with pytest.raises(einc.EincError, match="memory_limit"):
        einc.einsum("i j, j k, k l -> i l", a, b, c, memory_limit=bad)


def test_memory_limit_no_slicing_meets(rng):
    a, b, c = _chain(rng)
    with pytest.raises(einc.EincError, match="a limit of .* would fit"):
        einc.einsum("i j, j k, k l -> i l", a, b, c, memory_limit=8)


def test_numpy_strategy_and_limit(rng):
    a, b, c = (rng.standard_normal((8, 8)) for _ in range(3))
    want = np.einsum("ij,jk,kl->il", a, b, c)
    got = enp.einsum("ij,jk,kl->il", a, b, c, optimize=("greedy", 20))
    assert _rel(got, want) <= 1e-12
    # numpy's one step of every operand where not even slicing fits
    path = enp.einsum_path("ij,jk,kl->il", a, b, c, optimize=("greedy", 1))
    assert path[0] == ["einsum_path", (0, 1, 2)]


# ------------------------------------------------------------ result types

TYPE_CASES = [
    ("i->", [(3,)], {}), ("i,i->", [(3,), (3,)], {}),
    ("i,i->", [(3,), (3,)], {"optimize": True}),
    ("i,i->", [(1,), (1,)], {"optimize": True}),
    ("i,->", [(3,), ()], {"optimize": True}),
    ("ij,ij->", [(2, 3), (2, 3)], {"optimize": "greedy"}),
    ("i,i,i->", [(3,), (3,), (3,)], {"optimize": True}),
    ("ij->", [(2, 3)], {"optimize": True}),
]


@pytest.mark.parametrize("eq,shapes,kw", TYPE_CASES)
def test_numpy_result_type(rng, eq, shapes, kw):
    ops = [rng.standard_normal(s) for s in shapes]
    want, got = np.einsum(eq, *ops, **kw), enp.einsum(eq, *ops, **kw)
    assert type(got) is type(want)


def test_numpy_scalar_keeps_longlong():
    x = np.arange(4, dtype=np.longlong)
    assert type(enp.einsum("i->", x)) is type(np.einsum("i->", x))


@pytest.mark.parametrize("eq,shapes,kw", [
    ("i,i", [(3,), (3,)], {}), ("ab,ab,c->", [(2, 3), (2, 3), (4,)], {}),
    ("a,b,c->", [(3,), (3,), (3,)], {}), ("ij,ij->", [(2, 3), (2, 3)], {}),
    ("ij,ji->", [(3, 3), (3, 3)], {}),
    ("ij,ij->", [(2, 3), (2, 3)], {"use_blas": False}),
    ("ij,ij->", [(2, 3), (2, 3)], {"optimize": False})])
def test_opt_einsum_result_type(rng, eq, shapes, kw):
    oe = pytest.importorskip("opt_einsum")
    ops = [rng.standard_normal(s) for s in shapes]
    assert type(eoe.contract(eq, *ops, **kw)) is \
        type(oe.contract(eq, *ops, **kw))
    if kw.get("optimize", True) is not False:  # (expressions refuse it)
        assert type(eoe.contract_expression(eq, *shapes, **kw)(*ops)) is \
            type(oe.contract_expression(eq, *shapes, **kw)(*ops))


@pytest.mark.parametrize("pattern,shape", [
    ("->", ()), ("a->", (3,)), ("1->", (1,)), ("a->()", (3,)),
    ("a b->", (2, 3)), ("... ->", (2, 3)), ("() ->", (1,))])
def test_einops_reduce_result_type(pattern, shape):
    einops = pytest.importorskip("einops")
    x = np.arange(int(np.prod(shape)), dtype=float).reshape(shape)
    assert type(eeo.reduce(x, pattern, "sum")) is \
        type(einops.reduce(x, pattern, "sum"))


# ------------------------------------------------------------- bool einsum

BOOL_CASES = [("i,i->i", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
              ("i,i->", [(5,), (5,)]), ("ij,jk->ik", [(3, 4), (4, 2)]),
              ("i->", [(5,)]), ("ij->j", [(3, 4)]),
              ("i,i,i->i", [(5,), (5,), (5,)])]


@pytest.mark.parametrize("eq,shapes", BOOL_CASES)
def test_bool_einsum_as_numpy(rng, eq, shapes):
    ops = [rng.random(s) > 0.5 for s in shapes]
    want = np.einsum(eq, *ops)
    for got in (einc.einsum(eq, *ops, numpy=True), enp.einsum(eq, *ops),
                eoe.contract(eq, *ops)):
        assert np.asarray(got).dtype == np.bool_
        assert np.array_equal(np.asarray(got), want)


@pytest.mark.parametrize("eq,shapes", BOOL_CASES + [
    ("ij,k->k", [(2, 3), (4,)]), ("i,i->", [(1,), (1,)]),
    ("ij,ij->i", [(2, 3), (2, 3)])])
def test_bool_einsum_as_torch(eq, shapes):
    torch = pytest.importorskip("torch")
    import einc.torch as et

    g = torch.Generator().manual_seed(7)
    ops = [torch.rand(s, generator=g) > 0.5 for s in shapes]
    try:
        want = torch.einsum(eq, *ops)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="bmm"):
            et.einsum(eq, *ops)
        return
    got = et.einsum(eq, *ops)
    assert got.dtype == want.dtype and torch.equal(got, want)
