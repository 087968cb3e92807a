"""torch CPU tensors, when torch is installed (skipped otherwise): torch
in gives torch out, on the same dtype, zero-copy out=, strided views,
storage offsets, 0-d and empty tensors, bfloat16."""
import numpy as np
import pytest

import einc

torch = pytest.importorskip("torch")


def test_torch_in_torch_out():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    torch.testing.assert_close(got, a @ b)
    torch.testing.assert_close(einc.rearrange(a, "i j -> j i"), a.T)


def test_torch_views_and_out():
    x = torch.randn(8, 12)[::2, 1::3]
    y = torch.randn(4, 5).flip(0)
    out = torch.empty(4, 5)
    assert einc.einsum("i j, j k -> i k", x, y, out=out) is out
    torch.testing.assert_close(out, x @ y)


def test_torch_zero_d_empty_and_offsets():
    """0-d and empty tensors through contractions and reductions, and
    views that start inside their storage (a byte offset) or step over
    it, on the cached path and the general one (out=) alike."""
    s = torch.tensor(3.0)
    for got in (einc.einsum(" -> ", s), einc.einsum(", -> ", s, s)):
        assert isinstance(got, torch.Tensor) and got.shape == ()
    assert float(einc.einsum(", -> ", s, s)) == 9.0
    e = torch.zeros(0, 4)
    torch.testing.assert_close(einc.reduce(e, "i j -> j", "sum"),
                               torch.zeros(4))
    assert einc.einsum("i j, j k -> i k", e, torch.ones(4, 2)).shape == (0, 2)
    torch.testing.assert_close(einc.einsum("i j, j k -> i k",
                                           torch.ones(3, 0), torch.ones(0, 2)),
                               torch.zeros(3, 2))
    base = torch.arange(96.).reshape(8, 12)
    x = base[3:7, 2:]  # starts 38 elements in
    y = torch.arange(200.).reshape(10, 20)[:, 3::6]  # stepped, offset
    assert x.storage_offset() and y.storage_offset()
    want = x @ y
    torch.testing.assert_close(einc.einsum("i j, k j -> i k", x, y.T), want)
    out = torch.empty(4, 3)
    assert einc.einsum("i j, j k -> i k", x, y, out=out) is out
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(einc.reduce(x, "i j -> j", "max"),
                               x.amax(0))


def test_torch_bfloat16():
    a = torch.randn(3, 8, dtype=torch.bfloat16)
    b = torch.randn(8, 2, dtype=torch.bfloat16)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert got.dtype == torch.bfloat16
    np.testing.assert_allclose(got.float().numpy(),
                               (a.float() @ b.float()).numpy(), rtol=2e-2,
                               atol=2e-2)


# The fast path (python/src/call.c, inputs.c) for torch CPU tensors.

def test_torch_fast_path_taken_and_right():
    from einc import _einc

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    einc.einsum("i j, j k -> i k", a, b)  # arms the torch fast path
    got = _einc.fast(("i j, j k -> i k", a, b), None, None)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    torch.testing.assert_close(got, a @ b)
    x = torch.arange(24, dtype=torch.int64).reshape(2, 3, 4)
    got = _einc.fast((x, "a b c -> c a b"), False, None)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int64
    assert torch.equal(got, x.permute(2, 0, 1))
    torch.testing.assert_close(einc.reduce(x.double(), "a b c -> b", "max"),
                               x.double().amax(dim=(0, 2)))


def test_torch_and_numpy_share_entries_but_not_results():
    """One table entry serves both; each gets its own kind of array."""
    n = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_numpy(n.copy())
    for _ in range(2):
        got_t = einc.rearrange(t, "i j -> j i")
        got_n = einc.rearrange(n, "i j -> j i")
        assert isinstance(got_t, torch.Tensor)
        assert isinstance(got_n, np.ndarray)
        np.testing.assert_array_equal(got_t.numpy(), got_n)


