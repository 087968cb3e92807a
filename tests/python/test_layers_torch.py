"""einc.layers.torch (issue 25): Rearrange, Reduce and EinMix with
einops.layers.torch's constructors and results (the same weights give the
same outputs and gradients), in nn.Sequential, under
torch.compile(fullgraph=True) and torch.export; EinMix's errors."""
import pytest

import einc

torch = pytest.importorskip("torch")
einops_layers = pytest.importorskip("einops.layers.torch")
L = pytest.importorskip("einc.layers.torch")

EINMIX = [
    ("t b cin -> t b cout", "cin cout", "cout", dict(cin=10, cout=20),
     (3, 2, 10)),
    ("t b (head cin) -> t b (head cout)", "head cin cout", "head cout",
     dict(head=4, cin=3, cout=5), (3, 2, 12)),
    ("h w c -> hout w c", "h hout", "hout", dict(h=6, hout=7), (6, 4, 3)),
    ("b ... c -> b ... d", "c d", "d", dict(c=4, d=3), (2, 5, 6, 4)),
    ("t b c -> t b c", "c", None, dict(c=8), (2, 3, 8)),
    ("b (h p) (w q) c -> b (h w) e", "p q c e", None,
     dict(p=2, q=2, c=3, e=5), (2, 4, 6, 3)),
]


@pytest.mark.parametrize("pattern,weight,bias,lengths,shape", EINMIX)
def test_einmix_as_einops(pattern, weight, bias, lengths, shape):
    torch.manual_seed(0)
    mine = L.EinMix(pattern, weight, bias, **lengths).double()
    theirs = einops_layers.EinMix(pattern, weight, bias, **lengths).double()
    assert ({k: v.shape for k, v in mine.state_dict().items()}
            == {k: v.shape for k, v in theirs.state_dict().items()})
    theirs.load_state_dict(mine.state_dict())
    x = torch.randn(shape, dtype=torch.float64)
    got, want = mine(x), theirs(x)
    torch.testing.assert_close(got, want)
    dout = torch.randn_like(want)
    got.backward(dout)
    want.backward(dout)
    for (name, p), q in zip(mine.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    assert repr(mine) == repr(theirs)


def test_einmix_initialisation_bounds():
    m = L.EinMix("b i -> b o", "i o", "o", i=300, o=50)
    assert m.weight.abs().max() <= (3 / 300) ** 0.5
    assert m.bias.abs().max() <= (1 / 300) ** 0.5
    assert m.weight.std() > 0.5 * (1 / 300) ** 0.5


@pytest.mark.parametrize("args,kwargs", [
    (("b i -> b o", "i o"), dict(i=3)),            # o has no length
    (("b i -> b o", "i (o)"), dict(i=3, o=2)),     # parentheses in weight
    (("b i -> b o", "i o k"), dict(i=3, o=2, k=2)),  # k in neither side
    (("b i -> b o z", "i o"), dict(i=3, o=2)),     # z from nowhere
    (("b i -> b o", "i o", "q"), dict(i=3, o=2)),  # bias axis not output
    (("b i -> b o", "i o"), dict(i=3, o=2, u=1)),  # u unused
])
def test_einmix_errors(args, kwargs):
    with pytest.raises(einc.EincError):
        L.EinMix(*args, **kwargs)


def _net():
    torch.manual_seed(1)
    return torch.nn.Sequential(
        L.Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=4, q=4),
        L.EinMix("b t d -> b t e", weight_shape="d e", bias_shape="e",
                 d=48, e=32),
        L.Reduce("b t e -> b e", "max"),
        L.EinMix("b (g e) -> b g", weight_shape="e", g=4, e=8))


def _reference(net):
    ref = torch.nn.Sequential(
        einops_layers.Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=4,
                                q=4),
        einops_layers.EinMix("b t d -> b t e", weight_shape="d e",
                             bias_shape="e", d=48, e=32),
        einops_layers.Reduce("b t e -> b e", "max"),
        einops_layers.EinMix("b (g e) -> b g", weight_shape="e", g=4, e=8))
    ref.load_state_dict(net.state_dict())
    return ref


def test_sequential_compile_and_export():
    net = _net()
    x = torch.randn(2, 3, 16, 16)
    want = _reference(net)(x)
    torch.testing.assert_close(net(x), want)
    assert "Rearrange('b c (h p) (w q) -> b (h w) (p q c)', p=4, q=4)" in \
        repr(net)
    explained = torch._dynamo.explain(net)(x)
    assert explained.graph_break_count == 0, explained.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net(x).sum().backward()
    for g, p in zip(grads, net.parameters()):
        torch.testing.assert_close(g, p.grad)
    exported = torch.export.export(net, (x,))
    assert "einc.einsum" in exported.graph_module.code
    torch.testing.assert_close(exported.module()(x), want)


# --- issue 38 item 5 ----------------------------------------------------------

def test_einmix_bias_under_autocast_follows_linear():
    """Under autocast(bfloat16) EinMix with a bias returns bfloat16, as
    nn.Linear and einops' EinMix do (a float32 bias promoted the sum back
    to float32), with values within bfloat16's rounding of einops'; the
    parameters' gradients stay float32."""
    torch.manual_seed(38)
    mine = L.EinMix("b t d -> b t e", "d e", "e", d=16, e=8)
    theirs = einops_layers.EinMix("b t d -> b t e", "d e", "e", d=16, e=8)
    theirs.load_state_dict(mine.state_dict())
    linear = torch.nn.Linear(16, 8)
    x = torch.randn(2, 3, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want, lin = mine(x), theirs(x), linear(x)
    assert got.dtype == want.dtype == lin.dtype == torch.bfloat16
    err = (got.float() - want.float()).norm() / want.float().norm()
    assert err <= 1e-2  # bfloat16's epsilon is 2^-7
    got.float().sum().backward()
    assert mine.bias.grad.dtype == mine.weight.grad.dtype == torch.float32
    assert mine(x).dtype == torch.float32  # no autocast: float32 as before


def test_einops_layers_torch_module():
    """einc.einops.layers.torch, as einops.layers.torch: the same classes
    as einc.layers.torch."""
    from einc.einops.layers import torch as layers

    assert layers.Rearrange is L.Rearrange
    assert layers.Reduce is L.Reduce
    assert layers.EinMix is L.EinMix
    net = torch.nn.Sequential(layers.Rearrange("b c h w -> b (h w) c"),
                              layers.Reduce("b n c -> b c", "mean"))
    assert net(torch.zeros(2, 3, 4, 5)).shape == (2, 3)
