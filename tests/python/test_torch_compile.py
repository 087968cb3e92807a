"""einc under torch.compile, torch.export and make_fx (issue 25): Dynamo
traces einc's calls with no graph break (counted by torch._dynamo.explain,
fullgraph=True), the compiled forward and backward equal eager, export
keeps einc's operator; sizes stay symbolic (torch's dynamic shapes), so
new batch and sequence lengths neither break the graph nor recompile."""
import pytest

import einc

torch = pytest.importorskip("torch")


def block(x, w, v):
    """A bit of everything einc offers, in a model's shape."""
    h = einc.rearrange(x, "b t (h d) -> b h t d", h=2)
    s = einc.einsum("b h t d, b h u d -> b h t u", h, h) * 0.5
    a = torch.softmax(s, -1)
    o = einc.einsum("b h t u, b h u d -> b h t d", a, h)
    o = einc.rearrange(o, "b h t d -> b t (h d)")
    y = einc.einsum("b t c, c e -> b t e", o, w)
    packed, shapes = einc.pack([y, einc.repeat(v, "e -> b t e", b=x.shape[0],
                                               t=x.shape[1])], "b t *")
    y2, _ = einc.unpack(packed, shapes, "b t *")
    return einc.reduce(y2, "b t e -> b e", "max") + einc.reduce(
        y2, "b t e -> b e", "mean")


