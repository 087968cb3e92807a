"""einc.opt_einsum (issue 27): opt_einsum's contract, contract_path and
contract_expression, computed by einc, checked against numpy.einsum in
float64 on random inputs (opt_einsum's own suite runs in tests/peers)."""

import numpy as np
import pytest

import einc.opt_einsum as eoe

rng = np.random.default_rng(2027)


def close(got, want, tol=1e-12):
    scale = max(float(np.max(np.abs(want))), 1.0) if np.size(want) else 1.0
    return np.max(np.abs(np.asarray(got) - want), initial=0.0) <= tol * scale


def test_get_symbol_range():
    assert [eoe.get_symbol(i) for i in (0, 25, 26, 51)] == ["a", "z", "A",
                                                             "Z"]
    assert eoe.get_symbol(52) == chr(192)
    assert eoe.get_symbol(55296) == chr(55296 + 2048)  # past surrogates


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12),
                                       (np.float32, 1e-5)])
def test_unicode_subscripts_past_52(dtype, tol):
    """A ring of 60 matrices: 60 symbols, most of them past the letters
    (opt_einsum names such axes with get_symbol), one of them '×', which
    is no identifier."""
    n = 60
    syms = [eoe.get_symbol(i + 30) for i in range(n)]
    assert "×" in syms
    terms = [syms[i] + syms[(i + 1) % n] for i in range(n)]
    ops = [(rng.standard_normal((2, 2)) / 1.5).astype(dtype)
           for _ in range(n)]
    eq = ",".join(terms) + "->" + syms[0] + syms[1]
    got = eoe.contract(eq, *ops)
    # entry (a, b) is ops[0][a, b] times entry (b, a) of the product of
    # the others, multiplied out in float64
    rest = np.eye(2)
    for o in ops[1:]:
        rest = rest @ o.astype(np.float64)
    want = ops[0].astype(np.float64) * rest.T
    assert got.shape == (2, 2) and got.dtype == dtype
    assert close(got, want, tol)


def test_unicode_subscripts_broadcast_size_one_past_52():
    """Past 52 symbols einc reads identifiers; a size-1 axis still
    broadcasts, as in opt_einsum."""
    syms = [eoe.get_symbol(i) for i in range(53)]
    eq = "".join(syms) + "," + syms[-1] + "->" + syms[-1]
    a = rng.standard_normal((1,) * 52 + (3,))
    b = rng.standard_normal((1,))
    got = eoe.contract(eq, a, b)
    assert close(got, a.reshape(3) * b[0])


def test_interleaved_form_with_hashable_labels():
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    want = np.einsum("ij,jk->ik", a, b)
    assert close(eoe.contract(a, ["i", "j"], b, ["j", "k"], ["i", "k"]),
                 want)
    assert close(eoe.contract(a, [0, 10**9], b, [10**9, 7], [0, 7]), want)
    got = eoe.contract(a, [Ellipsis, "j"], b, ["j", "k"])  # implicit
    assert close(got, want)
    with pytest.raises(TypeError):
        eoe.contract(a, [Ellipsis, {}], [Ellipsis, "a"])


def test_explicit_path_and_contract_path():
    shapes = [(3, 4), (4, 5), (5, 6), (6, 2)]
    ops = [rng.standard_normal(s) for s in shapes]
    eq = "ab,bc,cd,de->ae"
    want = np.einsum(eq, *ops)
    for opt in (True, False, "greedy", "optimal", "auto", "dp",
                [(2, 3), (0, 2), (0, 1)], [(0, 1), (0, 1), (0, 1)]):
        assert close(eoe.contract(eq, *ops, optimize=opt), want)
    path, info = eoe.contract_path(eq, *ops)
    assert len(path) == 3 and all(len(p) == 2 for p in path)
    assert info.eq == eq and info.input_subscripts == "ab,bc,cd,de"
    assert info.shapes == shapes and info.opt_cost <= info.naive_cost
    # opt_einsum's count: 3*4*5*6*2 = 720 points, 3 multiplies and 1 add
    assert info.naive_cost == 2880
    assert "Complete contraction:  ab,bc,cd,de->ae" in repr(info)
    assert close(eoe.contract(eq, *ops, optimize=path), want)
    given = [(2, 3), (0, 2), (0, 1)]
    assert eoe.contract_path(eq, *ops, optimize=given)[0] == given
    path, _ = eoe.contract_path(eq, *shapes, shapes=True)
    assert len(path) == 3


def test_contract_expression_with_constants_keeps_its_plan():
    a = rng.standard_normal((3, 4))
    c = rng.standard_normal((4, 5))
    expr = eoe.contract_expression("ab,bc->ac", (3, 4), c, constants=[1])
    for _ in range(3):
        a = rng.standard_normal((3, 4))
        assert close(expr(a), a @ c)
    assert len(expr._plans) == 1  # one compiled plan, reused
    a32 = a.astype(np.float32)
    got = expr(a32)
    assert got.dtype == np.float64  # promoted with the float64 constant
    with pytest.raises(ValueError, match="takes exactly 1"):
        expr(a, c)
    plain = eoe.contract_expression("ab,bc->ac", (3, 4), (4, 5))
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    assert close(plain(x, y), x @ y) and close(plain(x, y), x @ y)
    out = np.empty((3, 5))
    assert plain(x, y, out=out) is out and close(out, x @ y)
    with pytest.raises(ValueError):
        eoe.contract_expression("ab,bc->ac", (3, 4), (4, 5), out=out)


