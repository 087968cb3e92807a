"""Results that are views of their input (docs/design.md, "Views").

einc.rearrange, einc.reduce and einc.einsum hand back a view of a numpy
array or torch CPU tensor when the plan only re-reads it (a transpose, a
split or merge of adjacent axes, a squeeze, a diagonal), as einops and
numpy.einsum do; einc.repeat always copies. einops (numpy's and torch's
reshape and permute underneath) is the oracle on random patterns, on
contiguous, permuted, strided and reversed inputs: equal values, and a view
exactly where einops gives one, with the same strides, and a write through
it seen in the input.

With NumPy before 2.1 (no versioned DLPack: its imports are read-only)
numpy results are copies by design (docs/design.md, "Views"): there the
same cases must give equal values in new arrays, and the tests of view
details skip."""
import subprocess
import sys

import numpy as np
import pytest

import einc
from test_einops_random import rearrange_case

einops = pytest.importorskip("einops")

NUMPY_VIEWS = np.lib.NumpyVersion(np.__version__) >= "2.1.0"
needs_numpy_views = pytest.mark.skipif(
    not NUMPY_VIEWS, reason="NumPy < 2.1: numpy results are copies")


def relayout(x, kind, r):
    """x's values and shape in another memory layout: 'permuted' (another
    axis order in memory), 'strided' (every other element of a bigger
    array), 'reversed' (a negative stride), or x itself."""
    if kind == "permuted" and x.ndim > 1:
        perm = r.permutation(x.ndim)
        return np.ascontiguousarray(x.transpose(perm)).transpose(
            np.argsort(perm))
    if kind == "strided" and x.ndim > 0:
        big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        big[..., ::2] = x
        return big[..., ::2]
    if kind == "reversed" and x.ndim > 0:
        axis = int(r.integers(x.ndim))
        return np.flip(np.flip(x, axis).copy(), axis)
    return x


def big_dims_strides(a):
    """The strides of a's dims of more than one element (the others' are
    free), in bytes."""
    return [s for s, n in zip(a.strides, a.shape) if n > 1]


def check_like_einops(got, want, x, pattern):
    """Equal values; a view of x exactly where einops gives one, with its
    strides; a write through einc's view seen by einops' view of x."""
    assert got.shape == want.shape and got.dtype == want.dtype, pattern
    np.testing.assert_array_equal(got, want, err_msg=pattern)
    shares = np.shares_memory(got, x)
    if not NUMPY_VIEWS and isinstance(x, np.ndarray):
        assert not shares, pattern  # a copy, never a read-only view
        return shares
    assert shares == np.shares_memory(want, x), (pattern, shares)
    if shares:
        assert big_dims_strides(got) == big_dims_strides(want), pattern
        got[(0,) * got.ndim] = -7
        assert want[(0,) * want.ndim] == -7, pattern
        np.testing.assert_array_equal(got, want, err_msg=pattern)
    return shares


LAYOUTS = ["contiguous", "permuted", "strided", "reversed"]


@pytest.mark.parametrize("seed", range(240))
def test_rearrange_views_numpy(seed):
    pattern, x, lengths = rearrange_case(seed)
    r = np.random.default_rng(seed)
    x = relayout(x, LAYOUTS[seed % 4], r)
    want = einops.rearrange(x, pattern, **lengths)
    got = einc.rearrange(x, pattern, **lengths)
    check_like_einops(got, want, x, pattern)


@needs_numpy_views
def test_random_cases_include_views_and_copies():
    """The random cases above reach both answers (the oracle is not
    trivially 'always a view' or 'always a copy')."""
    views = copies = 0
    for seed in range(240):
        pattern, x, lengths = rearrange_case(seed)
        x = relayout(x, LAYOUTS[seed % 4], np.random.default_rng(seed))
        got = einc.rearrange(x, pattern, **lengths)
        if np.shares_memory(got, x):
            views += 1
        else:
            copies += 1
    assert views > 100 and copies > 10, (views, copies)


