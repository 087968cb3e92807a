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
                                      ("ij,jk->ik", (2, 3), (3, 4))])
def test_torch_dropin_under_autocast_as_torch(eq, sa, sb):
    """einc.torch.einsum under torch.autocast (CPU, bfloat16) as
    torch.einsum there: numpy's letters (a size-1 dim broadcasts), the
    result's dtype (a contraction is cast, a product without a sum is
    not), its values within bfloat16's tolerance. (Not here: a sum over
    an axis one operand broadcasts from size 1, 'i,i->' on (1,) and (3,),
    which torch computes in float32 and einc casts.)"""
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
