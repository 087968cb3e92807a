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


# --- the dict is a runnable program: run it with numpy (EINSUM steps
# through einc.einsum) and compare with torch.autograd on the same inputs.

def run_program(prog, inputs, output, dout):
    """Runs a grad_program dict as a framework layer would."""
    import numpy as np
    conj = np.conj if prog["conjugates"] else (lambda a: a)
    values = {"dout": [dout], "input": [conj(x) for x in inputs],
              "output": [None if output is None else conj(output)]}
    steps = values["step"] = []
    elementwise = {
        "equal": lambda a, b: (a == b).astype(a.dtype),
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "is_zero": lambda a: (a == 0).astype(a.dtype),
        "zero_to_one": lambda a: np.where(a == 0, np.ones_like(a), a),
    }
    for s in prog["steps"]:
        ops = [values[kind][i] for kind, i in s["operands"]]
        if s["op"] == "einsum":
            r = einc.einsum(s["expr"], *ops, reduce=s["reduction"],
                            numpy=False, **dict(s["lengths"]))
        elif s["op"] == "scale":
            r = ops[0] * s["scale"]
        elif s["op"] == "prod_select":
            g, p, x, z = ops
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(z == 0, g * p / np.where(x == 0, 1, x),
                             np.where((z == 1) & (x == 0), g * p, 0))
        elif s["op"] == "scatter_diag":
            r = np.zeros(s["shape"], ops[0].dtype)
            view = np.lib.stride_tricks.as_strided(
                r, ops[0].shape,
                [v * r.itemsize for v in s["view_strides"]])
            view[...] = ops[0]
        else:
            r = elementwise[s["op"]](*ops)
        assert r.shape == tuple(s["shape"]), (s, r.shape)
        steps.append(np.ascontiguousarray(r))
    return steps[-1]


TORCH_CASES = [
    # (expr, shapes, kwargs, torch forward)
    ("b s d, d f -> b s f", [(2, 3, 4), (4, 5)], {},
     lambda t, a, b: t.einsum("bsd,df->bsf", a, b)),
    ("i i j -> j", [(3, 3, 2)], {}, lambda t, a: t.einsum("iij->j", a)),
    ("a b c -> a", [(2, 3, 4)], {"reduce": "mean"},
     lambda t, a: a.mean(dim=(1, 2))),
    ("a b -> a", [(3, 4)], {"reduce": "max"}, lambda t, a: a.amax(dim=1)),
    ("a b -> b", [(4, 3)], {"reduce": "min"}, lambda t, a: a.amin(dim=0)),
    ("a b -> a", [(4, 3)], {"reduce": "prod"}, lambda t, a: a.prod(dim=1)),
    ("b (h d) -> d b h", [(2, 6)], {"h": 2},
     lambda t, a: a.reshape(2, 2, 3).permute(2, 0, 1)),
    ("a, b -> a b r", [(2,), (3,)], {"r": 2},
     lambda t, a, b: (a[:, None] * b[None, :])[..., None].expand(2, 3, 2)),
]


@pytest.mark.parametrize("case", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_program_matches_torch_autograd(case, dtype):
    torch = pytest.importorskip("torch")
    import numpy as np
    expr, shapes, kwargs, forward = case
    reduce = kwargs.get("reduce", "sum")
    if dtype == "complex128" and reduce in ("max", "min"):
        pytest.skip("max and min have no complex values")
    rng = np.random.default_rng(0)

    def draw(shape):
        x = rng.integers(-2, 3, shape).astype(dtype)  # ties and zeros
        if reduce in ("sum", "mean"):
            x = x + rng.standard_normal(shape)
        if dtype == "complex128":
            x = x + 1j * rng.standard_normal(shape)
        return x

    xs = [draw(s) for s in shapes]
    out = einc.einsum(expr, *xs, **kwargs)
    dout = draw(out.shape) + 0.5
    lengths = {k: v for k, v in kwargs.items() if k != "reduce"}
    ts = [torch.tensor(x, requires_grad=True) for x in xs]
    torch_out = forward(torch, *ts)
    np.testing.assert_allclose(torch_out.detach().numpy(), out, atol=1e-12)
    torch_out.backward(torch.tensor(dout))
    for wrt, t in enumerate(ts):
        prog = einc.grad_program(expr, *shapes, wrt=wrt, reduce=reduce,
                                 dtype=dtype, **lengths)
        got = run_program(prog, xs, out, dout)
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12,
                                   atol=1e-12, err_msg=f"wrt {wrt}")
