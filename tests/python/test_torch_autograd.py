"""einc in torch's autograd (issue 25): gradients of einsum, rearrange,
reduce (every reduction with a gradient) and repeat on the random
expressions of test_einsum_random.py and test_einops_random.py, checked
with torch.autograd.gradcheck (float64 central differences) and against
torch.einsum's and einops-on-torch's gradients; double backward; complex;
the custom operator through torch.library.opcheck; no_grad,
inference_mode and nn.Parameter; views that are torch views (in-place
checks as torch's); pack and unpack; autocast; torch.jit.trace."""
import warnings

import numpy as np
import pytest

import einc

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

from test_einops_random import (  # noqa: E402
    rearrange_case, reduce_case, repeat_case)
from test_einsum_random import random_case  # noqa: E402

F64 = dict(dtype=torch.float64)


def _inputs(shapes, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=dtype).requires_grad_()
            for s in shapes]


def _einsum_cases(n, seed=2031, most=300):
    """Random einsum cases with at most `most` elements per input (gradcheck
    perturbs each), none empty."""
    r = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        np_expr, ein_expr, shapes = random_case(r)
        if all(0 < int(np.prod(s)) <= most for s in shapes):
            out.append((np_expr, ein_expr, shapes))
    return out


@pytest.fixture(params=["lowered", "einc"])
def path(request, monkeypatch):
    """Both ways a torch call can run: lowered onto torch's operations in
    einc's order (small tensors; einc/_torch_lower.py), and einc's own
    kernels with the gradient programs the C library derives."""
    from einc import _torch

    _torch.set_lowering(request.param == "lowered")
    yield request.param
    _torch.set_lowering(True)


def _grads(y, xs, dout):
    return torch.autograd.grad(y, xs, dout, allow_unused=True)


@pytest.mark.parametrize("np_expr,ein_expr,shapes", _einsum_cases(40))
def test_einsum_gradients(np_expr, ein_expr, shapes, path):
    """gradcheck, and the same gradients as torch.einsum's."""
    xs = _inputs(shapes, len(np_expr))
    torch.autograd.gradcheck(lambda *t: einc.einsum(ein_expr, *t), xs,
                             eps=1e-6, atol=1e-7, rtol=1e-6)
    got = einc.einsum(ein_expr, *xs)
    want = torch.einsum(np_expr, *xs)
    dout = torch.randn_like(want)
    for g, w in zip(_grads(got, xs, dout), _grads(want, xs, dout)):
        w = torch.zeros_like(xs[0]) if w is None else w
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_rearrange_gradients(seed, path):
    pattern, x, lengths = rearrange_case(seed)
    x = torch.tensor(x, **F64).requires_grad_()
    torch.autograd.gradcheck(lambda t: einc.rearrange(t, pattern, **lengths),
                             (x,), eps=1e-6, atol=1e-7, rtol=1e-6)
    dout = torch.randn_like(einops.rearrange(x, pattern, **lengths))
    got = _grads(einc.rearrange(x, pattern, **lengths), (x,), dout)[0]
    want = _grads(einops.rearrange(x, pattern, **lengths), (x,), dout)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("seed", range(20))
def test_repeat_gradients(seed, path):
    pattern, x, lengths = repeat_case(seed)
    x = torch.tensor(x, **F64).requires_grad_()
    torch.autograd.gradcheck(lambda t: einc.repeat(t, pattern, **lengths),
                             (x,), eps=1e-6, atol=1e-7, rtol=1e-6)
    dout = torch.randn_like(einops.repeat(x, pattern, **lengths))
    got = _grads(einc.repeat(x, pattern, **lengths), (x,), dout)[0]
    want = _grads(einops.repeat(x, pattern, **lengths), (x,), dout)[0]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("seed", range(12))
