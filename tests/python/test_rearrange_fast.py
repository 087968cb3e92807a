"""einc.rearrange is a C function (python/src/builtins.c, fast_rearrange)
that serves calls from the plan table, a view where the plan only re-reads
the input, and hands every other call to the Python rearrange. Whatever it
serves must be what the general path (_core.evaluate, which always copies)
gives: the same kind of array, dtype, shape and values, on random patterns
over numpy arrays and torch CPU tensors of every layout (contiguous,
permuted, strided, reversed, 0-d, empty) and dtype; and where it gives a
view, the view must address the input's elements as the general path reads
them: a write through it shows in the input, at that place."""
import numpy as np
import pytest

import einc
from einc import _api, _core, _einc
from test_einops_random import rearrange_case
from conftest import spied_fallback
from test_views import relayout

DTYPES = ["float32", "float64", "int64", "int32", "uint8", "float16",
          "bool"]
LAYOUTS = ["contiguous", "permuted", "strided", "reversed"]
# 0-d and empty inputs: (pattern, shape, lengths)
EDGES = [("->", (), {}), (" -> () ()", (), {}), ("a b -> b a", (0, 3), {}),
         ("a b c -> c (a b)", (2, 0, 1), {}),
         ("(a b) c -> b c a", (0, 2), {"b": 3}),
         ("a b -> (b a)", (3, 0), {}), ("a () -> a", (4, 1), {})]


@pytest.fixture
def served():
    """Records the calls einc.rearrange hands to the Python rearrange (the
    fallback is swapped for a spy around it, then put back)."""
    yield from spied_fallback(
        "rearrange", lambda x: einc.rearrange(x, "a b -> b a"))


def general(x, pattern, lengths):
    return _core.evaluate(pattern, (x,), numpy=False,
                         lengths=_core._lengths(lengths))


def as_numpy(a):
    return a if isinstance(a, np.ndarray) else a.numpy()


def check_same_as_general(x, pattern, lengths, calls):
    """einc.rearrange served it in C, and gave what the general path
    gives; a view addresses the input as the general path reads it."""
    del calls[:]
    got = einc.rearrange(x, pattern, **lengths)
    assert not calls, f"not served in C: {pattern} {x.shape} {x.dtype}"
    want = general(x, pattern, lengths)
    assert type(got) is type(want), pattern
    assert got.dtype == want.dtype and got.shape == want.shape, pattern
    g, w = as_numpy(got), as_numpy(want)
    np.testing.assert_array_equal(g, w, err_msg=pattern)
    if g.size and np.shares_memory(g, as_numpy(x)):
        flat = int(np.random.default_rng(g.size).integers(g.size))
        at = np.unravel_index(flat, g.shape)
        g[at] = 0 if w[at] else 1  # another value, for every dtype
        after = as_numpy(general(x, pattern, lengths))
        np.testing.assert_array_equal(g, after, err_msg=pattern)
        assert after[at] != w[at], pattern
    return got


def random_input(seed, torch_layouts=False):
    pattern, x, lengths = rearrange_case(seed)
    r = np.random.default_rng(seed)
    layouts = LAYOUTS[:3] if torch_layouts else LAYOUTS  # torch: no negatives
    x = relayout(x.astype(DTYPES[seed % len(DTYPES)]),
                 layouts[seed % len(layouts)], r)
    return pattern, x, lengths


@pytest.mark.parametrize("seed", range(160))
def test_numpy_fast_equals_general(seed, served):
    pattern, x, lengths = random_input(seed)
    check_same_as_general(x, pattern, lengths, served)


@pytest.fixture(params=["exchange table", "capsules"])
def torch_route(request, served):
    """torch tensors through DLPack's C exchange table (torch 2.10 on), or
    as older torch has them, through torch._C._to_dlpack's capsules."""
    torch = pytest.importorskip("torch")
    table = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    if request.param == "exchange table" and table is None:
        pytest.skip("this torch has no DLPack exchange table")

    from einc import _torch

    def setup(api):
        _einc.fast_setup_torch(torch.Tensor, torch._C._to_dlpack,
                               torch.from_numpy, _torch._torch_numpy_dtype,
                               torch.Tensor.as_strided, api)

    setup(table if request.param == "exchange table" else None)
    try:
        yield torch
    finally:
        setup(table)


@pytest.mark.parametrize("seed", range(160))
def test_torch_fast_equals_general(seed, served, torch_route):
    pattern, x, lengths = random_input(seed, torch_layouts=True)
    t = torch_route.from_numpy(x)
    got = check_same_as_general(t, pattern, lengths, served)
    assert got.device == t.device and not got.requires_grad


@pytest.mark.parametrize("case", EDGES, ids=[c[0] for c in EDGES])
def test_zero_d_and_empty(case, served):
    pattern, shape, lengths = case
    x = (np.arange(int(np.prod(shape)), dtype=np.float32) + 1).reshape(shape)
    check_same_as_general(x, pattern, lengths, served)


@pytest.mark.parametrize("case", EDGES, ids=[c[0] for c in EDGES])
def test_zero_d_and_empty_torch(case, served, torch_route):
    pattern, shape, lengths = case
    x = (np.arange(int(np.prod(shape)), dtype=np.float32) + 1).reshape(shape)
    check_same_as_general(torch_route.from_numpy(x), pattern, lengths,
                          served)


