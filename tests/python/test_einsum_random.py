"""einc.einsum against numpy.einsum on random expressions: 1 to 4 operands,
random axis orders and sizes (0 and 1 included), diagonals, broadcasting
through '...', outer products, full reductions; each case written in the
einops dialect (spaces, expr first and last) and in numpy's."""
import string

import numpy as np
import pytest

import einc

NCASES = 400


def random_case(r):
    """(numpy subscripts, einops expression, shapes)."""
    letters = list("abcdefgh")
    nops = int(r.integers(1, 5))
    naxes = int(r.integers(1, 6))
    axes = letters[:naxes]
    size = {a: int(r.choice([0, 1, 2, 3, 4, 5])) if r.random() < 0.1
            else int(r.integers(1, 6)) for a in axes}
    ell = r.random() < 0.2
    ell_shape = tuple(int(r.integers(1, 4)) for _ in range(int(r.integers(0, 3))))
    terms, shapes = [], []
    for _ in range(nops):
        k = int(r.integers(0, min(4, naxes) + 1))
        term = list(r.choice(axes, size=k, replace=True)) if k else []
        if r.random() > 0.15:  # mostly without diagonals
            term = list(dict.fromkeys(term))
        shape = [size[a] for a in term]
        if ell:
            # a broadcast ellipsis: some dims are 1
            mine = tuple(d if r.random() < 0.7 else 1 for d in ell_shape)
            mine = mine[int(r.integers(0, len(mine) + 1)):] if mine else mine
            term = ["..."] + term
            shape = list(mine) + shape
        terms.append(term)
        shapes.append(tuple(shape))
    used = sorted({a for t in terms for a in t if a != "..."})
    out = [a for a in used if r.random() < 0.5]
    r.shuffle(out)
    if ell:
        out = ["..."] + out
    np_expr = ",".join("".join(t) for t in terms) + "->" + "".join(out)
    ein_expr = ", ".join(" ".join(t) for t in terms) + " -> " + " ".join(out)
    return np_expr, ein_expr, shapes


def cases():
    r = np.random.default_rng(2026)
    return [random_case(r) for _ in range(NCASES)]


@pytest.mark.parametrize("np_expr,ein_expr,shapes", cases())
def test_random_against_numpy(np_expr, ein_expr, shapes):
    r = np.random.default_rng(abs(hash(np_expr)) % 2**32)
    ts = [r.standard_normal(s) for s in shapes]
    want = np.einsum(np_expr, *ts)
    got = einc.einsum(ein_expr, *ts)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # the numpy dialect, detected and forced, and einops' argument order
    np.testing.assert_allclose(einc.einsum(np_expr, *ts, numpy=True), want,
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(einc.einsum(*ts, ein_expr), want,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("expr", ["ij,jk->ik", "ij,jk", "ii->i", "ii", "ij->",
                                  "bij,bjk->bik", "i,i", "i,j->ij",
                                  "...ij,...jk->...ik", "ijk->kji"])
def test_numpy_dialect_detected(expr):
    r = np.random.default_rng(5)
    lhs = expr.split("->")[0].split(",")
    dims = {c: int(r.integers(2, 5)) for c in string.ascii_letters}
    ts = [r.standard_normal([dims[c] for c in t.replace("...", "")]
                            if "..." not in t else
                            [2] + [dims[c] for c in t.replace("...", "")])
          for t in lhs]
    np.testing.assert_allclose(einc.einsum(expr, *ts), np.einsum(expr, *ts),
                               rtol=1e-12, atol=1e-12)


def test_opt_einsum_style_chain():
    r = np.random.default_rng(7)
    a, b, c = (r.standard_normal(s) for s in [(30, 4), (4, 30), (30, 5)])
    np.testing.assert_allclose(einc.einsum("i j, j k, k l -> i l", a, b, c),
                               a @ b @ c, rtol=1e-10)
