"""Forward-mode AD in torch (issue 38 item 2; docs/design.md, "torch in
training code", "Forward mode").

Dual tensors (torch.autograd.forward_ad) passed to einc's functions come
back with the right tangent, and torch.func.jvp, jacfwd and hessian work,
at sizes below and above the bound under which eager calls are lowered
onto torch's own operations (_torch_lower.EAGER_MAX_ELEMENTS; max, min,
prod and diagonals are never lowered, so their small cases take einc's
own path too). The tangent is checked against central finite differences
(f64, h = 1e-6; 1e-8 for max and min, whose step must not cross a tie)
and against the reference's own forward AD (torch.einsum, torch's
reductions, einops on torch): f64 to 1e-12 of the reference's norm, f32
to 1e-5. einc's tangent is the C library's JVP program
(einc.jvp_program, ein_jvp_create) where the call is not lowered.
"""
import pytest

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

import torch.autograd.forward_ad as fwad  # noqa: E402

import einc  # noqa: E402
import einc.einops as ee  # noqa: E402
import einc.torch  # noqa: E402
from einc import _torch_lower  # noqa: E402


def _matmul(a, b):
    return einc.einsum("b i j, b j k -> b i k", a, b)


# name: (einc's call, the reference, input shapes below the bound, above)
CASES = {
    "matmul": (_matmul, lambda a, b: torch.einsum("bij,bjk->bik", a, b),
               [(2, 3, 4), (2, 4, 5)], [(4, 80, 60), (4, 60, 50)]),
    "chain": (lambda a, b, c: einc.einsum("i j, j k, k l -> i l", a, b, c),
              lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c),
              [(3, 4), (4, 5), (5, 2)], [(100, 120), (120, 150), (150, 90)]),
    "diagonal": (lambda a, b: einc.einsum("i i, i j -> j", a, b),
                 lambda a, b: torch.einsum("ii,ij->j", a, b),
                 [(3, 3), (3, 4)], [(60, 60), (60, 600)]),
    "rearrange": (lambda a: einc.rearrange(a, "a (b c) -> c a b", c=2),
                  lambda a: einops.rearrange(a, "a (b c) -> c a b", c=2),
                  [(3, 4)], [(300, 200)]),
    "repeat": (lambda a: einc.repeat(a, "a b -> a c b", c=3),
               lambda a: einops.repeat(a, "a b -> a c b", c=3),
               [(3, 4)], [(300, 120)]),
    "sum": (lambda a: einc.reduce(a, "a b c -> a c", "sum"),
            lambda a: a.sum(1), [(3, 4, 5)], [(40, 20, 50)]),
    "mean": (lambda a: einc.reduce(a, "a b c -> a c", "mean"),
             lambda a: a.mean(1), [(3, 4, 5)], [(40, 20, 50)]),
    "max": (lambda a: einc.reduce(a, "a b c -> a c", "max"),
            lambda a: a.amax(1), [(3, 4, 5)], [(40, 20, 50)]),
    "min": (lambda a: einc.reduce(a, "a b c -> c a", "min"),
            lambda a: a.amin(1).t(), [(3, 4, 5)], [(40, 20, 50)]),
    "prod": (lambda a: einc.reduce(a, "a b c -> a c", "prod"),
             lambda a: a.prod(1), [(3, 4, 5)], [(40, 20, 50)]),
    "einsum max": (lambda a: einc.einsum("a b -> b", a, reduce="max"),
                   lambda a: a.amax(0), [(3, 4)], [(300, 120)]),
    "torch.einsum": (lambda a, b: einc.torch.einsum("bij,bjk->bik", a, b),
                     lambda a, b: torch.einsum("bij,bjk->bik", a, b),
                     [(2, 3, 4), (2, 4, 5)], [(4, 80, 60), (4, 60, 50)]),
    "einops.einsum": (lambda a, b: ee.einsum(a, b, "b i j, b j k -> b i k"),
                      lambda a, b: einops.einsum(a, b,
                                                 "b i j, b j k -> b i k"),
                      [(2, 3, 4), (2, 4, 5)], [(4, 80, 60), (4, 60, 50)]),
    "einops.rearrange": (lambda a: ee.rearrange(a, "a b -> b a"),
                         lambda a: einops.rearrange(a, "a b -> b a"),
                         [(3, 4)], [(300, 200)]),
    "einops.reduce": (lambda a: ee.reduce(a, "a b -> b", "max"),
                      lambda a: einops.reduce(a, "a b -> b", "max"),
                      [(3, 4)], [(300, 200)]),
    "einops.repeat": (lambda a: ee.repeat(a, "a b -> a b c", c=2),
                      lambda a: einops.repeat(a, "a b -> a b c", c=2),
                      [(3, 4)], [(300, 120)]),
}
NAMES = sorted(CASES)
SIZES = ["small", "large"]