def torch_relayout(t, kind, r):
    """relayout (test_views) in torch, for dtypes numpy lacks."""
    torch = pytest.importorskip("torch")
    if kind == "permuted" and t.ndim > 1:
        perm = [int(i) for i in r.permutation(t.ndim)]
        back = [perm.index(i) for i in range(t.ndim)]
        return t.permute(perm).contiguous().permute(back)
    if kind == "strided" and t.ndim > 0:
        big = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype)
        big[..., ::2] = t
        return big[..., ::2]
    return t


@pytest.mark.parametrize("seed", range(60))
def test_torch_bfloat16_and_complex(seed, served, torch_route):
    """dtypes numpy lacks (bfloat16: results made as uint16) or whose
    torch tensors carry bits DLPack cannot say (complex)."""
    torch = torch_route
    pattern, x, lengths = rearrange_case(seed)
    dtype = [torch.bfloat16, torch.complex64, torch.complex128][seed % 3]
    t = torch.from_numpy(x.astype(np.float32)).to(dtype)
    if dtype.is_complex:
        t = t * (1 - 2j)
    t = torch_relayout(t, LAYOUTS[seed % 3], np.random.default_rng(seed))
    del served[:]
    got = einc.rearrange(t, pattern, **lengths)
    assert not served, pattern
    want = general(t, pattern, lengths)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    assert torch.equal(got, want), pattern
    if got.numel() and got.data_ptr() == t.data_ptr() and got.ndim:
        got[(0,) * got.ndim] = 5
        assert torch.equal(got, general(t, pattern, lengths)), pattern


def test_torch_conjugate_and_negative_bits_go_the_general_way(
        served, torch_route):
    """Complex tensors with the conjugate or negative bit: the general path
    (Tensor.__dlpack__ refuses the conjugate bit)."""
    torch = torch_route
    z = torch.arange(6.).reshape(2, 3) * (1 + 1j)
    for t in [z.conj(), torch._neg_view(z)]:
        del served[:]
        try:
            got = ("ok", einc.rearrange(t, "a b -> b a"))
        except Exception as e:  # noqa: BLE001 - compared below
            got = ("error", type(e))
        assert len(served) == 1
        try:
            want = ("ok", general(t, "a b -> b a", {}))
        except Exception as e:  # noqa: BLE001
            want = ("error", type(e))
        assert got[0] == want[0]
        if got[0] == "ok":
            assert torch.equal(got[1], want[1])
        else:
            assert got[1] is want[1]


def test_torch_views_outlive_inputs_and_let_them_go(torch_route):
    """A view keeps its input's memory; dropped, it lets the input go (its
    reference count comes back) on either route."""
    import gc
    import sys

    torch = torch_route
    x = torch.arange(30.)[6:].reshape(2, 3, 4)  # a storage offset
    before = sys.getrefcount(x)
    for _ in range(2000):
        v = einc.rearrange(x, "a b c -> c (a b)")
    want = x.permute(2, 0, 1).reshape(4, 6).clone()
    assert v.data_ptr() == x.data_ptr()
    del x
    gc.collect()
    assert torch.equal(v, want) and v.stride() == (1, 4)
    y = torch.ones(4, 6)
    before = sys.getrefcount(y)
    for _ in range(2000):
        einc.rearrange(y, "a b -> b a")
    assert sys.getrefcount(y) == before


def test_random_cases_reach_views_and_copies(served, torch_route):
    """The cases above take both of the C path's answers."""
    torch = torch_route
    views = copies = 0
    for seed in range(160):
        pattern, x, lengths = random_input(seed, torch_layouts=True)
        t = torch.from_numpy(x)
        got = check_same_as_general(t, pattern, lengths, served)
        if got.numel() and np.shares_memory(got.numpy(), x):
            views += 1
        else:
            copies += 1
    assert views > 60 and copies > 10, (views, copies)


def test_what_c_leaves_to_python(served):
    """Calls the table does not serve go to the Python rearrange, which
    gives their results and errors."""
    x = np.arange(12.).reshape(3, 4)
    want = x.reshape(3, 2, 2)
    np.testing.assert_array_equal(
        einc.rearrange(x, "a (b c) -> a b c", c=np.int64(2)), want)
    np.testing.assert_array_equal(
        einc.rearrange([x[0], x[1]], "n d -> d n"), x[:2].T)
    np.testing.assert_array_equal(
        einc.rearrange(tensor=x, pattern="a b -> b a"), x.T)
    assert len(served) == 3
    with pytest.raises(einc.EincError, match="needs '->'"):
        einc.rearrange(x, "a b")  # a table entry would plan it
    with pytest.raises(TypeError, match="multiple values"):
        einc.rearrange(x, "a b -> b a", pattern=1)
    with pytest.raises(TypeError, match="must be an int"):
        einc.rearrange(x, "a (b c) -> a b c", c=2.0)
    with pytest.raises(einc.EincError):
        einc.rearrange(x, "a b c -> c b a")


def test_signature_and_docstring():
    import inspect

    assert str(inspect.signature(einc.rearrange)) == (
        "(tensor, pattern, **axes_lengths)")
    assert inspect.getdoc(einc.rearrange) == inspect.getdoc(
        _api._rearrange)
    assert repr(einc.rearrange) == "<built-in function rearrange>"
