"""Tensors in and out: strides, negative strides, byte offsets, 0-d and
empty arrays, every dtype (complex64 and complex128 too), out= (in place,
shared memory), numpy's bfloat16, lists and scalars, mixed dtypes,
read-only arrays."""
import numpy as np
import pytest

import einc

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
          np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def rand(shape, dtype=np.float64, seed=0):
    r = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return r.integers(0, 5, shape).astype(dtype)
    return r.standard_normal(shape).astype(dtype)


def test_result_is_a_new_numpy_array_of_the_input_dtype():
    a = rand((3, 4), np.float32)
    got = einc.einsum("i j -> (j i)", a)  # strides cannot say it: a copy
    assert type(got) is np.ndarray and got.dtype == np.float32
    assert got.flags.c_contiguous and not np.shares_memory(got, a)
    np.testing.assert_array_equal(got, a.T.reshape(-1))
    view = einc.einsum("i j -> j i", a)  # a transpose is a view (test_views)
    assert type(view) is np.ndarray
    # NumPy < 2.1 imports DLPack read-only: einc copies there
    views = np.lib.NumpyVersion(np.__version__) >= "2.1.0"
    assert np.shares_memory(view, a) == views


@pytest.mark.parametrize("view", [
    lambda x: x[::2, 1::3],           # strided
    lambda x: x[::-1],                # negative stride
    lambda x: x[:, ::-2],             # negative, strided
    lambda x: x.T,                    # transposed
    lambda x: x[3:, 5:],              # byte offset
    lambda x: np.broadcast_to(x[:1], x.shape),  # zero stride
])
def test_views(view):
    x = view(rand((8, 12)))
    y = rand((x.shape[1], 5), seed=1)[::-1]
    np.testing.assert_allclose(einc.einsum("i j, j k -> i k", x, y), x @ y,
                               rtol=1e-12)
    np.testing.assert_array_equal(einc.rearrange(x, "a b -> b a"), x.T)


