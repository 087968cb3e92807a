"""einc's torch layers outside Python's eager mode (issue 38):

- torch.jit.script of every layer (einc.layers.torch and
  einc.einops.layers.torch): the scripted form calls einc's operator;
  values and gradients against einops' layers in float64 (1e-12), after
  a jit.save / jit.load round trip too; a Rearrange that would reduce and
  a Reduce with a callable refuse to script with einc's error.
- torch.export of a model whose calls einc lowers onto torch's
  operations holds only aten operations: saved, it runs in a new process
  that never imports einc (docs/design.md, "Export, deployment and
  sharding"); a call einc does not lower (a max reduction) keeps einc's
  operator, which that process would need einc for."""
import subprocess
import sys
import warnings

import pytest

import einc

torch = pytest.importorskip("torch")
einops = pytest.importorskip("einops")

import einc.einops.layers.torch as EL  # noqa: E402
import einc.layers.torch as L  # noqa: E402
import einops.layers.torch as RL  # noqa: E402


def _rel(got, want):
    return float((got - want).norm() / max(float(want.norm()), 1.0))


def _script(module):
    with warnings.catch_warnings():  # (torch marks jit.script deprecated)
        warnings.simplefilter("ignore", FutureWarning)
        return torch.jit.script(module)


from layer_cases import LAYERS  # noqa: E402


@pytest.mark.parametrize("layers", [L, EL], ids=["einc", "einc.einops"])
@pytest.mark.parametrize("name,make,shape", LAYERS,
                         ids=[c[0] for c in LAYERS])
def test_layer_scripts(name, make, shape, layers, tmp_path):
    ours, theirs = make(layers).double(), make(RL).double()
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            p.copy_(q)
    scripted = _script(ours)
    assert "einc::einsum" in str(scripted.inlined_graph)
    torch.jit.save(scripted, str(tmp_path / "m.pt"))
    loaded = torch.jit.load(str(tmp_path / "m.pt"))
    for n in (2, 5):
        x = torch.randn(n, *shape[1:], dtype=torch.float64)
        want = theirs(x)
        for module in (scripted, loaded):
            assert _rel(module(x), want) <= 1e-12
    params = list(ours.parameters())
    if params:  # gradients of the scripted form are einc's backward
        x = torch.randn(*shape, dtype=torch.float64)
        got = torch.autograd.grad(scripted(x).square().sum(), params)
        want = torch.autograd.grad(theirs(x).square().sum(),
                                   list(theirs.parameters()))
        for g, w in zip(got, want):
            assert _rel(g, w) <= 1e-12


def test_script_refuses_what_it_cannot_check():
    with pytest.raises(einc.EincError, match="never reduces"):
        _script(L.Rearrange("b s d -> b d"))
    with pytest.raises(einc.EincError, match="callable"):
        _script(L.Reduce("b s d -> b d", torch.amax))


_RUN_WITHOUT_EINC = """
import sys
import torch
program = torch.export.load(sys.argv[1])
x, want = torch.load(sys.argv[2])
got = program.module()(x)
assert "einc" not in sys.modules, "the program imported einc"
err = float((got - want).norm() / want.norm())
print("relerr", err)
sys.exit(0 if err <= 1e-12 else 3)
"""


def _vit_head():
    return torch.nn.Sequential(
        L.Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=2, q=2),
        L.EinMix("b t d -> b t e", weight_shape="d e", bias_shape="e",
                 d=12, e=8),
        L.Reduce("b t e -> b e", "mean")).double()


def test_exported_program_runs_without_einc(tmp_path):
    """Every call lowers: the saved program is aten operations only."""
    net = _vit_head()
    x = torch.randn(3, 3, 4, 4, dtype=torch.float64)
    program = torch.export.export(
        net, (x,), dynamic_shapes={"input": {0: torch.export.Dim("b")}})
    assert "einc" not in program.graph_module.code
    torch.export.save(program, str(tmp_path / "net.pt2"))
    x5 = torch.randn(5, 3, 4, 4, dtype=torch.float64)
    torch.save((x5, net(x5).detach()), str(tmp_path / "io.pt"))
    script = tmp_path / "run.py"
    script.write_text(_RUN_WITHOUT_EINC)
    run = subprocess.run([sys.executable, str(script),
                          str(tmp_path / "net.pt2"), str(tmp_path / "io.pt")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_unlowered_call_keeps_einc_operator():
    """A max reduction is einc's own (its tie rule): the export keeps
    einc's operator, so serving it needs einc (documented choice)."""
    net = L.Reduce("b c (h 2) (w 2) -> b c h w", "max")
    x = torch.randn(3, 4, 6, 6)
    program = torch.export.export(net, (x,))
    assert "einc.einsum" in program.graph_module.code
