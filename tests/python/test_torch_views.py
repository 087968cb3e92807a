"""Every view einc returns of a torch tensor is a torch view (issue 38
item 1; docs/design.md, "torch in training code", "Views are torch's").

A result that shares its input's memory must be made by torch itself
(Tensor.as_strided, permute, reshape), with or without requires_grad:
otherwise it has no `_base` and a version counter of its own, and a change
to the input in place after autograd saved the view goes unseen, so
backward gives a gradient computed from the changed values where torch and
einops raise "modified by an inplace operation". The oracle is einops (or
torch.einsum) on the same input: the same view-ness, `_base`, strides,
storage offset, version counter and errors. Sizes below and above the
lowering bound (_torch_lower.EAGER_MAX_ELEMENTS) where grad is involved.
"""
import pytest

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

import einc  # noqa: E402
import einc.einops  # noqa: E402
import einc.layers.torch  # noqa: E402
import einc.torch  # noqa: E402
import einops.layers.torch  # noqa: E402

# (name, einc's call, the reference call): each a one-tensor call whose
# result is a view of its input in einops / torch.
CALLS = [
    ("rearrange", lambda x: einc.rearrange(x, "a b -> b a"),
     lambda x: einops.rearrange(x, "a b -> b a")),
    ("rearrange split", lambda x: einc.rearrange(x, "a (b c) -> c a b", c=2),
     lambda x: einops.rearrange(x, "a (b c) -> c a b", c=2)),
    ("einsum", lambda x: einc.einsum("a b -> b a", x),
     lambda x: einops.rearrange(x, "a b -> b a")),
    ("einsum numpy", lambda x: einc.einsum("ij->ji", x),
     lambda x: torch.einsum("ij->ji", x)),
    ("einsum diagonal", lambda x: einc.einsum("ii->i", x[:3, :3]),
     lambda x: torch.einsum("ii->i", x[:3, :3])),
    ("reduce nothing", lambda x: einc.reduce(x, "a b -> b a", "sum"),
     lambda x: einops.reduce(x, "a b -> b a", "sum")),
    ("einops.rearrange", lambda x: einc.einops.rearrange(x, "a b -> b a"),
     lambda x: einops.rearrange(x, "a b -> b a")),
    ("einops.reduce", lambda x: einc.einops.reduce(x, "a b -> b a", "max"),
     lambda x: einops.reduce(x, "a b -> b a", "max")),
    ("einops.einsum", lambda x: einc.einops.einsum(x, "a b -> b a"),
     lambda x: einops.einsum(x, "a b -> b a")),
    ("einops.unpack",
     lambda x: einc.einops.unpack(x, [(1,), (-1,)], "a *")[1],
     lambda x: einops.unpack(x, [(1,), (-1,)], "a *")[1]),
    ("torch.einsum", lambda x: einc.torch.einsum("ij->ji", x),
     lambda x: torch.einsum("ij->ji", x)),
    ("layer", lambda x: einc.layers.torch.Rearrange("a b -> b a")(x),
     lambda x: einops.layers.torch.Rearrange("a b -> b a")(x)),
]
IDS = [name for name, _, _ in CALLS]
SIZES = [(3, 4), (300, 8)]  # 12 and 2400 elements; 300 x 8 x 300 floats
# (the product below) is past the lowering bound


def _inputs(shape, layout, seed):
    """A seeded input of this shape: contiguous, a slice of a bigger
    tensor (a storage offset), or a transposed one."""
    g = torch.Generator().manual_seed(seed)
    if layout == "offset":
        return torch.randn(shape[0] + 2, shape[1], generator=g)[2:]
    if layout == "transposed":
        return torch.randn(shape[1], shape[0], generator=g).t()
    return torch.randn(*shape, generator=g)


def _base(t):
    return t if t._base is None else t._base


@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("name,call,reference", CALLS, ids=IDS)
def test_inplace_change_before_backward_raises(name, call, reference, shape):
    """The issue's trial: the input of a view changed in place after the
    view was saved for w's gradient; torch's error, as with einops (the
    gradient was off by the change)."""
    for fn in (reference, call):
        x = _inputs(shape, "contiguous", 1)
        y = fn(x)
        w = torch.randn(y.shape, generator=torch.Generator().manual_seed(2),
                        requires_grad=True)
        z = (y * w).sum()
        x.add_(100)
        with pytest.raises(RuntimeError,
                           match="modified by an inplace operation"):
            z.backward()


@pytest.mark.parametrize("layout", ["contiguous", "offset", "transposed"])
@pytest.mark.parametrize("name,call,reference", CALLS, ids=IDS)
def test_view_is_torch_view(name, call, reference, layout):
    """Where the reference is a view, einc's result is one too: the same
    _base, strides and storage offset, one version counter with the
    input, and a write through it seen in the input."""
    x = _inputs((6, 4), layout, 3)
    got, want = call(x), reference(x)
    assert want._is_view()
    assert got._is_view() and _base(got) is _base(x), name
    assert got.shape == want.shape and torch.equal(got, want)
    assert got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    x.add_(1)
    assert got._version == x._version == want._version
    got.mul_(2)  # through the view: the input's counter moves, and values
    assert x._version == got._version
    assert torch.equal(got, reference(x))


@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("name,call,reference", CALLS, ids=IDS)
def test_no_grad_view_of_parameter(name, call, reference, shape):
    """A view of a parameter made under no_grad is torch's no_grad view:
    its _base is the parameter, it says it requires grad as torch's views
    of a leaf do, and changing it in place with grad on is torch's error,
    as for einops' view."""
    for fn in (reference, call):
        p = torch.nn.Parameter(_inputs(shape, "contiguous", 4))
        with torch.no_grad():
            y = fn(p)
        assert _base(y) is p and y.requires_grad and y.grad_fn is None
        with pytest.raises(RuntimeError, match="created in no_grad mode"):
            y.mul_(2)


def test_einops_einsum_first_call_views():
    """einc.einops.einsum's first call of a pattern (its Python general
    function) views as later calls (the builtin) do."""
    x = _inputs((3, 4), "contiguous", 5)
    first = einc.einops.einsum(x, "first_call q -> q first_call")
    again = einc.einops.einsum(x, "first_call q -> q first_call")
    assert first._is_view() and again._is_view()
    assert _base(first) is x and _base(again) is x


def test_compiled_diagonal_with_dynamic_shapes_is_a_view():
    """Under torch.compile with dynamic shapes a diagonal (the view that
    is not lowered onto permute and reshape) was the operator's copy: a
    change to the input was not seen through it. Now its sizes are
    specialized and it is torch's view, as torch.diagonal's is."""
    compiled = torch.compile(lambda x: einc.einsum("ii->i", x),
                             fullgraph=True, dynamic=True)
    x = _inputs((4, 4), "contiguous", 6)
    y = compiled(x)
    assert _base(y) is x
    x.add_(1)
    assert torch.equal(y, torch.diagonal(x))
