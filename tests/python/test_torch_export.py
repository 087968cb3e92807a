"""torch.export with dynamic dimensions (issue 38), strict and non-strict
(torch's default): every public function and layer exports with its
batch (and other) dimensions symbolic, and the exported program runs at
other sizes with the values of the reference (torch.einsum, torch's own
operations, einops on torch) in float64, to 1e-12."""
import pytest

import einc
import einc.einops

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

import einc.layers.torch as L  # noqa: E402
import einc.torch  # noqa: E402
from torch.export import Dim, export  # noqa: E402

MODES = [pytest.param(True, id="strict"), pytest.param(False, id="nonstrict")]


def _rel(got, want):
    want = want.double()
    scale = float(want.norm()) or 1.0
    return float((got.double() - want).norm()) / scale


def _randn(*shape):
    return torch.randn(*shape, dtype=torch.float64)


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _check(module, example, dims, others, reference, strict):
    """Exports module on example with dims dynamic, then runs the program
    on each of others (tuples of inputs) against reference(*inputs)."""
    ep = export(module, example, dynamic_shapes=dims, strict=strict)
    for inputs in others:
        got = ep.module()(*inputs)
        want = reference(*inputs)
        if isinstance(want, (list, tuple)):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                assert _rel(g, w) <= 1e-12
        else:
            assert got.shape == want.shape, (got.shape, want.shape)
            assert _rel(got, want) <= 1e-12
    return ep


B = Dim("b", min=2, max=64)

FUNCTIONS = [
    ("rearrange", lambda x: einc.rearrange(x, "b c h w -> b h w c"),
     lambda x: x.permute(0, 2, 3, 1)),
    ("rearrange_merge",
     lambda x: einc.rearrange(x, "b c h w -> b (c h w)"),
     lambda x: x.reshape(x.shape[0], -1)),
    ("rearrange_split",
     lambda x: einc.rearrange(x, "b (c k) h w -> b k c h w", k=2),
     lambda x: einops.rearrange(x, "b (c k) h w -> b k c h w", k=2)),
    ("reduce_sum", lambda x: einc.reduce(x, "b c h w -> b c", "sum"),
     lambda x: x.sum((2, 3))),
    ("reduce_mean", lambda x: einc.reduce(x, "b c h w -> c", "mean"),
     lambda x: x.mean((0, 2, 3))),
    ("reduce_max", lambda x: einc.reduce(x, "b c h w -> b h", "max"),
     lambda x: x.amax((1, 3))),
    ("reduce_min", lambda x: einc.reduce(x, "b c h w -> b w", "min"),
     lambda x: x.amin((1, 2))),
    ("reduce_prod", lambda x: einc.reduce(x, "b c h w -> b c h", "prod"),
     lambda x: x.prod(3)),
    ("reduce_pool",
     lambda x: einc.reduce(x, "b c (h 2) (w 3) -> b c h w", "max"),
     lambda x: einops.reduce(x, "b c (h 2) (w 3) -> b c h w", "max")),
    ("repeat", lambda x: einc.repeat(x, "b c h w -> b c h w r", r=3),
     lambda x: x.unsqueeze(-1).expand(*x.shape, 3)),
    ("einsum_self",
     lambda x: einc.einsum("b c h w, b c h v -> b w v", x, x),
     lambda x: torch.einsum("bchw,bchv->bwv", x, x)),
    ("einsum_numpy", lambda x: einc.einsum("bchw->bwc", x),
     lambda x: torch.einsum("bchw->bwc", x)),
    ("torch_einsum", lambda x: einc.torch.einsum("bchw,bchw->bc", x, x),
     lambda x: torch.einsum("bchw,bchw->bc", x, x)),
    ("einops_rearrange",
     lambda x: einc.einops.rearrange(x, "b c h w -> (b h) w c"),
     lambda x: einops.rearrange(x, "b c h w -> (b h) w c")),
    ("einops_reduce",
     lambda x: einc.einops.reduce(x, "b c h w -> b c", "mean"),
     lambda x: einops.reduce(x, "b c h w -> b c", "mean")),
    ("einops_repeat",
     lambda x: einc.einops.repeat(x, "b c h w -> b c h w 2"),
     lambda x: einops.repeat(x, "b c h w -> b c h w 2")),
    ("einops_einsum",
     lambda x: einc.einops.einsum(x, x, "b c h w, b c h w -> b h"),
     lambda x: einops.einsum(x, x, "b c h w, b c h w -> b h")),
]


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("name,fn,ref", FUNCTIONS,
                         ids=[f[0] for f in FUNCTIONS])
def test_function_with_dynamic_batch(name, fn, ref, strict):
    x = _randn(3, 4, 6, 6)
    _check(Fn(fn), (x,), {"xs": ({0: B},)},
           [(_randn(n, 4, 6, 6),) for n in (2, 5, 17)], ref, strict)


@pytest.mark.parametrize("strict", MODES)
def test_every_dimension_dynamic(strict):
    """Batch, sequence and width all symbolic in one contraction."""
    S, D = Dim("s", min=2, max=64), Dim("d", min=2, max=64)

    def attend(q, k):
        return einc.einsum("b s d, b t d -> b s t", q, k)

    q, k = _randn(3, 5, 4), _randn(3, 7, 4)
    _check(Fn(attend), (q, k),
           {"xs": ({0: B, 1: S, 2: D}, {0: B, 1: Dim("t", min=2, max=64), 2: D})},
           [(_randn(2, 9, 6), _randn(2, 3, 6)),
            (_randn(6, 2, 3), _randn(6, 11, 3))],
           lambda q, k: torch.einsum("bsd,btd->bst", q, k), strict)