@pytest.mark.parametrize("make", [
    lambda: torch.randn(4, 4, requires_grad=True),
    lambda: torch.nn.Parameter(torch.randn(4, 4)),
    lambda: torch.randn(4, 4, dtype=torch.bfloat16),
    lambda: torch.randn(4, 4, dtype=torch.complex64),
    lambda: torch.randn(8, 8)[::2, ::2],
])
def test_torch_unusual_tensors_behave_as_the_general_path(make):
    """Tensors the fast path leaves alone (grad, subclasses, bf16,
    complex) and strided views: the same result or error as the general
    path, whose __dlpack__ call keeps torch's own checks."""
    from einc import _core

    x = make()
    def call(fast):
        if fast:
            return einc.einsum("i j -> j i", x)
        return _core.evaluate("i j -> j i", (x,), numpy=False)
    outcomes = []
    for fast in (True, False):
        try:
            outcomes.append(("ok", call(fast)))
        except Exception as e:  # noqa: BLE001 - compared below
            outcomes.append(("error", type(e)))
    assert outcomes[0][0] == outcomes[1][0]
    if outcomes[0][0] == "ok":
        torch.testing.assert_close(outcomes[0][1], outcomes[1][1])
    else:
        assert outcomes[0][1] is outcomes[1][1]


def test_torch_fast_path_memory_flat():
    from conftest import rss_kib

    a, b = torch.randn(16, 16), torch.randn(16, 16)
    for _ in range(2000):
        einc.einsum("i j, j k -> i k", a, b)
    before = rss_kib()
    for _ in range(20000):
        einc.einsum("i j, j k -> i k", a, b)
        einc.rearrange(a, "i j -> j i")
    assert rss_kib() - before < 4096


# torch's lazy negative and conjugate bits: DLPack cannot carry them and
# torch's export drops the negative bit silently, so einc resolves them and
# must give what torch's own operations give.

def _lazy_bit_tensors():
    z = (torch.arange(12.).reshape(3, 4) - 5) * (1 - 2j)
    return {"z.conj().imag (negative bit, float)": z.conj().imag,
            "z.conj() (conjugate bit)": z.conj(),
            "_neg_view(z) (negative bit, complex)": torch._neg_view(z),
            "_neg_view(z.conj())": torch._neg_view(z.conj())}


@pytest.mark.parametrize("name", list(_lazy_bit_tensors()))
def test_torch_negative_and_conjugate_bits_read_as_torch_reads_them(name):
    t = _lazy_bit_tensors()[name]
    want_t = t.resolve_conj().resolve_neg()
    assert torch.equal(einc.rearrange(t, "a b -> b a"), want_t.T), name
    assert torch.equal(einc.rearrange(t, "a b -> b a"), want_t.T), name  # cached
    assert torch.equal(einc.einsum("a b -> b", t), want_t.sum(0)), name
    assert torch.equal(einc.einsum("a b -> b", t), want_t.sum(0)), name
    other = torch.ones(4, 2, dtype=t.dtype)
    torch.testing.assert_close(einc.einsum("a b, b c -> a c", t, other),
                               want_t @ other)
    if not t.is_complex():  # complex has no max
        assert torch.equal(einc.reduce(t, "a b -> a", "max"), want_t.amax(1))


def test_torch_out_with_a_lazy_bit_is_refused():
    a = torch.randn(2, 3)
    out = torch.zeros(3, 2, dtype=torch.complex64).conj().imag
    with pytest.raises(ValueError, match="negative or conjugate bit"):
        einc.einsum("i j -> j i", a, out=out)
    assert torch.equal(out.resolve_neg(), torch.zeros(3, 2))


def _kinds():
    """torch tensors DLPack cannot carry: (tensor, words the error names)."""
    return [(torch.ones(3, 4, device="meta"), ["meta device", "(3, 4)"]),
            (torch.ones(3, 4).to_sparse(), ["sparse_coo", "strided"]),
            (torch.ones(3, 4).to_sparse_csr(), ["sparse_csr", "strided"])]


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch: CSR is beta
def test_meta_and_sparse_tensors_get_einc_errors():
    """Not DLPack's raw 'Unknown device type meta for Dlpack' or 'Can't
    export tensors with layout other than torch.strided': which operand,
    what it is, what einc takes; through einsum, a compiled plan and out=."""
    dense = torch.ones(3, 4)
    plan = einc.compile("i j, i j -> i", (3, 4), (3, 4))
    for bad, words in _kinds():
        calls = [(lambda: einc.einsum("i j, i j -> i", dense, bad),
                  "operand 2"),
                 (lambda: einc.rearrange(bad, "i j -> j i"), "operand 1"),
                 (lambda: plan(bad, dense), "operand 1"),
                 (lambda: einc.einsum("i j -> j i", dense.T, out=bad),
                  "out=")]
        for call, what in calls:
            with pytest.raises(einc.EincError) as e:
                call()
            for w in [what] + words:
                assert w in str(e.value), str(e.value)