@pytest.mark.parametrize("expr", ["ij->ji", "ii->i", "ijk->kji", "ij->ij",
                                  "iij->ji", "ij->j"])
def test_einsum_views_as_numpy_einsum(expr, rng):
    shape = {"ij->ji": (3, 4), "ii->i": (4, 4), "ijk->kji": (2, 3, 4),
             "ij->ij": (3, 4), "iij->ji": (3, 3, 2), "ij->j": (3, 4)}[expr]
    x = rng.standard_normal(shape)
    want, got = np.einsum(expr, x), einc.einsum(expr, x)
    np.testing.assert_allclose(got, want)
    if not NUMPY_VIEWS:
        assert not np.shares_memory(got, x), expr
        return
    assert np.shares_memory(got, x) == np.shares_memory(want, x), expr
    if np.shares_memory(got, x):
        assert got.strides == want.strides, expr


@needs_numpy_views
def test_reduce_with_nothing_reduced_is_a_view():
    x = np.arange(12.).reshape(3, 4)
    for reduction in ["sum", "max", "mean"]:
        got = einc.reduce(x, "a b -> b a", reduction)
        want = einops.reduce(x, "a b -> b a", reduction)
        assert np.shares_memory(got, x) and np.shares_memory(want, x)
    assert not np.shares_memory(einc.reduce(x, "a b -> b", "sum"), x)


def test_repeat_always_copies():
    x = np.arange(6.).reshape(2, 3)
    for pattern, lengths in [("a b -> b a", {}), ("a b -> a b c", {"c": 1}),
                             ("a b -> a b c", {"c": 4})]:
        got = einc.repeat(x, pattern, **lengths)
        np.testing.assert_array_equal(got, einops.repeat(x, pattern,
                                                         **lengths))
        assert not np.shares_memory(got, x), pattern


@needs_numpy_views
def test_zero_d_and_unit_dims():
    s = np.array(5.0)
    v = einc.rearrange(s, "->")
    assert v.shape == () and np.shares_memory(v, s)
    v[()] = 6
    assert s == 6
    x = np.arange(6.).reshape(1, 2, 1, 3)
    v = einc.rearrange(x, "a b c d -> (a b) (c d) ()")
    assert v.shape == (2, 3, 1) and np.shares_memory(v, x)
    assert v.flags.c_contiguous  # a size-1 dim keeps a compact view compact


def test_view_outlives_input_and_keeps_flags():
    x = np.arange(12.).reshape(3, 4)
    v = einc.rearrange(x, "a b -> b a")
    del x
    import gc
    gc.collect()
    np.testing.assert_array_equal(v, np.arange(12.).reshape(3, 4).T)
    ro = np.arange(6.).reshape(2, 3)
    ro.flags.writeable = False
    w = einc.rearrange(ro, "a b -> b a")
    if np.shares_memory(w, ro):  # NumPy >= 2.1 (versioned DLPack)
        assert not w.flags.writeable


def _bases(kind):
    """An array of shape (4, 6) whose memory numpy holds a given way:
    'owner' (it owns its data), 'view' (a contiguous view of an owner),
    'view-of-view', 'strided' (every other column of an owner: numpy takes
    no buffer of it), 'strided-of-view', 'fortran' (an F-ordered owner),
    'read-only' (a read-only view of a writable owner), 'bytes' and
    'bytearray' (over a non-ndarray buffer, read-only and writable),
    'bytes-view' (a view of those)."""
    data = np.arange(48.)
    if kind == "owner":
        return data[:24].copy().reshape(4, 6)
    if kind == "view":
        return data.reshape(8, 6)[2:6]
    if kind == "view-of-view":
        return data.reshape(8, 6)[1:7][1:5]
    if kind == "strided":
        return data.reshape(4, 12)[:, ::2]
    if kind == "strided-of-view":
        return data.reshape(2, 4, 6)[1][:, ::-1]
    if kind == "fortran":
        return np.asfortranarray(data[:24].reshape(4, 6))
    if kind == "read-only":
        v = data.reshape(8, 6)[2:6]
        v.flags.writeable = False
        return v
    if kind == "bytes":
        return np.frombuffer(data[:24].tobytes()).reshape(4, 6)
    if kind == "bytearray":
        return np.frombuffer(bytearray(data[:24].tobytes())).reshape(4, 6)
    if kind == "bytes-view":
        return np.frombuffer(bytearray(data.tobytes())).reshape(8, 6)[2:6]
    raise AssertionError(kind)


