"""einc.reduce is a C function (python/src/builtins.c, fast_reduce), as
einc.rearrange is: it serves calls with a reduction named by position
('max', ...) from the plan table and hands every other call to the Python
reduce. Whatever it serves must be what the general path (_core.evaluate)
gives, on random patterns over numpy arrays and torch CPU tensors of
several layouts and every reduction; and the calls it must not serve
(callables, unknown names, a keyword reduction, lists, an axis length
named like a parameter) must reach Python and behave as before."""
import numpy as np
import pytest

import einc
from einc import _core, _einc, _einops
from test_einops_random import reduce_case
from conftest import spied_fallback
from test_views import relayout

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]
LAYOUTS = ["contiguous", "permuted", "strided", "reversed"]


@pytest.fixture
def served():
    """Records the calls einc.reduce hands to the Python reduce (the
    fallback is swapped for a spy around it, then put back)."""
    yield from spied_fallback(
        "reduce", lambda x: einc.reduce(x, "a b -> b", "sum"))


def general(x, pattern, reduction, lengths):
    return _core.evaluate(pattern, (x,), reduce=reduction, numpy=False,
                         lengths=_core._lengths(lengths))


def as_numpy(a):
    return a if isinstance(a, np.ndarray) else a.numpy()


def check_served_and_same(x, pattern, reduction, lengths, calls):
    del calls[:]
    got = einc.reduce(x, pattern, reduction, **lengths)
    assert not calls, f"not served in C: {pattern} {x.shape} {reduction}"
    want = general(x, pattern, reduction, lengths)
    assert type(got) is type(want), pattern
    assert got.dtype == want.dtype and got.shape == want.shape, pattern
    np.testing.assert_array_equal(as_numpy(got), as_numpy(want),
                                  err_msg=f"{pattern} {reduction}")


def random_input(seed, layouts):
    pattern, x, lengths = reduce_case(seed)
    r = np.random.default_rng(seed)
    reduction = REDUCTIONS[seed % len(REDUCTIONS)]
    dtype = ["float64", "float32", "int64"][seed % 3]
    if reduction == "mean":
        dtype = "float64"  # einc refuses an integer mean, as it should
    x = relayout(x.astype(dtype), layouts[seed % len(layouts)], r)
    return pattern, x, reduction, lengths


@pytest.mark.parametrize("seed", range(60))
def test_numpy_served_equals_general(seed, served):
    pattern, x, reduction, lengths = random_input(seed, LAYOUTS)
    check_served_and_same(x, pattern, reduction, lengths, served)


@pytest.mark.parametrize("seed", range(30))
def test_torch_served_equals_general(seed, served):
    torch = pytest.importorskip("torch")
    pattern, x, reduction, lengths = random_input(seed, LAYOUTS[:3])
    check_served_and_same(torch.from_numpy(x), pattern, reduction, lengths,
                          served)


def test_bool_reductions_served(served):
    x = np.random.default_rng(3).random((4, 6)) > 0.5
    for reduction in ("any", "all", "max", "min"):
        check_served_and_same(x, "a (b 2) -> b", reduction, {}, served)


def test_what_python_must_see(served):
    """Calls the builtin must hand to Python, with Python's outcome."""
    x = np.arange(12.).reshape(3, 4)
    del served[:]
    np.testing.assert_array_equal(einc.reduce(x, "a b -> a", np.max),
                                  x.max(1))
    np.testing.assert_array_equal(
        einc.reduce(x, "a b -> b", reduction="min"), x.min(0))
    np.testing.assert_array_equal(einc.reduce([x, x], "n a b -> b", "sum"),
                                  2 * x.sum(0))
    with pytest.raises(einc.EincError, match="unknown reduction"):
        einc.reduce(x, "a b -> b", "median")
    with pytest.raises(TypeError, match="reduction"):  # even where it fits
        einc.reduce(x, "reduction b -> b", "max", reduction=3)
    assert len(served) == 5
    del served[:]
    # numpy ints as lengths: Python reads them (then its own table call)
    got = einc.reduce(x, "(a c) b -> a", "sum", c=np.int64(3))
    np.testing.assert_array_equal(got, x.sum())
    assert len(served) == 1


def test_errors_keep_the_general_paths_text(served):
    with pytest.raises(einc.EincError) as fast:
        einc.reduce(np.ones((2, 3)), "a b -> c", "max")
    with pytest.raises(einc.EincError) as slow:
        general(np.ones((2, 3)), "a b -> c", "max", {})
    assert str(fast.value) == str(slow.value)


def test_signature_and_doc():
    import inspect

    assert str(inspect.signature(einc.reduce)) == (
        "(tensor, pattern, reduction, **axes_lengths)")
    assert "np.median" in einc.reduce.__doc__
