"""Forward-mode AD inside torch.compile (issue 38 item 5, in part):
torch.func.jvp of a compiled function gives the reference's tangent
where einc lowers the call onto torch's operations; where it does not
(einc's own operator, which torch gives no forward derivative), the call
raises instead of returning a wrong tangent, as it did (silently)."""
import pytest

import einc

torch = pytest.importorskip("torch")


def _rel(got, want):
    return float((got - want).norm() / max(float(want.norm()), 1.0))


def test_compiled_jvp_of_a_lowered_call():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 300, dtype=torch.float64, generator=g)
    w = torch.randn(300, 200, dtype=torch.float64, generator=g)
    t = torch.randn(40, 300, dtype=torch.float64, generator=g)
    fn = torch.compile(lambda x, t: torch.func.jvp(
        lambda a: einc.einsum("b i, i j -> b j", a, w), (x,), (t,)))
    out, tangent = fn(x, t)
    assert _rel(out, x @ w) <= 1e-12
    assert _rel(tangent, t @ w) <= 1e-12


def test_compiled_jvp_of_einc_operator_is_never_silently_wrong():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(40, 300, dtype=torch.float64, generator=g)
    t = torch.randn(40, 300, dtype=torch.float64, generator=g)
    want = t.gather(1, x.argmax(1, keepdim=True)).squeeze(1)
    torch._dynamo.reset()
    fn = torch.compile(lambda x, t: torch.func.jvp(
        lambda a: einc.reduce(a, "b i -> b", "max"), (x,), (t,)))
    try:
        _, tangent = fn(x, t)
    except Exception:  # noqa: BLE001 (refused: what this test allows)
        return
    assert _rel(tangent, want) <= 1e-12