def test_reduce_gradients(seed, reduction, path):
    """Every reduction with a gradient, on random values (no ties)."""
    pattern, x, lengths = reduce_case(seed)
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(x.shape, generator=g, **F64) + 0.5).requires_grad_()
    fn = lambda t: einc.reduce(t, pattern, reduction, **lengths)  # noqa
    torch.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-7, rtol=1e-6)
    want_y = einops.reduce(x, pattern, reduction, **lengths)
    dout = torch.randn_like(want_y)
    got = _grads(fn(x), (x,), dout)[0]
    want = _grads(want_y, (x,), dout)[0]
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_max_ties_and_prod_zeros_as_torch():
    """Ties share the gradient evenly (torch.amax's rule); prod with one
    zero and with two, as torch.prod."""
    x = torch.tensor([[1., 3., 3.], [2., 2., 2.]], **F64).requires_grad_()
    got = _grads(einc.reduce(x, "a b -> a", "max"), (x,),
                 torch.ones(2, **F64))[0]
    want = _grads(torch.amax(x, 1), (x,), torch.ones(2, **F64))[0]
    torch.testing.assert_close(got, want)
    z = torch.tensor([[1., 0., 3.], [0., 2., 0.], [2., 5., 4.]],
                     **F64).requires_grad_()
    dout = torch.tensor([1.5, -2., 0.5], **F64)
    got = _grads(einc.reduce(z, "a b -> a", "prod"), (z,), dout)[0]
    want = _grads(torch.prod(z, 1), (z,), dout)[0]
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("expr,shapes", [
    ("i j, j k -> i k", [(3, 4), (4, 5)]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    ("i i -> i", [(4, 4)]),
    ("a b, b c, c d -> a d", [(2, 3), (3, 4), (4, 2)]),
])
def test_double_backward(expr, shapes, path):
    xs = _inputs(shapes, 7)
    torch.autograd.gradgradcheck(lambda *t: einc.einsum(expr, *t), xs,
                                 eps=1e-6, atol=1e-6, rtol=1e-5)


def test_complex_gradients(path):
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(s, generator=g, dtype=torch.complex128)
          .requires_grad_() for s in [(3, 4), (4, 2)]]
    torch.autograd.gradcheck(lambda a, b: einc.einsum("i j, j k -> i k", a, b),
                             xs, eps=1e-6, atol=1e-7, rtol=1e-6)
    dout = torch.randn(3, 2, dtype=torch.complex128)
    got = _grads(einc.einsum("i j, j k -> i k", *xs), xs, dout)
    want = _grads(torch.einsum("ij,jk->ik", *xs), xs, dout)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_float32_gradients_against_float64(path):
    xs = _inputs([(6, 5), (5, 7)], 11)
    want = _grads(einc.einsum("i j, j k -> i k", *xs), xs,
                  torch.ones(6, 7, **F64))
    ys = [x.detach().float().requires_grad_() for x in xs]
    got = _grads(einc.einsum("i j, j k -> i k", *ys), ys, torch.ones(6, 7))
    for a, b in zip(got, want):
        assert (a.double() - b).norm() <= 1e-5 * b.norm()


@pytest.mark.parametrize("expr,shapes,reduction", [
    ("i j, j k -> i k", [(3, 4), (4, 5)], "sum"),
    ("a (b c) -> c a", [(2, 6)], "sum"),
    ("a b c -> a c", [(2, 3, 4)], "max"),
    ("a b -> b", [(3, 4)], "prod"),
    ("a b -> a", [(3, 4)], "mean"),
])
def test_opcheck(expr, shapes, reduction):
    """The registration: schema, fake implementation, autograd, and that
    the operator's result is a new tensor."""
    xs = _inputs(shapes, 5)
    names, sizes = ("c", [3]) if "(b c)" in expr else ("", [])
    torch.library.opcheck(torch.ops.einc.einsum.default,
                          (xs, expr, reduction, False, names, sizes))


def test_parameters_train_and_no_grad():
    """An nn.Parameter behind einc gets its gradient (issue 25: the weights
    once got none, silently); under no_grad, inference_mode and in eval
    code the same call just works."""
    w = torch.nn.Parameter(torch.randn(4, 3, **F64))
    x = torch.randn(5, 4, **F64)
    einc.einsum("b i, i o -> b o", x, w).pow(2).sum().backward()
    want = 2 * x.T @ (x @ w.detach())
    torch.testing.assert_close(w.grad, want)
    with torch.no_grad():
        y = einc.einsum("b i, i o -> b o", x, w)
        assert not y.requires_grad
        torch.testing.assert_close(y, x @ w.detach())
    with torch.inference_mode():
        torch.testing.assert_close(einc.rearrange(w, "i o -> o i"), w.T)
        torch.testing.assert_close(einc.reduce(w, "i o -> o", "max"),
                                   w.amax(0))


