"""einc.numpy (issue 27): numpy.einsum's call forms, keywords, errors and
results, computed by einc, checked against numpy.einsum in float64 on
random inputs (numpy's own suite runs in tests/peers)."""

import numpy as np
import pytest

import einc.numpy as enp

rng = np.random.default_rng(27)


def ref(eq, *ops):
    """numpy.einsum in float64 (or complex128): the reference."""
    wide = [np.asarray(o, np.complex128 if np.iscomplexobj(o) else
                       np.float64) for o in ops]
    return np.einsum(eq, *wide)


def close(got, want, tol):
    scale = max(float(np.max(np.abs(want))), 1.0) if np.size(want) else 1.0
    return np.max(np.abs(np.asarray(got) - want), initial=0.0) <= tol * scale


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12),
                                       (np.float32, 1e-5),
                                       (np.complex128, 1e-12)])
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(5, 7), (7, 3)]),
    ("ij,jk", [(4, 6), (6, 2)]),
    ("bij,bjk->bki", [(3, 4, 5), (3, 5, 2)]),
    ("...ij,...j", [(2, 3, 4), (4,)]),
    ("ii->i", [(6, 6)]),
    ("ijk,kl,lm->im", [(3, 4, 5), (5, 6), (6, 2)]),
])
def test_values_against_float64(eq, shapes, dtype, tol):
    ops = [rng.standard_normal(s).astype(dtype) for s in shapes]
    if dtype == np.complex128:
        ops = [o + 1j * rng.standard_normal(o.shape) for o in ops]
    got = enp.einsum(eq, *ops)
    want = ref(eq, *ops)
    assert got.shape == want.shape and got.dtype == np.result_type(*ops)
    assert close(got, want, tol)


def test_sublist_form_is_the_string_form():
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    want = ref("ij,jk->ik", a, b)
    assert close(enp.einsum(a, [0, 1], b, [1, 2], [0, 2]), want, 1e-12)
    assert close(enp.einsum(a, [0, 1], b, [1, 2]), want, 1e-12)  # implicit
    x = rng.standard_normal((2, 3, 4))
    got = enp.einsum(x, [Ellipsis, 1], [1, Ellipsis])
    assert close(got, ref("...B->B...", x), 1e-12)
    with pytest.raises(ValueError):
        enp.einsum(a, [0, 52], b, [52, 2], [0, 2])
    with pytest.raises(TypeError):
        enp.einsum(a, [0, "x"], b, [1, 2])


def test_out_of_another_dtype_follows_casting():
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    out = np.zeros((3, 5), np.float32)
    assert enp.einsum("ij,jk->ik", a, b, out=out,
                      casting="same_kind") is out
    assert close(out, ref("ij,jk->ik", a, b), 1e-5)
    with pytest.raises(TypeError):  # float64 into float32 is not 'safe'
        enp.einsum("ij,jk->ik", a, b, out=out)
    iout = np.zeros((3, 5), np.int64)
    enp.einsum("ij,jk->ik", a, b, out=iout, casting="unsafe")
    assert (iout == ref("ij,jk->ik", a, b).astype(np.int64)).all()


def test_out_overlapping_an_input_is_computed_first():
    a = rng.integers(-5, 5, (4, 4))
    b = rng.integers(-5, 5, (4, 4))
    want = a @ b
    assert enp.einsum("ij,jk->ik", a, b, out=b) is b
    assert (b == want).all()
    c = rng.standard_normal((4, 4))
    want = ref("ij->ji", c) * 1  # the transpose, written over itself
    enp.einsum("ij->ji", c.copy(), out=c)
    assert close(c, want, 1e-12)


def test_dtype_and_casting():
    a = rng.integers(0, 9, (3, 4))
    got = enp.einsum("ij->j", a, dtype=np.float64)
    assert got.dtype == np.float64 and close(got, ref("ij->j", a), 1e-12)
    with pytest.raises(TypeError):  # int64 to float32 is not 'safe'
        enp.einsum("ij->j", a, dtype=np.float32)
    with pytest.raises(TypeError):
        enp.einsum("ij->j", rng.standard_normal((3, 4)), dtype=np.int32)
    got = enp.einsum("ij->j", rng.standard_normal((3, 4)), dtype=np.int32,
                     casting="unsafe")
    assert got.dtype == np.int32
    with pytest.raises(ValueError):
        enp.einsum("ij->j", a, casting="blah")
    with pytest.raises(TypeError):
        enp.einsum("ij->j", a, dtype="bad_data_type")