def _elements(shapes, out):
    total = out.numel()
    for s in shapes:
        total += torch.Size(s).numel()
    return total


def _inputs(name, shapes, dtype, seed):
    """Seeded inputs and tangents; prod's inputs have magnitudes in [0.5,
    1.5] (products of 20 stay moderate), with a few exact zeros in the
    small case (the product rule's zero branches)."""
    g = torch.Generator().manual_seed(seed)
    xs, ts = [], []
    for s in shapes:
        x = torch.randn(s, generator=g, dtype=torch.float64)
        if name == "prod":
            x = torch.sign(x) * (0.5 + torch.rand(s, generator=g,
                                                  dtype=torch.float64))
            if x.numel() < 100:
                x.view(-1)[::7] = 0
        xs.append(x.to(dtype))
        ts.append(torch.randn(s, generator=g, dtype=torch.float64).to(dtype))
    return xs, ts


def _dual_tangent(f, xs, ts):
    with fwad.dual_level():
        y = f(*[x if t is None else fwad.make_dual(x, t)
                for x, t in zip(xs, ts)])
        primal, tangent = fwad.unpack_dual(y)
    return primal, tangent


def _differences(f, xs, ts, h):
    up = f(*[x + h * t for x, t in zip(xs, ts)])
    down = f(*[x - h * t for x, t in zip(xs, ts)])
    return (up - down) / (2 * h)


def _close(got, want, tol):
    assert got is not None, "no tangent"
    assert got.shape == want.shape and got.dtype == want.dtype
    err = (got - want).norm() / max(want.norm(), 1e-30)
    assert err <= tol, f"relative error {err:.3g}"


def test_sizes_straddle_the_lowering_bound():
    """The small cases are lowered where lowering applies, the large
    ones never (matmuls over EAGER_MAX_ELEMENTS)."""
    for name in ("matmul", "chain", "torch.einsum", "einops.einsum"):
        f, _, small, large = CASES[name]
        xs, _ = _inputs(name, small, torch.float64, 0)
        assert _elements(small, f(*xs)) <= _torch_lower.EAGER_MAX_ELEMENTS
        xs, _ = _inputs(name, large, torch.float64, 0)
        assert _elements(large, f(*xs)) > _torch_lower.EAGER_MAX_ELEMENTS


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_dual_tensor_tangent(name, size):
    """forward_ad: every input dual; the tangent against the reference's
    forward AD and against central differences."""
    f, reference, small, large = CASES[name]
    xs, ts = _inputs(name, small if size == "small" else large,
                     torch.float64, 1)
    primal, tangent = _dual_tangent(f, xs, ts)
    want_primal, want = _dual_tangent(reference, xs, ts)
    torch.testing.assert_close(primal, want_primal, rtol=1e-12, atol=1e-12)
    _close(tangent, want, 1e-12)
    extremum = name in ("max", "min", "einsum max", "einops.reduce")
    _close(tangent, _differences(f, xs, ts, 1e-8 if extremum else 1e-6),
           1e-6)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", [n for n in NAMES
                                  if len(CASES[n][2]) > 1])
def test_one_input_dual(name, size):
    """A tangent on one input of several: that input's part alone."""
    f, reference, small, large = CASES[name]
    xs, ts = _inputs(name, small if size == "small" else large,
                     torch.float64, 2)
    for k in range(len(xs)):
        only = [t if i == k else None for i, t in enumerate(ts)]
        _close(_dual_tangent(f, xs, only)[1],
               _dual_tangent(reference, xs, only)[1], 1e-12)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_func_jvp(name, size):
    """torch.func.jvp, as on the reference."""
    f, reference, small, large = CASES[name]
    xs, ts = _inputs(name, small if size == "small" else large,
                     torch.float64, 3)
    primal, tangent = torch.func.jvp(f, tuple(xs), tuple(ts))
    want_primal, want = torch.func.jvp(reference, tuple(xs), tuple(ts))
    torch.testing.assert_close(primal, want_primal, rtol=1e-12, atol=1e-12)
    _close(tangent, want, 1e-12)


@pytest.mark.parametrize("name", ["matmul", "max", "prod", "diagonal",
                                  "rearrange", "mean"])
