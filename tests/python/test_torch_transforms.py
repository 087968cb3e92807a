"""einc under what torch users do beyond the training loop, each case
against the same computation in torch's own operations (float64,
tolerance 1e-12 of the reference's norm): torch.func (vmap with in_dims
None and negative, chunk_size, out_dims, nested vmap, vmap of jacrev and
jacfwd, functional_call over modules of einc layers), gradcheck and
gradgradcheck of every reduction, checkpoint (reentrant and not),
inference tensors, in-place writes through einc's views, channels_last,
module copies (deepcopy, pickle, state_dict, torch.save, jit.script),
TorchDispatchMode and FakeTensorMode, and the tensors einc does not take
(sparse, nested, quantized, meta: einc's error, naming the way out).
torch.compile and torch.export: test_torch_transforms_compile.py."""
import copy
import io
import pickle

import pytest

import einc

torch = pytest.importorskip("torch")
from torch.func import functional_call, jacfwd, jacrev, vmap  # noqa: E402

import einc.layers.torch as layers  # noqa: E402

F64 = torch.float64
TORCH_REDUCE = {"sum": lambda t, d: t.sum(d), "mean": lambda t, d: t.mean(d),
                "max": lambda t, d: t.amax(d), "min": lambda t, d: t.amin(d),
                "prod": lambda t, d: t.prod(d)}
REDUCTIONS = list(TORCH_REDUCE)


def _rel(got, want):
    return float((got - want).norm() / max(float(want.norm()), 1e-300))


def _close(got, want, tol=1e-12):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert _rel(got, want) <= tol, _rel(got, want)


def _randn(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).requires_grad_(grad)


# ------------------------------------------------------------ gradients

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_and_gradgradcheck_every_reduction(reduction):
    x = _randn(3, 4, 5, grad=True)
    f = lambda x: einc.reduce(x, "a b c -> c a", reduction)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def test_gradcheck_prod_with_zeros_against_torch():
    x = _randn(3, 4, 5)
    x[0, 1, 2] = 0
    x[1, :2, 3] = 0  # two zeros in one product: a zero gradient
    x.requires_grad_()
    f = lambda x: einc.reduce(x, "a b c -> a c", "prod")  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    got = torch.autograd.grad(f(x).sin().sum(), x)[0]
    want = torch.autograd.grad(x.prod(1).sin().sum(), x)[0]
    _close(got, want)


def test_gradcheck_contraction_small_and_above_lowering():
    for shape in ((3, 4, 5), (40, 30, 40)):  # lowered, einc's Function
        a, b = _randn(*shape[:2], grad=True), _randn(*shape[1:], grad=True)
        assert torch.autograd.gradcheck(
            lambda a, b: einc.einsum("i j, j k -> k i", a, b), (a, b),
            fast_mode=True)


def test_gradcheck_complex_and_channels_last():
    g = torch.Generator().manual_seed(7)
    z = torch.randn(4, 3, dtype=torch.complex128, generator=g,
                    requires_grad=True)
    w = torch.randn(3, 2, dtype=torch.complex128, generator=g,
                    requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda z, w: einc.einsum("i j, j k -> i k", z.conj(), w), (z, w))
    x = _randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    x.requires_grad_()
    v = _randn(3, 7, grad=True)
    assert torch.autograd.gradcheck(
        lambda x, v: einc.einsum("n c h w, c k -> n k h w", x, v), (x, v),
        fast_mode=True)


def test_channels_last_values():
    x = _randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    w = _randn(3, 7)
    _close(einc.einsum("n c h w, c k -> n k h w", x, w),
           torch.einsum("nchw,ck->nkhw", x, w))
    _close(einc.rearrange(x, "n c h w -> n (h w) c"),
           x.permute(0, 2, 3, 1).reshape(2, 20, 3))
    _close(einc.reduce(x, "n c h w -> n c", "mean"), x.mean((2, 3)))


# ------------------------------------------------------------- torch.func

def _mm(a, b):
    return einc.einsum("i j, j k -> i k", a, b)