def test_zero_dim_and_empty():
    s = np.array(3.5)
    assert einc.einsum(" -> ", s) == 3.5
    assert einc.einsum("i, i -> ", np.arange(4.0), np.arange(4.0)) == 14.0
    e = np.zeros((0, 3))
    assert einc.einsum("i j -> j i", e).shape == (3, 0)
    np.testing.assert_array_equal(einc.einsum("i j -> j", e), np.zeros(3))
    assert einc.einsum("i j, j k -> i k", e, np.ones((3, 2))).shape == (0, 2)
    np.testing.assert_array_equal(
        einc.einsum("i j, j k -> i k", np.ones((2, 0)), np.ones((0, 3))),
        np.zeros((2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(dtype):
    a, b = rand((3, 4), dtype), rand((4, 2), dtype, seed=1)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert got.dtype == dtype
    want = np.einsum("ij,jk->ik", a.astype(np.float64), b.astype(np.float64))
    tol = 1e-2 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol)
    np.testing.assert_array_equal(einc.rearrange(a, "i j -> j i"), a.T)


def crand(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(
        dtype)


COMPLEX_EXPRS = [
    ("i j, j k -> i k", "ij,jk->ik", [(5, 6), (6, 7)]),
    ("b i j, b j k -> b k i", "bij,bjk->bki", [(3, 4, 5), (3, 5, 2)]),
    ("i j, j k, k l -> i l", "ij,jk,kl->il", [(4, 5), (5, 6), (6, 3)]),
    ("i i -> i", "ii->i", [(5, 5)]),
    ("i j -> ", "ij->", [(40, 30)]),
    ("i, j -> i j", "i,j->ij", [(7,), (9,)]),
]


@pytest.mark.parametrize("dtype,rtol", [(np.complex64, 1e-5),
                                        (np.complex128, 1e-12)])
@pytest.mark.parametrize("expr,np_expr,shapes", COMPLEX_EXPRS)
def test_complex_against_numpy(dtype, rtol, expr, np_expr, shapes):
    xs = [crand(s, dtype, seed=k) for k, s in enumerate(shapes)]
    got = einc.einsum(expr, *xs)
    assert got.dtype == dtype
    want = np.einsum(np_expr, *[x.astype(np.complex128) for x in xs])
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err <= rtol, err
    # the numpy dialect and a strided, transposed view as well
    np.testing.assert_allclose(einc.einsum(np_expr, *xs), got, rtol=rtol,
                               atol=rtol * np.abs(want).max())


def test_complex_views_reductions_and_errors():
    x = crand((8, 12), np.complex128)[::2, ::-3]
    np.testing.assert_array_equal(einc.rearrange(x, "a b -> b a"), x.T)
    np.testing.assert_allclose(einc.reduce(x, "a b -> a", "mean"),
                               x.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(einc.reduce(x, "a b -> b", "prod"),
                               x.prod(axis=0), rtol=1e-12)
    # mixed real and complex promote as numpy.einsum does
    got = einc.einsum("i j, j -> i", x, np.arange(4.0, dtype=np.float32))
    assert got.dtype == np.complex128
    for r in ("max", "min"):
        with pytest.raises(einc.EincError, match=f"'{r}'"):
            einc.reduce(x, "a b -> a", r)


def test_bool():
    x = rand((4, 5)) > 0
    np.testing.assert_array_equal(einc.rearrange(x, "a b -> b a"), x.T)
    np.testing.assert_array_equal(einc.reduce(x, "a b -> a", "any"), x.any(1))
    np.testing.assert_array_equal(einc.repeat(x, "a b -> a b 2"),
                                  np.repeat(x[..., None], 2, axis=2))


def test_out_in_place_shares_memory():
    a, b = rand((3, 4)), rand((4, 5), seed=1)
    out = np.empty((3, 5))
    got = einc.einsum("i j, j k -> i k", a, b, out=out)
    assert got is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    big = np.zeros((6, 10))
    view = big[::2, ::2]  # a strided output
    einc.einsum("i j, j k -> i k", a, b, out=view)
    assert np.shares_memory(view, big)
    np.testing.assert_allclose(big[::2, ::2], a @ b, rtol=1e-12)
    assert not big[1::2].any() and not big[:, 1::2].any()


def test_out_errors():
    a = rand((3, 4))
    ro = np.empty((4, 3))
    ro.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        einc.rearrange_out = einc.einsum("i j -> j i", a, out=ro)
    with pytest.raises(einc.EincError, match="shape|dims|output"):
        einc.einsum("i j -> j i", a, out=np.empty((3, 4)))
    with pytest.raises(einc.EincError):
        einc.einsum("i j -> j i", a, out=np.empty((4, 3), np.float32))


def test_read_only_inputs():
    a = rand((3, 4))
    a.flags.writeable = False
    np.testing.assert_array_equal(einc.rearrange(a, "i j -> j i"), a.T)


def test_lists_and_scalars():
    got = einc.rearrange([np.arange(3), np.arange(3) + 3], "b n -> n b")
    np.testing.assert_array_equal(got, [[0, 3], [1, 4], [2, 5]])
    np.testing.assert_array_equal(
        einc.einsum("i, j -> i j", [1.0, 2.0], np.float64(3.0) * np.ones(2)),
        [[3, 3], [6, 6]])


def test_mixed_dtypes_promote_as_numpy():
    a, b = rand((3, 4), np.float32), rand((4, 2), np.float64)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.einsum("ij,jk->ik", a, b), rtol=1e-6)


def test_non_native_byte_order():
    a = rand((3, 4)).astype(">f8")
    np.testing.assert_array_equal(einc.rearrange(a, "i j -> j i"), a.T)


def test_bfloat16_numpy():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    a, b = rand((3, 8)).astype(bf16), rand((8, 2), seed=1).astype(bf16)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert got.dtype == bf16
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2,
                               atol=1e-2)
    np.testing.assert_array_equal(einc.rearrange(a, "i j -> j i"), a.T)
    out = np.empty((3, 2), bf16)
    assert einc.einsum("i j, j k -> i k", a, b, out=out) is out
    np.testing.assert_array_equal(out, got)


def test_not_an_array():
    with pytest.raises(TypeError):
        einc.einsum("i -> i", object())


def test_dlpack_capsule_and_foreign_producer():
    class Producer:  # an array-like that only speaks legacy DLPack
        def __init__(self, a):
            self.a = a
            self.shape = a.shape

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = rand((2, 3))
    out = np.empty((3, 2))
    einc.einsum("i j -> j i", Producer(a), out=out)
    np.testing.assert_array_equal(out, a.T)