@pytest.mark.parametrize("strict", MODES)
def test_compiled_plan(strict):
    """einc.compile's plan, compiled for one batch, exported with the
    batch dynamic (Dynamo cannot trace the plan's C methods: its call
    records einc.einsum's node when Dynamo traces)."""
    plan = einc.compile("b i j, j k -> b i k", (3, 4, 5), (5, 6))
    w = _randn(5, 6)
    _check(Fn(plan), (_randn(3, 4, 5), w), {"xs": ({0: B}, None)},
           [(_randn(n, 4, 5), w) for n in (2, 8)],
           lambda x, w: torch.einsum("bij,jk->bik", x, w), strict)


@pytest.mark.parametrize("strict", MODES)
def test_lengths_taken_from_a_shape(strict):
    """b=x.shape[0] is symbolic under export: the length stays so."""
    def fn(x, v):
        r = einc.repeat(v, "e -> b e", b=x.shape[0])
        return einc.einsum("b e, b e -> b", x, r) + einc.reduce(
            einc.rearrange(x, "b (h e) -> b h e", b=x.shape[0], h=2),
            "b h e -> b", "sum")

    def ref(x, v):
        return x @ v + x.sum(1)

    x, v = _randn(3, 6), _randn(6)
    _check(Fn(fn), (x, v), {"xs": ({0: B}, None)},
           [(_randn(n, 6), v) for n in (2, 8)], ref, strict)


@pytest.mark.parametrize("strict", MODES)
def test_unpack_solves_a_dynamic_star(strict):
    """unpack's -1 solved from a dynamic packed axis."""
    def fn(x):
        first, rest = einc.unpack(x, [(2,), (-1,)], "b *")
        return einc.reduce(rest, "b r -> b", "sum") + first[:, 0]

    _check(Fn(fn), (_randn(3, 7),),
           {"xs": ({0: B, 1: Dim("n", min=4, max=64)},)},
           [(_randn(n, m),) for n, m in ((2, 5), (6, 12))],
           lambda x: x[:, 2:].sum(1) + x[:, 0], strict)


@pytest.mark.parametrize("strict", MODES)
def test_matmul_above_the_lowering_bound(strict):
    """A contraction einc's eager path would not lower (over
    _torch_lower.EAGER_MAX_ELEMENTS): exported all the same."""
    x, w = _randn(4, 128, 96), _randn(96, 80)
    _check(Fn(lambda x, w: einc.einsum("b t c, c e -> b t e", x, w)),
           (x, w), {"xs": ({0: B}, None)},
           [(_randn(n, 128, 96), w) for n in (2, 9)],
           lambda x, w: torch.einsum("btc,ce->bte", x, w), strict)


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("module", [einc, einc.einops],
                         ids=["einc", "einc.einops"])
def test_pack_unpack(module, strict):
    def fn(a, b):
        packed, shapes = module.pack([a, b], "b *")
        first, second = module.unpack(packed * 2, shapes, "b *")
        return packed, first, second

    def ref(a, b):
        packed, shapes = einops.pack([a, b], "b *")
        first, second = einops.unpack(packed * 2, shapes, "b *")
        return packed, first, second

    a, b = _randn(3, 4), _randn(3, 2, 5)
    _check(Fn(fn), (a, b), {"xs": ({0: B}, {0: B})},
           [(_randn(n, 4), _randn(n, 2, 5)) for n in (2, 7)], ref, strict)


def _same_weights(ours, theirs):
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            p.copy_(q)


from layer_cases import LAYERS  # noqa: E402


@pytest.mark.parametrize("strict", MODES)
@pytest.mark.parametrize("layers", [L, pytest.param(None, id="einops_layers")])
@pytest.mark.parametrize("name,make,shape", LAYERS,
                         ids=[entry[0] for entry in LAYERS])
def test_layer_with_dynamic_batch(name, make, shape, layers, strict):
    import einops.layers.torch as reference_layers

    if layers is None:
        import einc.einops.layers.torch as layers
    ours = make(layers).double()
    theirs = make(reference_layers).double()
    _same_weights(ours, theirs)
    x = _randn(*shape)
    _check(ours, (x,), {"x": {0: B}},
           [(_randn(n, *shape[1:]),) for n in (2, 5, 11)], theirs, strict)


@pytest.mark.parametrize("strict", MODES)
def test_sequential_model(strict):
    """The layers and functions together, as a model holds them."""
    net = torch.nn.Sequential(
        L.Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=2, q=2),
        L.EinMix("b t d -> b t e", weight_shape="d e", bias_shape="e",
                 d=12, e=8),
        L.Reduce("b t e -> b e", "mean")).double()
    x = _randn(3, 3, 4, 4)

    def reference(x):
        y = einops.rearrange(x, "b c (h p) (w q) -> b (h w) (p q c)", p=2,
                             q=2)
        y = torch.einsum("btd,de->bte", y, net[1].weight) + net[1].bias
        return y.mean(1)

    _check(net, (x,), {"input": {0: B}},
           [(_randn(n, 3, 4, 4),) for n in (2, 9)], reference, strict)