def test_vmap_in_dims_none_negative_chunk_out_dims():
    a, b = _randn(5, 3, 4), _randn(4, 6)
    want = a @ b
    _close(vmap(_mm, in_dims=(0, None))(a, b), want)
    _close(vmap(_mm, in_dims=(-1, None))(a.permute(1, 2, 0), b), want)
    _close(vmap(_mm, in_dims=(0, None), chunk_size=2)(a, b), want)
    _close(vmap(_mm, in_dims=(0, None), out_dims=2)(a, b),
           want.permute(1, 2, 0))
    aa = _randn(2, 5, 3, 4)
    _close(vmap(vmap(_mm, in_dims=(0, None)), in_dims=(0, None))(aa, b),
           aa @ b)
    _close(vmap(lambda x: einc.rearrange(x, "i (j k) -> j i k", j=2))(a),
           a.reshape(5, 3, 2, 2).permute(0, 2, 1, 3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_vmap_of_jacrev_and_jacfwd(reduction):
    a = _randn(5, 3, 4)
    a[0, 1, 2] = 0  # prod: a zero in one batch element
    ours = lambda x: einc.reduce(x, "a b -> a", reduction)  # noqa: E731
    theirs = lambda x: TORCH_REDUCE[reduction](x, 1)  # noqa: E731
    _close(vmap(ours)(a), vmap(theirs)(a))
    _close(vmap(jacrev(ours))(a), vmap(jacrev(theirs))(a))
    _close(vmap(jacfwd(ours))(a), vmap(jacfwd(theirs))(a))
    b = _randn(4, 6)
    ours2 = lambda x, b: einc.reduce(_mm(x, b), "i k -> k", reduction)  # noqa
    theirs2 = lambda x, b: TORCH_REDUCE[reduction](x @ b, 0)  # noqa: E731
    _close(vmap(jacrev(ours2), in_dims=(0, None))(a, b),
           vmap(jacrev(theirs2), in_dims=(0, None))(a, b))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        layers.Rearrange("b (h w) c -> b c h w", h=2),
        layers.Reduce("b c h w -> b c", "max"),
        layers.EinMix("b c -> b k", weight_shape="c k", bias_shape="k",
                      c=3, k=4)).double()


def _model_torch(params, x):
    y = x.reshape(x.shape[0], 2, -1, 3).permute(0, 3, 1, 2).amax((2, 3))
    return y @ params["2.weight"] + params["2.bias"]


def test_functional_call_grad_and_vmap_over_parameters():
    m, x = _model(), _randn(5, 6, 3)
    params = dict(m.named_parameters())
    _close(functional_call(m, params, (x,)), _model_torch(params, x))
    got = torch.func.grad(
        lambda p: functional_call(m, p, (x,)).square().sum())(params)
    want = torch.func.grad(
        lambda p: _model_torch(p, x).square().sum())(params)
    for k in params:
        _close(got[k], want[k])
    stacked = {k: torch.stack([v, 2 * v]) for k, v in params.items()}
    ensemble = vmap(lambda p, x: functional_call(m, p, (x,)),
                    in_dims=(0, None))(stacked, x)
    _close(ensemble, torch.stack([
        _model_torch(params, x),
        _model_torch({k: 2 * v for k, v in params.items()}, x)]))


def test_einops_layers_functional_call_under_vmap():
    from einc.einops.layers import torch as elayers
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        elayers.Rearrange("b (h w) c -> b c h w", h=2),
        elayers.Reduce("b c h w -> b c", "mean"),
        elayers.EinMix("b c -> b k", weight_shape="c k", bias_shape="k",
                       c=3, k=4)).double()
    x = _randn(3, 5, 6, 3)
    p = dict(m.named_parameters())
    got = vmap(lambda x: functional_call(m, p, (x,)))(x)
    y = x.reshape(3, 5, 2, 3, 3).mean((2, 3))
    _close(got, y @ p["2.weight"] + p["2.bias"])


# ------------------------------------------------ checkpoint, inference