def block_torch(x, w, v):
    """block in torch's own operations: the reference compiled einc is
    compared with (issue 40: not einc against itself)."""
    b, t, c = x.shape
    h = x.reshape(b, t, 2, c // 2).permute(0, 2, 1, 3)
    a = torch.softmax(torch.einsum("bhtd,bhud->bhtu", h, h) * 0.5, -1)
    o = torch.einsum("bhtu,bhud->bhtd", a, h).permute(0, 2, 1, 3)
    y = torch.einsum("btc,ce->bte", o.reshape(b, t, c), w)
    return y.amax(1) + y.mean(1)


def _f64(*ts):
    return [t.detach().double().requires_grad_(t.requires_grad) for t in ts]


def _rel(got, want):
    return float((got - want).norm() / want.norm())


def _inputs(batch=2):
    g = torch.Generator().manual_seed(batch)
    return (torch.randn(batch, 5, 8, generator=g),
            torch.randn(8, 6, generator=g).requires_grad_(),
            torch.randn(6, generator=g).requires_grad_())


def test_zero_graph_breaks():
    explained = torch._dynamo.explain(block)(*_inputs())
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_compiled_forward_and_backward_equal_eager():
    """The compiled forward and backward (AOTAutograd traces einc's
    backward programs), for two batch sizes. aot_eager: inductor's compile
    of a training step is what test_train_example runs, once."""
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    for batch in (2, 3):
        x, w, v = _inputs(batch)
        want = block(x, w, v)
        gw, gv = torch.autograd.grad(want.sum(), (w, v))
        got = compiled(x, w, v)
        cw, cv = torch.autograd.grad(got.sum(), (w, v))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(cw, gw)
        torch.testing.assert_close(cv, gv)
        # and in float64 against torch's own operations
        x, w, v = _f64(x, w, v)
        ref = block_torch(x, w, v)
        (rw,) = torch.autograd.grad(ref.sum(), (w,))
        got = compiled(x, w, v)
        cw, cv = torch.autograd.grad(got.sum(), (w, v))
        for a, e in ((got, ref), (cw, rw)):
            assert a.dtype == torch.float64 and _rel(a, e) <= 1e-12
        assert not cv.any()  # v is packed, then unpacked and dropped


def test_export_keeps_the_operator():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            _, w, v = _inputs()
            self.w = torch.nn.Parameter(w.detach())
            self.v = torch.nn.Parameter(v.detach())

        def forward(self, x):
            return block(x, self.w, self.v)

    m = Block()
    x = _inputs()[0]
    exported = torch.export.export(m, (x,))
    assert "einc.einsum" in exported.graph_module.code
    torch.testing.assert_close(exported.module()(x), m(x))
    ref = block_torch(*_f64(x, m.w, m.v))
    assert _rel(exported.module()(x).double(), ref) <= 1e-5


def test_views_under_compile_are_views():
    """A view einc returns is a view under torch.compile too: writing into
    it writes into the input, as in eager."""
    def f(x):
        v = einc.rearrange(x, "a b -> b a")
        v.mul_(2)
        return v

    torch._dynamo.reset()
    x = torch.arange(6.).reshape(2, 3)
    y = torch.compile(f, fullgraph=True)(x)
    torch.testing.assert_close(x, torch.arange(6.).reshape(2, 3) * 2)
    torch.testing.assert_close(y, x.T)


def test_train_example():
    """examples/train_torch.py: the einc block trains to the losses of its
    einops + torch.einsum twin, eager and compiled (inductor,
    fullgraph=True, no graph break); it exits nonzero otherwise."""
    import pathlib
    import subprocess
    import sys

    script = (pathlib.Path(__file__).resolve().parents[2] / "examples" /
              "train_torch.py")
    run = subprocess.run([sys.executable, str(script), "--steps", "4"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "graph breaks in the einc block: 0" in run.stdout
    assert run.stdout.count("(ok, tolerance") == 2


def test_einc_imported_before_torch():
    """einc imported first, torch after, the first einc call compiled:
    einc's operator and Dynamo stand-ins are there already (an import
    hook), so no graph break (a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import einc\n"
        "import torch\n"
        "assert hasattr(torch.ops.einc, 'einsum')\n"
        "f = lambda x: einc.reduce(einc.rearrange(x, 'a b -> b a'),"
        " 'b a -> b', 'sum')\n"
        "e = torch._dynamo.explain(f)(torch.randn(2, 3))\n"
        "print('breaks', e.graph_break_count)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "breaks 0" in run.stdout, run.stdout + run.stderr


def test_compiled_rearrange_keeps_the_axis_rules():
    """Compiled as eager: einc.rearrange never reduces (the stand-ins once
    traced it as an einsum with a sum), and einc.einops' functions trace
    with no graph break under einops' own rules."""
    import einc.einops

    x = torch.randn(2, 5, 3)
    reducing = torch.compile(lambda t: einc.rearrange(t, "b s d -> b d"),
                             backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="never reduces"):
        reducing(x)
    calls = {
        "rearrange": (lambda t: einc.einops.rearrange(t, "b s d -> b (s d)"),
                      x.reshape(2, 15)),
        "reduce": (lambda t: einc.einops.reduce(t, "b s d -> b d", "max"),
                   x.amax(1)),
        "repeat": (lambda t: einc.einops.repeat(t, "b s d -> b s d r", r=2),
                   x[..., None].expand(2, 5, 3, 2)),
        "einsum": (lambda t: einc.einops.einsum(t, t, "b s d, b s d -> b d"),
                   (x * x).sum(1)),
    }
    for name, (f, want) in calls.items():
        explained = torch._dynamo.explain(f)(x)
        assert explained.graph_break_count == 0, (name, explained.break_reasons)
        got = torch.compile(f, backend="aot_eager", fullgraph=True)(x)
        torch.testing.assert_close(got, want, msg=name)
    repeating = torch.compile(
        lambda t: einc.einops.rearrange(t, "b s d -> b s d r", r=2),
        backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="never"):
        repeating(x)


def _sequence_model(q, k, w):
    """Sizes that follow from the inputs only through merges, splits,
    contractions and a mean (whose gradient's scale and repeat length are
    sizes too)."""
    s = einc.einsum("b h i d, b h j d -> b h i j", q, k)
    x = einc.rearrange(s, "b h i j -> b i (h j)")
    y = einc.reduce(x, "b i (h j) -> b i h", "mean", h=2)
    return einc.einsum("b i h, h o -> b o i", y, w)


def _sequence_model_torch(q, k, w):
    b, h, i, _ = q.shape
    s = torch.einsum("bhid,bhjd->bhij", q, k)
    x = s.permute(0, 2, 1, 3).reshape(b, i, -1)
    y = x.reshape(b, i, 2, -1).mean(-1)
    return torch.einsum("bih,ho->boi", y, w)


@pytest.mark.parametrize("dynamic", [None, True])
def test_new_sizes_do_not_recompile(dynamic):
    """Five batch and sequence lengths: one graph with dynamic=True, two
    with torch's default (the second call marks the changed sizes
    dynamic); once einc specialized every size, and each new length
    recompiled (einops' test_torch_compile_for_functions hit Dynamo's
    limit of 8). Forward and gradients equal eager's."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(_sequence_model, fullgraph=True,
                             backend="aot_eager", dynamic=dynamic)
    g = torch.Generator().manual_seed(7)
    w = torch.randn(2, 17, generator=g, requires_grad=True)
    # (no first size equal to another: torch's duck sizing would give both
    # one symbol, and h=2 would fix a batch of 2)
    for b, n in [(3, 5), (4, 7), (5, 9), (6, 11), (3, 13)]:
        q = torch.randn(b, 2, n, 4, generator=g, requires_grad=True)
        k = torch.randn(b, 2, n, 4, generator=g, requires_grad=True)
        want = _sequence_model(q, k, w)
        dout = torch.randn(want.shape, generator=g)
        grads = torch.autograd.grad(want, (q, k, w), dout)
        got = compiled(q, k, w)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)
        compiled_grads = torch.autograd.grad(got, (q, k, w), dout)
        for a, e in zip(compiled_grads, grads):
            torch.testing.assert_close(a, e)
        # float32 against torch's own operations in float64
        q64, k64, w64 = _f64(q, k, w)
        ref = _sequence_model_torch(q64, k64, w64)
        assert _rel(got.double(), ref) <= 1e-5
        for a, e in zip(compiled_grads, torch.autograd.grad(
                ref, (q64, k64, w64), dout.double())):
            assert _rel(a.double(), e) <= 1e-5
    assert counters["stats"]["unique_graphs"] == (1 if dynamic else 2)
