"""torch CPU tensors, when torch is installed (skipped otherwise): torch
in gives torch out, on the same dtype, zero-copy out=, strided views,
bfloat16."""
import numpy as np
import pytest

import einc

torch = pytest.importorskip("torch")


def test_torch_in_torch_out():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    torch.testing.assert_close(got, a @ b)
    torch.testing.assert_close(einc.rearrange(a, "i j -> j i"), a.T)


def test_torch_views_and_out():
    x = torch.randn(8, 12)[::2, 1::3]
    y = torch.randn(4, 5).flip(0)
    out = torch.empty(4, 5)
    assert einc.einsum("i j, j k -> i k", x, y, out=out) is out
    torch.testing.assert_close(out, x @ y)


def test_torch_bfloat16():
    a = torch.randn(3, 8, dtype=torch.bfloat16)
    b = torch.randn(8, 2, dtype=torch.bfloat16)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert got.dtype == torch.bfloat16
    np.testing.assert_allclose(got.float().numpy(),
                               (a.float() @ b.float()).numpy(), rtol=2e-2,
                               atol=2e-2)