def test_views_are_torch_views(path):
    """A result that only re-reads its input is torch's own view of it: its
    _base, its version counter, in-place checks as torch's and einops'."""
    x = torch.randn(3, 4, requires_grad=True)
    a = x * 1
    v = einc.rearrange(a, "a b -> b a")
    assert v._base is a and v.grad_fn is not None
    y = (v * v).sum()
    a.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        y.backward()
    # a write through the view reaches the input, and autograd knows it
    a = x * 1
    d = einc.einsum("i i -> i", a[:3, :3])
    d.mul_(3)
    (a.sum()).backward()
    want = torch.ones(3, 4)
    want[[0, 1, 2], [0, 1, 2]] = 3
    torch.testing.assert_close(x.grad, want)


def test_pack_unpack_gradients(path):
    a = torch.randn(2, 3, 5, **F64).requires_grad_()
    b = torch.randn(2, 3, 4, 5, **F64).requires_grad_()
    packed, shapes = einc.pack([a, b], "i j * k")
    back = einc.unpack(packed * 2, shapes, "i j * k")
    (back[0].sum() + (back[1] ** 2).sum()).backward()
    torch.testing.assert_close(a.grad, torch.full_like(a, 2))
    torch.testing.assert_close(b.grad, 8 * b.detach())


def test_autocast_follows_torch_einsum(path):
    """torch.autocast on the CPU: matrix products in bfloat16 as
    torch.einsum's (its bmm is cast), elementwise products and reductions
    in float32 as torch's."""
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for np_expr, ein in [("ij,jk->ik", "i j, j k -> i k"),
                             ("ij,ij->ij", "i j, i j -> i j"),
                             ("ij,jk->ijk", "i j, j k -> i j k")]:
            want = torch.einsum(np_expr, a, b)
            got = einc.einsum(ein, a, b)
            assert got.dtype == want.dtype, np_expr
            torch.testing.assert_close(got.float(), want.float(),
                                       rtol=2e-2, atol=2e-2)
        assert einc.reduce(a, "i j -> j", "sum").dtype == torch.float32
        ag = a.clone().requires_grad_()
        y = einc.einsum("i j, j k -> i k", ag, b)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert ag.grad.dtype == torch.float32


def test_jit_trace_computes_on_new_inputs():
    """torch.jit.trace records einc's operator: the traced function gives
    the right values on new inputs, of a new batch size too (never the
    example's output as a constant)."""
    def f(x, w):
        h = einc.rearrange(x, "b (h d) -> b h d", h=2)
        return einc.reduce(einc.einsum("b h d, d e -> b h e", h, w),
                           "b h e -> b e", "mean")

    w = torch.randn(4, 5)
    with warnings.catch_warnings():  # torch.jit.trace is deprecated
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(f, (torch.randn(3, 8), w))
    for batch in (3, 6):
        x = torch.randn(batch, 8)
        torch.testing.assert_close(traced(x, w), f(x, w))
    assert "einc::einsum" in str(traced.graph)


def test_make_fx_records_einc_order_or_the_operator():
    """make_fx (and torch.export) record a lowered call as torch's own
    operations in einc's order, anything else as einc's operator."""
    from torch.fx.experimental.proxy_tensor import make_fx

    a, b = torch.randn(3, 4), torch.randn(4, 5)
    g = make_fx(lambda x, y: einc.einsum("i j, j k -> i k", x, y))(a, b)
    assert "aten.mm" in g.code and "einc" not in g.code
    a2 = torch.randn(3, 4)
    torch.testing.assert_close(g(a2, b), a2 @ b)
    g = make_fx(lambda x: einc.reduce(x, "i j -> i", "max"))(a)
    assert "einc.einsum" in g.code
    torch.testing.assert_close(g(a2), a2.amax(1))


def test_lowered_only_below_the_size_limit():
    """Eager calls that record autograd run as torch's operations (torch's
    C++ autograd nodes) for small tensors, einc's kernels above
    EAGER_MAX_ELEMENTS; views and sums of one tensor always lowered."""
    from einc import _torch_lower

    small = [torch.randn(8, 8, requires_grad=True) for _ in range(2)]
    assert type(einc.einsum("i j, j k -> i k", *small).grad_fn).__name__ \
        == "MmBackward0"
    n = 1 + int((_torch_lower.EAGER_MAX_ELEMENTS / 3) ** 0.5)
    big = [torch.randn(n, n, requires_grad=True) for _ in range(2)]
    assert "Einsum" in type(einc.einsum("i j, j k -> i k", *big).grad_fn
                            ).__name__
    x = torch.randn(64, 64, 16, requires_grad=True)
    assert type(einc.rearrange(x, "a b c -> c b a").grad_fn).__name__ \
        == "PermuteBackward0"
    assert type(einc.reduce(x, "a b c -> a", "mean").grad_fn).__name__ \
        == "MeanBackward1"


