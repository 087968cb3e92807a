"""The cached path of plain numpy calls (python/src/plan_table.c): which calls
take it, that its cache tells layouts apart (a plan is made for exact
shapes, strides and dtypes), that eviction under threads stays correct,
and that what it leaves to the general path still gives that path's
results and errors."""
import numpy as np
import pytest

import einc
from conftest import rss_kib, run_in_threads
from einc import _einc


def rand(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_plain_numpy_takes_it_others_do_not():
    a, b = rand((3, 4)), rand((4, 5), seed=1)
    einc.einsum("i j, j k -> i k", a, b)  # arms it
    got = _einc.fast(("i j, j k -> i k", a, b), None, None)
    assert got is not None
    np.testing.assert_allclose(got, a @ b)
    assert _einc.fast((a, b, "i j, j k -> i k"), None, "sum") is not None
    assert _einc.fast(("i j, j k -> i k", a, b.astype(np.float32)), None,
                      None) is None  # mixed dtypes: numpy's promotion
    assert _einc.fast(("i j, j k -> i k", a.view(np.matrix), b), None,
                      None) is None  # a subclass
    assert _einc.fast(("i j -> j i", [[1.0, 2.0]]), False, None) is None
    assert _einc.fast(("i j -> j i", a), False, "median") is None
    assert _einc.fast(("i j -> j i", a), False, len) is None
    assert _einc.fast((a, b), None, None) is None  # no expression
    assert _einc.fast(("i j, j k -> i k", a, rand((5, 5))), None,
                      None) is None  # an error: the general path raises it


def test_layouts_are_told_apart():
    """One expression, alternating layouts: each needs its own plan."""
    base = rand((6, 8))
    views = [base, base.T.copy().T, base[::-1], base[:, ::2], base[::2, 1:],
             base.astype(np.float32), base.astype(np.int64), base[:3],
             np.asfortranarray(base)]
    for _ in range(3):
        for v in views:
            got = einc.einsum("i j -> j", v)
            np.testing.assert_allclose(got, v.sum(0), rtol=1e-5)
            assert got.dtype == v.dtype
            np.testing.assert_array_equal(einc.rearrange(v, "i j -> j i"),
                                          v.T)


def test_dialect_and_reduction_are_part_of_the_key():
    a = rand((3, 4))
    np.testing.assert_allclose(einc.einsum("ij->j", a), a.sum(0))
    np.testing.assert_allclose(einc.einsum("ij->j", a, numpy=True), a.sum(0))
    for r, f in [("sum", np.sum), ("max", np.max), ("min", np.min),
                 ("mean", np.mean), ("sum", np.sum)]:
        np.testing.assert_allclose(einc.reduce(a, "i j -> j", r), f(a, 0))
        np.testing.assert_allclose(einc.einsum("i j -> i", a, reduce=r),
                                   f(a, 1))


def test_empty_and_zero_dim_outputs():
    assert einc.einsum(" -> ", np.array(2.5)) == 2.5
    for _ in range(2):
        assert einc.einsum("i j -> j i", np.zeros((0, 3))).shape == (3, 0)
        assert einc.rearrange(np.zeros((2, 0, 1)),
                              "a b c -> c b a").shape == (1, 0, 2)


def test_eviction_under_threads():
    """More layouts than the cache holds, from several threads at once."""
    errors = []

    def work(seed):
        try:
            for i in range(150):
                n = 1 + (i * 7 + seed) % 90
                x = rand((n, 3), seed=seed)
                np.testing.assert_array_equal(einc.rearrange(x, "a b -> b a"),
                                              x.T)
                np.testing.assert_allclose(
                    einc.einsum("a b, a b -> b", x, x), (x * x).sum(0))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    run_in_threads(work, 6)
    assert errors == []


def test_compiled_fast_and_fallback():
    f = einc.compile("i j, j k -> i k", (3, 4), (4, 5), dtype="float64")
    a, b = rand((3, 4)), rand((4, 5), seed=1)
    np.testing.assert_allclose(f(a, b), a @ b)
    at = np.asfortranarray(a)  # another layout: ein_eval's plan
    np.testing.assert_allclose(f(at, b), a @ b)
    assert f._plan.run_numpy((at, b)) is None
    assert f._plan.run_numpy((a, b)) is not None
    with pytest.raises(einc.EincError):
        f(rand((3, 5)), b)


def test_errors_keep_the_general_paths_text():
    a, b = rand((2, 3)), rand((4, 5))
    with pytest.raises(einc.EincError) as fast_err:
        einc.einsum("a b, b c -> a c", a, b)
    with pytest.raises(einc.EincError) as check_err:
        einc.check("a b, b c -> a c", a.shape, b.shape)
    assert str(fast_err.value) == str(check_err.value)


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.1.0",
                    reason="NumPy < 2.1 cannot export read-only arrays: "
                    "the general path copies them")
def test_read_only_inputs():
    """numpy exports read-only arrays only in DLPack's versioned form."""
    a = np.broadcast_to(rand((1, 4)), (3, 4))  # read-only, stride 0
    assert not a.flags.writeable
    for _ in range(2):
        got = _einc.fast(("i j -> (j i)", a), False, None)
        assert got is not None
        np.testing.assert_array_equal(got, a.T.reshape(-1))
        assert got.flags.writeable  # a new array
        view = _einc.fast(("i j -> j i", a), False, None)
        np.testing.assert_array_equal(view, a.T)
        assert np.shares_memory(view, a) and not view.flags.writeable


def test_no_leaks_while_evicting():
    """200 layouts cycling through the context's 128-entry plan cache
    (where the table's entries live): every call misses and evicts, and
    nothing (plans, shape tuples, dtype references) stays behind."""
    import gc
    import sys

    xs = [np.ones((n, 2), np.float32) for n in range(1, 201)]
    expr = "".join(["a b", " -> b a"])  # not interned: its count is ours
    dtype = xs[0].dtype

    def one_round():
        for x in xs:
            einc.rearrange(x, expr)

    for _ in range(3):
        one_round()
    gc.collect()
    refs = (sys.getrefcount(expr), sys.getrefcount(dtype))
    rss = rss_kib()
    for _ in range(50):
        one_round()
    gc.collect()
    assert (sys.getrefcount(expr), sys.getrefcount(dtype)) == refs
    grown = rss_kib() - rss
    assert grown < 4096, f"RSS grew by {grown} KiB over 10,000 misses"
