"""The torch sweep beyond the training loop (test_torch_transforms.py),
compiled: torch.compile with dynamic shapes (one graph for several
shapes), graph-break counts, in-place writes through einc views in a
compiled function, torch.export with Dim ranges on several axes, merged
dims, run_decompositions, save/load and the exported module's backward;
each against torch's own ops (float64, 1e-12 of the reference's norm).
The full sweep (every reduction compiled, reduce-overhead and
max-autotune-no-cudagraphs on CPU, low precision under no_grad and
inference_mode, AOTInductor) runs with EINC_TORCH_SWEEP=1 (slow: about
a minute on two cores)."""
import os

import pytest

import einc

torch = pytest.importorskip("torch")
from test_torch_transforms import (TORCH_REDUCE, REDUCTIONS, _close,  # noqa
                                   _model, _randn)

SWEEP = os.environ.get("EINC_TORCH_SWEEP") == "1"


def _compiled_reduce_case(reduction, shapes):
    import torch._dynamo.testing
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    f = torch.compile(
        lambda x: einc.reduce(x, "b (t k) c -> b c k", reduction, k=2),
        dynamic=True, backend=counter, fullgraph=True)
    for b, t in shapes:
        x = _randn(b, 2 * t, 4, grad=True, seed=b * 10 + t)
        y = f(x)
        want = TORCH_REDUCE[reduction](x.reshape(b, t, 2, 4), 1)
        want = want.permute(0, 2, 1)
        _close(y, want)
        _close(torch.autograd.grad(y.sin().sum(), x)[0],
               torch.autograd.grad(want.sin().sum(), x)[0])
    assert counter.frame_count == 1  # dynamic: one graph for every shape


@pytest.mark.parametrize("reduction", REDUCTIONS if SWEEP else ["max"])
def test_compile_dynamic_reduction_one_graph(reduction):
    _compiled_reduce_case(reduction, [(2, 3), (3, 5), (4, 7)])


@pytest.mark.skipif(not SWEEP, reason="EINC_TORCH_SWEEP=1: slow")
def test_compile_dynamic_rearrange_views_one_graph():
    import torch._dynamo.testing
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    f = torch.compile(
        lambda x: einc.rearrange(x, "b (h d) t -> (b t) h d", h=2) * 2,
        dynamic=True, backend=counter, fullgraph=True)
    for b, d, t in [(2, 3, 4), (3, 5, 2), (4, 4, 6)]:  # (a size 1 is
        # specialized: a second graph, as torch's own reshapes get)
        x = _randn(b, 2 * d, t)
        _close(f(x), x.reshape(b, 2, d, t).permute(0, 3, 1, 2).reshape(
            b * t, 2, d) * 2)
    assert counter.frame_count == 1


@pytest.mark.skipif(not SWEEP, reason="EINC_TORCH_SWEEP=1: slow")
@pytest.mark.parametrize("mode", ["reduce-overhead",
                                  "max-autotune-no-cudagraphs"])
def test_compile_modes_on_cpu(mode):
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: einc.reduce(
        einc.einsum("b i j, j k -> b i k", a, b), "b i k -> b k", "max"),
        mode=mode)
    a, b = _randn(3, 4, 5), _randn(5, 6, seed=1)
    _close(f(a, b), (a @ b).amax(1))


class _Block(torch.nn.Module):
    def forward(self, x, w):
        h = einc.rearrange(x, "b t (h d) -> b h t d", h=2)
        s = einc.einsum("b h t d, d e -> b h t e", h, w)
        return (einc.reduce(s, "b h t e -> b e", "mean"),
                einc.reduce(s, "b h t e -> b h", "max"))