def test_torch_func_transforms(path):
    """torch.func.grad, vmap and their composition over einc calls (the
    autograd.Function's setup_context and vmap rule)."""
    g = torch.Generator().manual_seed(4)
    b = torch.randn(8, 5, generator=g, **F64)
    xs = torch.randn(3, 4, 8, generator=g, **F64)

    def loss(a):
        return einc.einsum("i j, j k -> i k", a, b).pow(2).sum()

    got = torch.vmap(lambda a: einc.einsum("i j, j k -> i k", a, b))(xs)
    torch.testing.assert_close(got, torch.einsum("bij,jk->bik", xs, b))
    got = torch.vmap(lambda a: einc.rearrange(a, "i j -> j i"))(xs)
    torch.testing.assert_close(got, xs.transpose(1, 2))
    a = xs.clone().requires_grad_()
    torch.einsum("bij,jk->bik", a, b).pow(2).sum().backward()
    torch.testing.assert_close(torch.func.grad(loss)(xs[0]), a.grad[0])
    torch.testing.assert_close(torch.vmap(torch.func.grad(loss))(xs), a.grad)


def test_eager_backward_takes_the_fast_path(monkeypatch):
    """A plain eager backward computes its einsum steps on detached
    tensors (einc's fast path), never through route and DLPack's general
    path (which cost 250 us per 8x8 backward); its gradients are new
    tensors: accumulating into .grad twice changes neither dout nor the
    other input."""
    from einc import _core, _torch_grad

    def general(*args, **kwargs):
        raise AssertionError("the backward went through einc's general path")

    a = torch.randn(3, 4, **F64).requires_grad_()
    w = torch.randn(4, 5, **F64).requires_grad_()
    x = torch.randn(3, 4, **F64).requires_grad_()
    d, dx = torch.randn(3, 4, 5, **F64), torch.randn(3, **F64)
    keep_d, keep_dx, keep_a = d.clone(), dx.clone(), a.clone()
    for _ in range(2):
        y, z = einc.einsum("i j, j k -> i j k", a, w), einc.reduce(
            x, "i j -> i", "sum")
        with monkeypatch.context() as m:
            m.setattr(_torch_grad, "evaluate", general)
            m.setitem(_core._routes, "torch", general)
            y.backward(d)
            z.backward(dx)
    torch.testing.assert_close(w.grad, 2 * torch.einsum("ijk,ij->jk", d, a),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a.grad, 2 * torch.einsum("ijk,jk->ij", d, w),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(x.grad, 2 * dx[:, None].expand(3, 4),
                               rtol=0, atol=0)
    assert torch.equal(d, keep_d) and torch.equal(dx, keep_dx)
    assert torch.equal(a.detach(), keep_a.detach())


@pytest.mark.parametrize("expr,shapes", [
    ("i j, j i ->", [(5, 7), (7, 5)]),
    ("i j, k, j i -> k", [(4, 6), (3,), (6, 4)]),
    ("a b c, c a b -> b", [(2, 3, 4), (4, 2, 3)]),
])
def test_elementwise_steps_follow_the_large_operand(expr, shapes):
    """A backward step whose output is a permutation of its largest
    operand's axes is computed in that operand's order and returned as a
    permuted view (_in_operand_order): the same gradients as torch's."""
    xs = _inputs(shapes, 11)
    got = einc.einsum(expr, *xs)
    want = torch.einsum("".join(expr.split()), *xs)
    dout = torch.randn_like(want)
    for g, w in zip(_grads(got, xs, dout), _grads(want, xs, dout)):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_parameters_without_grad_take_the_fast_path(monkeypatch):
    """Under no_grad and inference_mode (a model's weights at inference),
    a tensor that requires grad and an nn.Parameter are read through
    DLPack on einc's cached C path (python/src/call.c), never through
    the torch route (97 us per 8x8 call there, 5 us here); with grad
    recorded they still go to autograd."""
    from einc import _core

    def general(*args, **kwargs):
        raise AssertionError("went through einc's general path")

    x = torch.randn(8, 8)
    w = torch.nn.Parameter(torch.randn(8, 8))
    want = x @ w.detach()
    einc.einsum("i j, j k -> i k", x, w.detach())  # plans the entry
    with monkeypatch.context() as m:
        m.setitem(_core._routes, "torch", general)
        m.setattr(_core, "eager_grad", None)
        for mode in (torch.no_grad, torch.inference_mode):
            with mode():
                got = einc.einsum("i j, j k -> i k", x, w)
                assert not got.requires_grad
                torch.testing.assert_close(got, want)
    got = einc.einsum("i j, j k -> i k", x, w)
    assert got.requires_grad and got.grad_fn is not None


def test_lowered_calls_keep_einc_errors():
    """The C table of lowered calls (python/src/fastgrad.c) leaves errors
    to the general path: einc's dtype message, einops' error type for the
    einops drop-in's rules, einc's caret for a bad expression."""
    import einc.einops as einops_dropin

    a = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    with pytest.raises(einc.EincError, match="one dtype"):
        einc.einsum("i j, j k -> i k", a, b)
    x = torch.randn(2, 3, 4, requires_grad=True)
    with pytest.raises(einops.EinopsError):
        einops_dropin.rearrange(x, "b s d -> b d")
    with pytest.raises(einc.EincError, match="never reduces"):
        einc.rearrange(x, "b s d -> b d")
    with pytest.raises(einc.EincError, match=r"\^"):
        einc.einsum("i j, j k -> i q", a, a.t())
    # the same structure again, now cached: still einc's errors
    with pytest.raises(einc.EincError, match="one dtype"):
        einc.einsum("i j, j k -> i k", a, b)


def test_compiled_plan_records_autograd_above_the_lowering_bound():
    """einc.compile's plan on tensors that require grad, too large to be
    lowered: the gradient, as torch.einsum's (issue 38: the plan handed
    them to DLPack, which refused them with a BufferError)."""
    a, b = _inputs([(4, 80, 60), (4, 60, 50)], 38)
    plan = einc.compile("b i j, b j k -> b i k", a.shape, b.shape,
                        dtype="float64")
    got = plan(a, b)
    want = torch.einsum("bij,bjk->bik", a, b)
    torch.testing.assert_close(got, want)
    dout = torch.randn(want.shape, generator=torch.Generator().manual_seed(1),
                       **F64)
    for x, y in zip(torch.autograd.grad(got, (a, b), dout),
                    torch.autograd.grad(want, (a, b), dout)):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", ["out", "memory_limit"])
def test_unrecorded_calls_with_tensors_that_require_grad(kw):
    """out= and memory_limit= evaluations record no gradient: with an
    input that requires grad they are refused while grad is recorded
    (EincError naming the option, as torch refuses out= there) and run
    under torch.no_grad() and inference_mode, where torch runs them too
    (before: DLPack's BufferError for out=, and a memory_limit= refusal
    under no_grad that told the caller to use no_grad)."""
    g = torch.Generator().manual_seed(41)
    a = torch.randn(6, 5, generator=g, dtype=torch.float64,
                    requires_grad=True)
    b = torch.randn(5, 4, generator=g, dtype=torch.float64)
    want = (a @ b).detach()

    def call():
        out = torch.full((6, 4), float("nan"), dtype=torch.float64)
        arg = {"out": out} if kw == "out" else {"memory_limit": 64}
        got = einc.einsum("i j, j k -> i k", a, b, **arg)
        assert kw != "out" or got is out
        return got

    with pytest.raises(einc.EincError, match=f"{kw}= with torch tensors "
                       "that require grad"):
        call()
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            got = call()
        assert not got.requires_grad
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_out_that_requires_grad_under_no_grad():
    """An out= tensor that requires grad (a parameter updated in place)
    is written under torch.no_grad(), as torch's own out= writes it."""
    g = torch.Generator().manual_seed(42)
    a = torch.randn(6, 5, generator=g, dtype=torch.float64)
    b = torch.randn(5, 4, generator=g, dtype=torch.float64)
    out = torch.zeros(6, 4, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        assert einc.einsum("i j, j k -> i k", a, b, out=out) is out
    torch.testing.assert_close(out.detach(), a @ b, rtol=1e-12, atol=1e-12)
    with pytest.raises(einc.EincError, match="out="):
        einc.einsum("i j, j k -> i k", a, b, out=out)