BASE_KINDS = ["owner", "view", "view-of-view", "strided", "strided-of-view",
              "fortran", "read-only", "bytes", "bytearray", "bytes-view"]


@needs_numpy_views
@pytest.mark.parametrize("kind", BASE_KINDS)
def test_view_base_is_numpys(kind):
    """A view einc returns has the .base numpy's own view of the same
    array has (numpy collapses chains of views onto the array that owns
    the memory, or the first whose base is no ndarray), its flags, values
    and memory: einc.einsum, einc.rearrange, einc.numpy.einsum and
    einc.einops.rearrange against numpy's transpose, reshape and
    diagonal."""
    import einc.einops as eeo
    import einc.numpy as enp

    a = _bases(kind)
    sq = a[:, :4]
    calls = [
        (lambda: einc.einsum("ij->ji", a), a.T),
        (lambda: enp.einsum("ij->ji", a), a.T),
        (lambda: einc.rearrange(a, "a b -> b a"), np.transpose(a)),
        (lambda: eeo.rearrange(a, "a b -> b a"), np.transpose(a)),
        (lambda: einc.rearrange(a, "a (b c) -> a b c", c=3),
         np.reshape(a, (4, 2, 3))),
        (lambda: enp.einsum("ii->i", sq), np.einsum("ii->i", sq)),
    ]
    for k, (call, want) in enumerate(calls):
        for _ in range(2):  # the table's first call and a hit
            got = call()
            np.testing.assert_array_equal(got, want)
            assert np.shares_memory(got, a), (kind, k)
            assert got.strides == want.strides, (kind, k)
            assert got.base is want.base, (kind, k, type(got.base))
            assert got.flags.writeable == want.flags.writeable, (kind, k)


@needs_numpy_views
def test_view_of_memory_numpy_takes_no_buffer_of():
    """A strided array over a non-ndarray base (numpy.from_dlpack of a
    strided torch tensor) is no buffer to numpy, which makes such views
    itself with DLPack only: einc's view is then still a view, writable
    through, with its own exporter as base."""
    torch = pytest.importorskip("torch")
    t = torch.arange(24.0, dtype=torch.float64).reshape(4, 6)[:, ::2]
    a = np.from_dlpack(t)
    v = einc.einsum("ij->ji", a)
    np.testing.assert_array_equal(v, a.T)
    assert np.shares_memory(v, a)
    v[0, 1] = -1
    assert a[1, 0] == -1 and t[1, 0] == -1


def test_out_always_writes():
    x = np.arange(12.).reshape(3, 4)
    out = np.zeros((4, 3))
    assert einc.einsum("ij->ji", x, out=out) is out
    np.testing.assert_array_equal(out, x.T)
    assert not np.shares_memory(out, x)


def test_other_paths_copy():
    """What the cached path does not take (lists, an explicit backend)
    gives a new array of the same values."""
    x = np.arange(6.).reshape(2, 3)
    got = einc.einsum("ij->ji", x, backend="cpu")
    np.testing.assert_array_equal(got, x.T)
    assert not np.shares_memory(got, x)
    got = einc.rearrange([x, x], "n a b -> n b a")
    np.testing.assert_array_equal(got, np.stack([x.T, x.T]))