def test_bool_and_errors():
    a = rng.random((4, 5)) < 0.3
    b = rng.random((5, 3)) < 0.3
    got = eoe.contract("ij,jk->ik", a, b)
    want = np.einsum("ij,jk->ik", a.astype(float), b.astype(float)) > 0
    assert got.dtype == np.bool_ and (got == want).all()
    with pytest.raises(ValueError):
        eoe.contract("ij,jk", np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError):
        eoe.contract("->,->", 0, 5)
    with pytest.raises(TypeError):
        eoe.contract("ij->ij", np.ones((2, 2)), bad_kwarg=True)
    with pytest.raises(TypeError):
        eoe.contract_path("ij->ij", np.ones((2, 2)), bad_kwarg=True)


def test_computed_by_einc_not_numpy(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("numpy.einsum was called")

    monkeypatch.setattr(np, "einsum", refuse)
    monkeypatch.setattr(np, "tensordot", refuse)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    assert close(eoe.contract("ΑΒ,ΒΓ->ΑΓ", a, b, optimize="greedy"), a @ b)


def test_memory_limit_reaches_the_planner(monkeypatch):
    """opt_einsum's memory_limit (elements; 'max_input': the largest of
    the inputs and the output; -1 or None: none) reaches einc's planner as
    ein_options.memory_limit in bytes of the computed dtype: the plan
    keeps its buffers within it (here by slicing: unlimited, the largest
    intermediate is 6x40), and the value stays right."""
    import einc.opt_einsum as mod

    plans = []
    real = mod.Plan

    def spy(*args, **kwargs):
        plans.append((kwargs.get("memory_limit", 0), real(*args, **kwargs)))
        return plans[-1][1]

    monkeypatch.setattr(mod, "Plan", spy)
    shapes = [(6, 40), (40, 40), (40, 50)]
    eq = "ab,bc,cd->ad"
    for dtype, size in ((np.float64, 8), (np.float32, 4)):
        ops = [rng.standard_normal(s).astype(dtype) for s in shapes]
        want = np.einsum(eq, *[o.astype(np.float64) for o in ops])
        tol = 1e-12 if dtype == np.float64 else 1e-5
        for limit, elements in ((200, 200), ("max_input", 2000),
                                (None, 0), (-1, 0)):
            plans.clear()
            got = eoe.contract(eq, *ops, memory_limit=limit)
            assert close(got, want, tol) and got.dtype == dtype
            assert [b for b, _ in plans] == (
                [elements * size] if elements else []), (limit, plans)
            for b, plan in plans:
                assert plan.workspace_bytes <= b
                if limit == 200:
                    assert plan.largest_intermediate < 240
    # a limit no plan meets: opt_einsum's one step of every operand (the
    # path), a result computed all the same
    path, _ = eoe.contract_path(eq, *shapes, shapes=True, memory_limit=1)
    assert path == [(0, 1, 2)]
    assert close(eoe.contract(eq, *ops, memory_limit=1), want, 1e-5)
    path, _ = eoe.contract_path(eq, *shapes, shapes=True, memory_limit=200)
    assert len(path) == 2
    plans.clear()
    expr = eoe.contract_expression(eq, *shapes, memory_limit=200)
    assert close(expr(*ops), want, 1e-5)
    assert [b for b, _ in plans][-1] == 200 * 4
    for bad in ("min_input", 0, -2):
        with pytest.raises(ValueError):
            eoe.contract(eq, *ops, memory_limit=bad)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64",
                                   "complex64", "int16", "int64", "bool"])
def test_full_reduction_without_keywords_as_opt_einsum(dtype):
    """contract('ab->', a) with no keyword: the scalar opt_einsum gives,
    of its type (the builtin's 0-d rule was handed None for the absent
    keywords and raised AttributeError on every dtype the builtin
    served)."""
    import opt_einsum
    import einc.opt_einsum as EO

    a = (np.arange(10).reshape(2, 5) % 3 + 1).astype(dtype)
    for eq, ops in (("ab->", (a,)), ("ab,ab->", (a, a))):
        want = opt_einsum.contract(eq, *ops)
        got = EO.contract(eq, *ops)
        assert type(got) is type(want) and got == want


def test_expression_on_other_sizes_of_the_same_ranks_as_opt_einsum():
    """A ContractExpression called with other sizes of the same ranks
    computes, as opt_einsum's does (its 'few checks'); other ranks and
    inconsistent sizes raise its ValueError (was: every other size)."""
    import opt_einsum

    rng = np.random.default_rng(43)
    a, b = rng.random((4, 5)), rng.random((5, 3))
    for m in (opt_einsum, eoe):
        e = m.contract_expression("ij,jk->ik", (4, 5), (5, 3))
        np.testing.assert_allclose(e(a[:3], b[:, :2]), a[:3] @ b[:, :2],
                                   rtol=1e-12)
        for bad in ((a[:, :4], b), (a[None], b)):
            with pytest.raises(ValueError, match="Internal error"):
                e(*bad)