def test_bool_is_an_or_of_ands():
    for _ in range(20):
        a = rng.random((4, 5)) < 0.3
        b = rng.random((5, 3)) < 0.3
        got = enp.einsum("ij,jk->ik", a, b)
        assert got.dtype == np.bool_
        assert (got == (ref("ij,jk->ik", a, b) > 0)).all()
    a = rng.random((4, 5)) < 0.2
    assert (enp.einsum("ij->i", a) == a.any(axis=1)).all()


def test_order():
    a = np.asfortranarray(rng.standard_normal((2, 3, 5)))
    b = np.asfortranarray(rng.standard_normal((4, 3)))
    eq = "...ft,mf->...mt"
    assert enp.einsum(eq, a, b, order="F").flags.f_contiguous
    assert enp.einsum(eq, a, b, order="C").flags.c_contiguous
    assert enp.einsum(eq, a, b, order="A").flags.f_contiguous
    k = enp.einsum(eq, a, b)  # 'K': the inputs' layout, neither C nor F
    assert not k.flags.c_contiguous and not k.flags.f_contiguous
    assert close(k, ref(eq, a, b), 1e-12)


def test_optimize_keywords_and_explicit_paths():
    ops = [rng.standard_normal(s) for s in [(3, 4), (4, 5), (5, 6), (6, 2)]]
    eq = "ab,bc,cd,de->ae"
    want = ref(eq, *ops)
    for opt in (False, True, "greedy", "optimal", ("greedy", 0),
                ["einsum_path", (2, 3), (0, 2), (0, 1)],
                ["einsum_path", (0, 1, 2, 3)]):
        assert close(enp.einsum(eq, *ops, optimize=opt), want, 1e-12)
    with pytest.raises(RuntimeError):  # leaves two operands
        enp.einsum(eq, *ops, optimize=["einsum_path", (2, 3), (0, 1)])
    with pytest.raises(KeyError):  # numpy's error for an unknown name
        enp.einsum(eq, *ops, optimize="fastest")
    with pytest.raises(TypeError):
        enp.einsum(eq, *ops, optimize=3)
    path, report = enp.einsum_path(eq, *ops, optimize="greedy")
    assert path[0] == "einsum_path" and len(path) == 4
    assert all(len(step) == 2 for step in path[1:])
    assert "Complete contraction:  ab,bc,cd,de->ae" in report
    assert close(enp.einsum(eq, *ops, optimize=path), want, 1e-12)
    assert enp.einsum_path(eq, *ops, optimize=False)[0] == \
        ["einsum_path", (0, 1, 2, 3)]


def test_numpy_errors():
    with pytest.raises(ValueError):
        enp.einsum()
    with pytest.raises(TypeError):
        enp.einsum(0, 0)
    with pytest.raises(ValueError):
        enp.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError):
        enp.einsum("i->ij", np.ones(3))
    with pytest.raises(ValueError):
        enp.einsum("i%", np.ones(3))
    with pytest.raises(TypeError):
        enp.einsum("i", np.ones(3), bad_arg=0)
    with pytest.raises(TypeError):
        enp.einsum("i", np.ones(3), out="test")


def test_views_are_numpy_views():
    a = np.arange(6).reshape(2, 3)
    for call in (lambda: enp.einsum("ij->ji", a),
                 lambda: enp.einsum(a, [0, 1], [1, 0]),
                 lambda: enp.einsum("...", a)):
        v = call()
        assert v.base is a.base and np.shares_memory(v, a)


def test_computed_by_einc_not_numpy(monkeypatch):
    """numpy.einsum unavailable: einc.numpy still computes."""
    def refuse(*args, **kwargs):
        raise AssertionError("numpy.einsum was called")

    monkeypatch.setattr(np, "einsum", refuse)
    monkeypatch.setattr("einc.numpy._numpy_einsum", refuse)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    assert close(enp.einsum(a, [0, 1], b, [1, 2], dtype=np.float64,
                            optimize=True), a @ b, 1e-12)


def test_object_and_longdouble_go_to_numpy():
    a = np.arange(6, dtype=np.longdouble).reshape(2, 3)
    got = enp.einsum("ij->j", a)
    assert got.dtype == np.longdouble and (got == a.sum(0)).all()
    o = np.array([1, 2, 3], dtype=object)
    assert enp.einsum("i,i", o, o) == 14