@needs_numpy_views
def test_first_call_of_a_process_views():
    """numpy is armed on the first call, which views as later ones do."""
    code = ("import numpy as np, einc; x = np.ones((2, 3)); "
            "print(np.shares_memory(einc.rearrange(x, 'a b -> b a'), x))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "True"


# ------------------------------------------------------------- torch CPU

def _torch():
    return pytest.importorskip("torch")


def t_shares(a, b):
    return np.shares_memory(a.numpy(), b.numpy())


@pytest.mark.parametrize("seed", range(120))
def test_rearrange_views_torch(seed):
    torch = _torch()
    pattern, x, lengths = rearrange_case(seed)
    r = np.random.default_rng(seed)
    x = torch.from_numpy(relayout(x, LAYOUTS[seed % 3], r))  # no negatives
    want = einops.rearrange(x, pattern, **lengths)
    got = einc.rearrange(x, pattern, **lengths)
    assert isinstance(got, torch.Tensor)
    assert got.shape == want.shape and got.dtype == want.dtype, pattern
    assert torch.equal(got, want), pattern
    shares = t_shares(got, x)
    assert shares == t_shares(want, x), (pattern, shares)
    if shares:
        assert ([s for s, n in zip(got.stride(), got.shape) if n > 1] ==
                [s for s, n in zip(want.stride(), want.shape) if n > 1])
        got[(0,) * got.ndim] = -7
        assert want[(0,) * want.ndim] == -7 and torch.equal(got, want)


def test_torch_view_details():
    torch = _torch()
    x = torch.arange(24.).reshape(2, 3, 4)
    v = einc.rearrange(x, "a b c -> c (a b)")
    assert v.stride() == (1, 4) and v.data_ptr() == x.data_ptr()
    v[1, 2] = 100
    assert x[0, 2, 1] == 100
    s = torch.tensor(3.0)
    assert einc.rearrange(s, "->").data_ptr() == s.data_ptr()
    off = torch.arange(10.)[2:8].reshape(2, 3)  # a storage offset
    v = einc.rearrange(off, "a b -> b a")
    assert torch.equal(v, off.T) and v.data_ptr() == off.data_ptr()
    del x, off
    import gc
    gc.collect()
    assert v[0, 0] == 2
    g = torch.ones(2, 3, requires_grad=True)  # the general path: a copy
    assert torch.equal(einc.rearrange(g.detach(), "a b -> b a"),
                       torch.ones(3, 2))


@needs_numpy_views
def test_views_release_their_inputs():
    """10,000 views made and dropped: the inputs' reference counts come
    back (each view's DLPack deleter lets its input go)."""
    x = np.ones((4, 6))
    before = sys.getrefcount(x)
    for _ in range(10000):
        v = einc.rearrange(x, "a (b c) -> b a c", c=2)
    assert np.shares_memory(v, x)
    del v
    assert sys.getrefcount(x) == before
    try:
        import torch
    except ImportError:
        return
    t = torch.ones(4, 6)
    before = sys.getrefcount(t)
    for _ in range(10000):
        v = einc.rearrange(t, "a b -> b a")
    del v
    assert sys.getrefcount(t) == before


def test_plan_reports_a_view_as_one():
    """A pure view runs nothing: the plan says is_view, with 0 FLOPs and 0
    bytes, in Python, the JSON and the text (issue 28: it was a copy step
    with FLOPs = numel and twice the bytes); a plan that copies is not."""
    p = einc.plan("b h s d -> b h (s d)", (2, 3, 4, 5))
    d = p.to_dict()
    assert p.is_view and d["is_view"] is True
    assert p.flops == 0 and d["flops"] == 0 and d["bytes_moved"] == 0
    assert [(s["kind"], s["flops"], s["bytes_read"], s["bytes_written"])
            for s in d["steps"]] == [("view", 0, 0, 0)]
    assert "a view of in1: nothing runs" in str(p)
    assert p.naive_flops == 120  # opt_einsum's count stays
    q = einc.plan("a b -> (b a)", (3, 4))  # strides cannot say it: a copy
    assert not q.is_view and q.to_dict()["is_view"] is False
    assert q.to_dict()["bytes_moved"] == 2 * 12 * 4
