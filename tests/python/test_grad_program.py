"""einc.grad_program: the gradient program ein_grad_create derives, as
the dict the framework layers run (the values are checked numerically by
tests/test_grad.c; here: its form, its ops, its shapes and its costs)."""
import pytest

import einc
from einc import _grad

MATMUL = ("b s d, d f -> b s f", (2, 3, 4), (4, 5))


def test_matmul_steps_are_one_contraction_each():
    expr, a, b = MATMUL
    da = einc.grad_program(expr, a, b, wrt=0)
    db = einc.grad_program(expr, a, b, wrt=1)
    assert [s["op"] for s in da["steps"]] == ["einsum"]
    assert da["steps"][0]["expr"] == "b s f, d f -> b s d"
    assert da["steps"][0]["operands"] == (("dout", 0), ("input", 1))
    assert da["steps"][-1]["shape"] == a
    assert db["steps"][0]["expr"] == "b s f, b s d -> d f"
    assert db["steps"][-1]["shape"] == b
    assert not da["needs_output"] and not da["conjugates"]


def test_matmul_backward_is_twice_the_forward_flops():
    expr, a, b = MATMUL
    forward = einc.plan(expr, a, b).flops
    backward = sum(einc.grad_program(expr, a, b, wrt=w)["flops"]
                   for w in (0, 1))
    assert forward > 0
    assert backward == 2 * forward


def test_max_program_splits_ties_through_a_count():
    p = einc.grad_program("a b -> a", (2, 3), reduce="max")
    assert [s["op"] for s in p["steps"]] == [
        "einsum", "equal", "einsum", "div", "einsum", "mul"]
    assert p["needs_output"]
    assert p["steps"][0]["operands"] == (("output", 0),)
    assert p["steps"][0]["lengths"] == (("b", 3),)
    assert p["steps"][3]["shape"] == (2,)
    assert p["steps"][-1]["shape"] == (2, 3)


def test_mean_scales_by_the_reduced_count():
    p = einc.grad_program("a b c -> a", (2, 3, 5), reduce="mean")
    assert [s["op"] for s in p["steps"]] == ["einsum", "scale"]
    assert p["steps"][1]["scale"] == pytest.approx(1 / 15)


def test_diagonal_scatters_with_summed_strides():
    p = einc.grad_program("i i j -> j", (3, 3, 2))
    assert [s["op"] for s in p["steps"]] == ["einsum", "scatter_diag"]
    assert p["steps"][0]["shape"] == (3, 2)
    assert p["steps"][1]["shape"] == (3, 3, 2)
    assert p["steps"][1]["view_strides"] == (6 + 2, 1)


def test_anonymous_and_ellipsis_axes_get_fresh_names():
    p = einc.grad_program("... n0 3 -> ... n0", (2, 4, 3), wrt=0)
    expr = p["steps"][0]["expr"]
    names = expr.replace(",", " ").replace("->", " ").split()
    assert "n0" in names and len(set(names)) == 3, expr
    assert p["steps"][0]["lengths"] and p["steps"][0]["lengths"][0][1] == 3


def test_complex_conjugates_and_program_is_cached():
    p = einc.grad_program("i j, j -> i", (2, 3), (3,), wrt=1,
                          dtype="complex64")
    assert p["conjugates"]
    q = einc.grad_program("i j, j -> i", (2, 3), (3,), wrt=1,
                          dtype="complex64")
    assert p is q and _grad.program.cache_info().hits >= 1


@pytest.mark.parametrize("kwargs, status", [
    (dict(dtype="int32"), "bad dtype"),
    (dict(reduce="any"), "bad reduction"),
    (dict(wrt=1), "invalid argument"),
])
def test_errors(kwargs, status):
    with pytest.raises(einc.EincError) as e:
        einc.grad_program("a b -> a", (2, 3), **kwargs)
    assert e.value.code == status, str(e.value)
