"""einc.rearrange and einc.repeat never reduce (issue 27): the binder's
axis rule (ein_options.axis_rules), on every path a call can take: the C
fast path's table (which einc.einsum shares), the general path, lists of
tensors, torch tensors."""
import numpy as np
import pytest

import einc

REDUCING = [
    ("b s d -> b d", {}),
    ("b ... -> b", {}),
    ("b (s t) d -> b s d", {"t": 1}),
    ("b s d -> (b d)", {}),
]


@pytest.mark.parametrize("pattern,lengths", REDUCING)
def test_rearrange_rejects_reduction_with_caret(pattern, lengths):
    x = np.random.rand(2, 3, 4)
    for _ in range(3):  # first call plans; later ones would hit the table
        with pytest.raises(einc.EincError) as e:
            einc.rearrange(x, pattern, **lengths)
        assert "never reduces" in str(e.value)
        assert "reduce(" in str(e.value)
        assert "^" in str(e.value)


def test_einsum_plan_in_table_does_not_serve_rearrange():
    x = np.random.rand(2, 3, 4)
    np.testing.assert_allclose(einc.einsum("b s d -> b d", x), x.sum(1),
                               rtol=1e-12)
    with pytest.raises(einc.EincError, match="never reduces"):
        einc.rearrange(x, "b s d -> b d")
    np.testing.assert_allclose(einc.einsum("b s d -> b d", x), x.sum(1),
                               rtol=1e-12)


def test_caret_under_the_reduced_axis():
    with pytest.raises(einc.EincError) as e:
        einc.rearrange(np.zeros((2, 3, 4)), "b s d -> b d")
    lines = str(e.value).splitlines()
    expr, caret = lines[-2], lines[-1]
    assert expr[caret.index("^")] == "s"


def test_repeat_rejects_reduction():
    with pytest.raises(einc.EincError, match="never reduces"):
        einc.repeat(np.zeros((2, 3, 4)), "b s d -> b d r", r=2)


def test_list_and_torch_inputs_rejected():
    with pytest.raises(einc.EincError, match="never reduces"):
        einc.rearrange([np.zeros((3, 4))] * 2, "n s d -> n d")
    torch = pytest.importorskip("torch")
    with pytest.raises(einc.EincError, match="never reduces"):
        einc.rearrange(torch.zeros(2, 3, 4), "b s d -> b d")


def test_allowed_rearranges_still_work():
    x = np.random.rand(2, 3, 4)
    np.testing.assert_array_equal(einc.rearrange(x, "b s d -> b d s"),
                                  x.transpose(0, 2, 1))
    np.testing.assert_array_equal(
        einc.rearrange(x[:, :1], "b 1 d -> b d"), x[:, 0])
    np.testing.assert_array_equal(
        einc.rearrange(x, "b s d -> b (s d) 1"), x.reshape(2, 12, 1))
    # einc's own rearrange may still add axes of given length
    assert einc.rearrange(x, "b s d -> b s d c", c=2).shape == (2, 3, 4, 2)
    np.testing.assert_allclose(einc.reduce(x, "b s d -> b d", "sum"),
                               x.sum(1), rtol=1e-12)
