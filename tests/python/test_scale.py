"""Networks past the old 64-operand limit through the Python package
(issue 26): a chain of thousands of 2x2 matrices evaluates to the product
numpy computes (f64, 1e-12 relative), plans from shapes alone, and a call
past the Python layer's bound (4096 operands per call) is an EincError,
not a crash."""
import numpy as np
import pytest

import einc


def chain(n):
    return ", ".join(f"a{i} a{i + 1}" for i in range(n)) + f" -> a0 a{n}"


def matrices(n, seed):
    rng = np.random.default_rng(seed)
    # scaled so the product stays near 1 (each has row sums about 1)
    return [m / m.sum(axis=1, keepdims=True)
            for m in rng.uniform(0.5, 1.5, (n, 2, 2))]


@pytest.mark.parametrize("n", [65, 300, 3000])
def test_chain_equals_numpy(n):
    mats = matrices(n, n)
    want = mats[0]
    for m in mats[1:]:
        want = want @ m
    got = einc.einsum(chain(n), *mats)
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()


def test_plan_of_2000_shapes():
    p = einc.plan(chain(2000), *[(2, 2)] * 2000)
    assert len(p.path) == 1999
    assert p.flops >= 16 * 1999  # every contraction costs at least 2x2x2x2


def test_past_the_python_bound_is_an_error():
    n = 4097
    with pytest.raises(einc.EincError):
        einc.einsum(chain(n), *matrices(n, 1))