@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint(reentrant):
    from torch.utils.checkpoint import checkpoint

    def f(a, b):
        y = einc.einsum("n i j, j k -> n i k", a, b)
        return einc.reduce(y, "n i k -> n k", "max").sin().sum()

    a1, b1 = _randn(5, 3, 4, grad=True), _randn(4, 6, grad=True, seed=1)
    a2, b2 = [t.detach().clone().requires_grad_() for t in (a1, b1)]
    checkpoint(f, a1, b1, use_reentrant=reentrant).backward()
    (a2 @ b2).amax(1).sin().sum().backward()
    _close(a1.grad, a2.grad)
    _close(b1.grad, b2.grad)


@pytest.mark.parametrize("n", [4, 200])  # lowered, einc's Function
def test_inference_tensor_in_autograd_is_torchs_error(n):
    a, b = _randn(n, n), _randn(n, n, seed=1)
    with torch.inference_mode():
        t = einc.einsum("i j, j k -> i k", a, b)
        t_torch = a @ b
    w = _randn(n, grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors"):
        (t_torch @ w).sum().backward()
    with pytest.raises(RuntimeError, match="Inference tensors"):
        einc.einsum("i k, k -> i", t, w).sum().backward()
    with torch.no_grad():  # no_grad tensors are ordinary ones later
        u = einc.einsum("i j, j k -> i k", a, b)
    einc.einsum("i k, k -> i", u, w).sum().backward()
    _close(w.grad, u.sum(0))


# ------------------------------------------------------ views, in place

def test_inplace_through_view_flows_to_base_and_counts_versions():
    x = _randn(4, 6, grad=True)
    y = x * 1
    v = einc.rearrange(y, "a (b c) -> b a c", b=2)
    assert v._base is y
    v.mul_(2)
    assert y._version == v._version == 1
    y.sum().backward()
    _close(x.grad, torch.full_like(x, 2.0))


@pytest.mark.parametrize("n", [4, 300])
def test_inplace_after_save_is_torchs_error(n):
    x, w = _randn(n, n, grad=True), _randn(n, 3, grad=True, seed=1)
    y = x.exp()
    z = einc.einsum("a b, b c -> a c", y, w)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        z.sum().backward()
    v = einc.rearrange(x.sin(), "a (b c) -> b a c", b=2)
    v.add_(1)  # in place through the view of a sin (which saves x)
    z = einc.einsum("b a c, b a c ->", v, v)
    z.backward()
    x2 = x.detach().clone().requires_grad_()
    v2 = x2.sin().reshape(n, 2, n // 2).permute(1, 0, 2)
    v2.add_(1)
    (v2 * v2).sum().backward()
    _close(x.grad, x2.grad)


def test_view_of_leaf_gradient():
    x = _randn(4, 6, grad=True)
    weight = torch.arange(24.0, dtype=F64).reshape(12, 2)
    (einc.rearrange(x, "a (b c) -> (c a) b", b=2) * weight).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    (x2.reshape(4, 2, 3).permute(2, 0, 1).reshape(12, 2) * weight
     ).sum().backward()
    _close(x.grad, x2.grad)


# ------------------------------------------------------- module copies

def test_module_copies_and_state_dict():
    m, x = _model(), _randn(5, 6, 3)
    want = m(x)
    _close(copy.deepcopy(m)(x), want)
    _close(pickle.loads(pickle.dumps(m))(x), want)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    _close(torch.load(buf, weights_only=False)(x), want)
    m2 = _model()
    with torch.no_grad():
        m2[2].weight.zero_()
    m2.load_state_dict(m.state_dict())
    _close(m2(x), want)


def test_jit_script_and_trace_of_layers():
    m, x = _model(), _randn(5, 6, 3)
    _close(torch.jit.script(m)(x), m(x))
    traced = torch.jit.trace(m, (x,))
    x2 = _randn(7, 6, 3, seed=2)
    _close(traced(x2), m(x2))


# ------------------------------------------- dispatch modes, fake tensors

def test_dispatch_mode_sees_einc_and_values_are_right():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(str(func))
            return func(*args, **(kwargs or {}))

    a, b = _randn(300, 200), _randn(200, 100, seed=1)
    with Log() as log:
        mm = einc.einsum("i j, j k -> i k", a, b)
        mx = einc.reduce(a, "i j -> i", "max")
        view = einc.rearrange(a, "i (j k) -> j i k", j=2)
    _close(mm, a @ b)
    _close(mx, a.amax(1))
    _close(view, a.reshape(300, 2, 100).permute(1, 0, 2))
    assert log.ops, "the mode saw nothing"


def test_fake_tensor_mode_shapes():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(300, 200, dtype=F64), torch.empty(200, 100)
        mm = einc.einsum("i j, j k -> i k", a, b.double())
        pr = einc.reduce(a, "i (j k) -> k", "prod", j=4)
        view = einc.rearrange(a, "i (j k) -> j i k", j=2)
    assert isinstance(mm, FakeTensor) and mm.shape == (300, 100)
    assert pr.shape == (50,) and view.shape == (2, 300, 100)
    assert view.stride() == (100, 200, 1)


# ------------------------------------------- tensors einc does not take

def _unsupported():
    dense = _randn(3, 3)
    yield "sparse", lambda: dense.to_sparse(), ".to_dense()"
    yield "sparse", lambda: dense.to_sparse_csr(), ".to_dense()"
    yield "sparse", lambda: dense.to_sparse().requires_grad_(), ".to_dense()"
    yield "nested", lambda: torch.nested.nested_tensor(
        [_randn(2, 3), _randn(4, 3)]), "to_padded_tensor"
    yield "nested", lambda: torch.nested.nested_tensor(
        [_randn(2, 3), _randn(4, 3)], requires_grad=True), "to_padded_tensor"
    yield "nested", lambda: torch.nested.nested_tensor(
        [_randn(2, 3), _randn(4, 3)], layout=torch.jagged), "to_padded_tensor"
    yield "quantized", lambda: torch.quantize_per_tensor(
        dense.float(), 0.1, 0, torch.qint8), ".dequantize()"


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", range(7))
def test_unsupported_tensors_raise_einc_error(case):
    what, make, way = list(_unsupported())[case]
    x = make()
    dense = torch.ones(3, 3, dtype=x.dtype if x.dtype.is_floating_point
                       else torch.float32, requires_grad=True)
    einc.einsum("i j, j k -> i k", dense, dense.detach())  # fastgrad.c's
    # table then holds the dense call's function: a sparse call of the
    # same shape must not find it
    calls = [lambda: einc.einsum("b i j, j k -> b i k" if x.dim() == 3
                                 else "i j, j k -> i k", x, dense.detach()),
             lambda: einc.rearrange(x, "i j -> j i" if x.dim() == 2
                                    else "b i j -> b j i"),
             lambda: einc.reduce(x, "i j -> i" if x.dim() == 2
                                 else "b i j -> b j", "sum")]
    for call in calls:
        with pytest.raises(einc.EincError, match=f"{what} tensor") as err:
            call()
        assert way in str(err.value) and "operand 1" in str(err.value)


def test_meta_tensors_raise_einc_error():
    with pytest.raises(einc.EincError, match="meta device"):
        einc.einsum("i j, j k -> i k", torch.empty(3, 4, device="meta"),
                    torch.empty(4, 5, device="meta"))


def test_complex_values_and_conj_views():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(30, 20, dtype=torch.complex128, generator=g)
    b = torch.randn(20, 10, dtype=torch.complex128, generator=g)
    _close(einc.einsum("i j, j k -> i k", a.conj(), b), a.conj() @ b)
    _close(einc.reduce(a, "i j -> j", "prod"), a.prod(0))
    with pytest.raises(einc.EincError, match="no order"):
        einc.reduce(a, "i j -> i", "max")


    # torch's does: its module checks only the upper bounds here)


# ------------------------------------------- more transforms, graph breaks

def test_hessian_and_functional_jacobian():
    a, b = _randn(3, 4), _randn(4, 5, seed=1)
    _close(torch.func.hessian(lambda a: einc.reduce(
        einc.einsum("i j, j k -> i k", a, b), "i k -> ", "prod"))(a),
        torch.func.hessian(lambda a: (a @ b).prod())(a))
    _close(torch.func.hessian(lambda a: einc.reduce(
        einc.rearrange(a, "i (j k) -> j i k", j=2).sin(), "j i k ->",
        "max"))(a),
        torch.func.hessian(
            lambda a: a.reshape(3, 2, 2).permute(1, 0, 2).sin().amax())(a))
    jac = torch.autograd.functional.jacobian
    _close(jac(lambda a: einc.einsum("i j, j k -> i k", a, b), a,
               vectorize=True), jac(lambda a: a @ b, a, vectorize=True))
    hes = torch.autograd.functional.hessian
    _close(hes(lambda a: einc.reduce(einc.einsum("i j, j k -> i k", a, b),
                                     "i k ->", "min"), a),
           hes(lambda a: (a @ b).amin(), a))


def test_vmap_more_forms_and_above_lowering():
    import einc.torch as et
    a, b = _randn(7, 3, 4), _randn(4, 6, seed=1)
    _close(vmap(lambda a: et.einsum("ij,jk->ik", a, b))(a), a @ b)
    b2 = _randn(4, 7, 5, seed=2)
    _close(vmap(_mm, in_dims=(1, 1))(a.permute(1, 0, 2), b2),
           torch.einsum("nij,jnk->nik", a, b2))
    _close(vmap(lambda a: einc.reduce(a, "i (j k) -> i k", "mean", k=2))(a),
           a.reshape(7, 3, 2, 2).mean(2))
    _close(vmap(lambda a: einc.repeat(a, "i j -> i r j", r=3))(a),
           a.unsqueeze(2).expand(7, 3, 3, 4))
    big, w = _randn(3, 200, 300), _randn(300, 100, seed=3)  # einc's path
    _close(vmap(_mm, in_dims=(0, None))(big, w), big @ w)
    _close(vmap(torch.func.grad(lambda a, b: einc.einsum(
        "i j, j k -> ", a, b)), in_dims=(0, None))(big, w),
        w.sum(1).expand(3, 200, 300))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5),
                                       (torch.bfloat16, 2e-2),
                                       (torch.float16, 2e-2)])