def test_float32(name):
    """f32: to 1e-5 of the reference's norm, above the bound."""
    f, reference, _, large = CASES[name]
    xs, ts = _inputs(name, large, torch.float32, 4)
    _close(_dual_tangent(f, xs, ts)[1], _dual_tangent(reference, xs, ts)[1],
           1e-5)
    _close(torch.func.jvp(f, tuple(xs), tuple(ts))[1],
           torch.func.jvp(reference, tuple(xs), tuple(ts))[1], 1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_jacfwd_and_hessian(name):
    """jacfwd of the call and the hessian of a scalar of it (forward over
    reverse), against the reference's, on the small sizes."""
    f, reference, small, _ = CASES[name]
    xs, _ = _inputs(name, small, torch.float64, 5)

    def scalar(call):
        return lambda *a: (call(*a) ** 2).sum()

    for k in range(len(xs)):
        _close(torch.func.jacfwd(f, argnums=k)(*xs),
               torch.func.jacfwd(reference, argnums=k)(*xs), 1e-12)
        _close(torch.func.hessian(scalar(f), argnums=k)(*xs),
               torch.func.hessian(scalar(reference), argnums=k)(*xs), 1e-12)


def test_jacfwd_and_hessian_above_the_bound():
    """A matmul over the lowering bound, differentiated in its small
    input: jacfwd and the hessian run einc's JVP programs (in vmap)."""
    g = torch.Generator().manual_seed(7)
    a = torch.randn(2, 3, 40, generator=g, dtype=torch.float64)
    b = torch.randn(2, 40, 500, generator=g, dtype=torch.float64)
    assert a.numel() + b.numel() + 2 * 3 * 500 > \
        _torch_lower.EAGER_MAX_ELEMENTS

    def loss(call):
        return lambda x: (call(x, b) ** 2).sum()

    reference = CASES["matmul"][1]
    _close(torch.func.jacfwd(lambda x: _matmul(x, b))(a),
           torch.func.jacfwd(lambda x: reference(x, b))(a), 1e-12)
    _close(torch.func.hessian(loss(_matmul))(a),
           torch.func.hessian(loss(reference))(a), 1e-12)


def test_dual_tensor_that_requires_grad():
    """A dual tensor that also requires grad: the tangent, and backward
    through the same call (the Function records both)."""
    f, reference, _, large = CASES["matmul"]
    xs, ts = _inputs("matmul", large, torch.float64, 8)
    leaves = [x.clone().requires_grad_() for x in xs]
    refs = [x.clone().requires_grad_() for x in xs]
    with fwad.dual_level():
        y = f(*[fwad.make_dual(x, t) for x, t in zip(leaves, ts)])
        want = reference(*[fwad.make_dual(x, t) for x, t in zip(refs, ts)])
        _close(fwad.unpack_dual(y).tangent, fwad.unpack_dual(want).tangent,
               1e-12)
        fwad.unpack_dual(y).primal.sum().backward()
        fwad.unpack_dual(want).primal.sum().backward()
    for got, ref in zip(leaves, refs):
        _close(got.grad, ref.grad, 1e-12)


def test_dual_tensor_under_no_grad():
    """no_grad records no backward, but forward mode goes on (torch's
    rule)."""
    f, reference, _, large = CASES["max"]
    xs, ts = _inputs("max", large, torch.float64, 9)
    with torch.no_grad():
        got = _dual_tangent(f, xs, ts)[1]
        want = _dual_tangent(reference, xs, ts)[1]
    _close(got, want, 1e-12)


def test_complex_tangent():
    """c128: the JVP is linear (no conjugation), as torch.einsum's."""
    g = torch.Generator().manual_seed(10)
    xs = [torch.randn(s, generator=g, dtype=torch.complex128)
          for s in [(4, 80, 60), (4, 60, 50)]]
    ts = [torch.randn(x.shape, generator=g, dtype=torch.complex128)
          for x in xs]
    _close(_dual_tangent(_matmul, xs, ts)[1],
           _dual_tangent(CASES["matmul"][1], xs, ts)[1], 1e-12)


def test_compiled_plan():
    """einc.compile's plan on dual tensors gives the tangent too."""
    xs, ts = _inputs("matmul", [(4, 80, 60), (4, 60, 50)], torch.float64, 11)
    plan = einc.compile("b i j, b j k -> b i k", *[x.shape for x in xs],
                        dtype="float64")
    _close(_dual_tangent(plan, xs, ts)[1],
           _dual_tangent(CASES["matmul"][1], xs, ts)[1], 1e-12)


def test_jvp_program():
    """einc.jvp_program: the C library's forward-mode program."""
    p = einc.jvp_program("b s d, d f -> b s f", (8, 16, 32), (32, 64), wrt=1)
    assert [s["expr"] for s in p["steps"]] == ["b s d, d f -> b s f"]
    assert p["steps"][0]["operands"] == (("input", 0), ("tangent", 0))
    p = einc.jvp_program("a b -> a", (3, 4), reduce="max")
    assert [s["op"] for s in p["steps"]][-1] == "div" and p["needs_output"]
    assert not einc.jvp_program("a b -> a", (3, 4), dtype="complex128",
                                reduce="prod")["conjugates"]