def _block_torch(x, w):
    b, t, c = x.shape
    s = x.reshape(b, t, 2, c // 2).permute(0, 2, 1, 3) @ w
    return s.mean((1, 2)), s.amax((2, 3))


def _check_program(run, w, shapes, tol=1e-12):
    for b, t in shapes:
        x = _randn(b, t, 8, seed=b + t).to(w.dtype)
        for got, want in zip(run(x, w), _block_torch(x, w)):
            _close(got, want, tol)


def test_export_dims_decompositions_and_save_load(tmp_path):
    from torch.export import Dim, export
    x, w = _randn(3, 5, 8), _randn(4, 3, seed=1)
    dims = {"x": {0: Dim("B", min=1, max=64), 1: Dim("T", min=2, max=128)},
            "w": None}
    ep = export(_Block(), (x, w), dynamic_shapes=dims)
    _check_program(ep.module(), w, [(1, 2), (7, 9)])
    _check_program(ep.run_decompositions().module(), w, [(2, 3), (5, 11)])
    torch.export.save(ep, tmp_path / "block.pt2")
    _check_program(torch.export.load(tmp_path / "block.pt2").module(), w,
                   [(4, 6)])
    with pytest.raises(AssertionError, match="<= 128"):  # as torch's own
        ep.module()(_randn(3, 200, 8), w)  # (T=1 below min=2 runs, as


@pytest.mark.skipif(not SWEEP, reason="EINC_TORCH_SWEEP=1: slow")
def test_export_merged_dim():
    from torch.export import Dim, export

    class Split(torch.nn.Module):
        def forward(self, x):
            return einc.rearrange(x, "b t (h d) -> b h t d", h=2)

    heads = Dim("H", min=1, max=32)
    ep = export(Split(), (_randn(3, 5, 8),),
                dynamic_shapes={"x": {0: Dim("B", max=64), 2: 2 * heads}})
    x = _randn(2, 5, 12)
    _close(ep.module()(x), x.reshape(2, 5, 2, 6).permute(0, 2, 1, 3))


@pytest.mark.skipif(not SWEEP, reason="EINC_TORCH_SWEEP=1: slow")
def test_aot_inductor_package(tmp_path):
    from torch.export import Dim, export
    inductor = pytest.importorskip("torch._inductor")
    if not hasattr(inductor, "aoti_compile_and_package"):
        pytest.skip("no AOTInductor in this torch")
    x, w = _randn(3, 5, 8).float(), _randn(4, 3, seed=1).float()
    dims = {"x": {0: Dim("B", min=1, max=64), 1: Dim("T", min=2, max=128)},
            "w": None}
    ep = export(_Block(), (x, w), dynamic_shapes=dims)
    path = inductor.aoti_compile_and_package(
        ep, package_path=str(tmp_path / "block.pt2"))
    _check_program(inductor.aoti_load_package(path), w, [(5, 7)], 1e-5)


def test_zero_graph_breaks_layers_and_torch_einsum_forms():
    import einc.torch as et
    m, x = _model(), _randn(5, 6, 3)
    explained = torch._dynamo.explain(m)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons
    explained = torch._dynamo.explain(
        lambda a, b: et.einsum("bij,jk->bik", a, b)
        + et.einsum("bij,jk", [a, b]) + et.einsum(a, [0, 1, 2], b, [2, 3],
                                                  [0, 1, 3]))(
        _randn(2, 3, 4), _randn(4, 5, seed=1))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons


def test_export_module_with_parameters_and_backward():
    from torch.export import Dim, export

    class Mix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(_randn(4, 3, seed=1))

        def forward(self, x):
            return einc.reduce(einc.einsum("b t d, d e -> b t e", x, self.w),
                               "b t e -> b e", "prod")

    m = Mix()
    ep = export(m, (_randn(3, 5, 4),), dynamic_shapes={
        "x": {0: Dim("B", max=64), 1: Dim("T", max=64)}})
    x = _randn(2, 6, 4, seed=2)
    want = (x @ m.w).prod(1)
    _close(ep.run_decompositions().module()(x), want)
    module = ep.module()
    got = module(x)
    _close(got, want)
    got.sum().backward()
    want.sum().backward()
    _close(module.w.grad, m.w.grad)


@pytest.mark.parametrize("n", [4, 300])  # lowered, einc's path
def test_compiled_inplace_through_view_writes_the_input(n):
    torch._dynamo.reset()

    def ours(x):
        v = einc.rearrange(x, "a (b c) -> b a c", b=2)
        v.add_(1)
        return einc.reduce(v, "b a c -> a", "sum")

    def theirs(x):
        v = x.reshape(n, 2, n // 2).permute(1, 0, 2)
        v.add_(1)
        return v.sum((0, 2))

    x1 = _randn(n, n)
    x2 = x1.clone()
    _close(torch.compile(ours, backend="aot_eager")(x1), theirs(x2))
    _close(x1, x2)


@pytest.mark.skipif(not SWEEP, reason="EINC_TORCH_SWEEP=1: slow")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5),
                                       (torch.bfloat16, 2e-2),
                                       (torch.float16, 2e-2)])
def test_compile_low_precision_and_no_grad(dtype, tol):
    torch._dynamo.reset()
    w = _randn(4, 6, seed=1).to(dtype).requires_grad_()
    f = torch.compile(lambda a: einc.reduce(
        einc.einsum("n i j, j k -> n i k", a, w), "n i k -> n k", "mean"),
        dynamic=True)
    a = _randn(5, 3, 4).to(dtype)
    want = (a.double() @ w.detach().double()).mean(1)
    with torch.no_grad():
        got = f(a)
    assert not got.requires_grad
    _close(got.double(), want, tol)
    with torch.inference_mode():
        _close(f(a).double(), want, tol)
    assert f(a).requires_grad