def test_vmap_and_jacrev_low_precision(dtype, tol):
    a, b = _randn(5, 3, 4).to(dtype), _randn(4, 6, seed=1).to(dtype)
    _close(vmap(lambda a: _mm(a, b))(a).double(),
           a.double() @ b.double(), tol)
    _close(vmap(jacrev(lambda a: einc.reduce(a, "i j -> j", "max")))(a),
           vmap(jacrev(lambda a: a.amax(0)))(a), tol)


def test_compiled_plan_under_vmap_checkpoint_and_refusals():
    from torch.utils.checkpoint import checkpoint
    plan = einc.compile("b i j, j k -> b k", (5, 3, 4), (4, 6),
                        dtype="float64")
    a, b = _randn(5, 3, 4), _randn(4, 6, seed=1)
    _close(vmap(lambda a: plan(a, b))(torch.stack([a, 2 * a])),
           torch.stack([(a @ b).sum(1), (2 * a @ b).sum(1)]))
    a1, a2 = a.clone().requires_grad_(), a.clone().requires_grad_()
    checkpoint(lambda a: plan(a, b).sin().sum(), a1,
               use_reentrant=False).backward()
    (a2 @ b).sum(1).sin().sum().backward()
    _close(a1.grad, a2.grad)
    for x, what in [(a.to_sparse(), "sparse"),
                    (a.to_sparse().requires_grad_(), "sparse"),
                    (torch.quantize_per_tensor(a.float(), 0.1, 0,
                                               torch.qint8), "quantized")]:
        with pytest.raises(einc.EincError, match=f"{what} tensor"):
            plan(x, b)
