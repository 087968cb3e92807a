"""einc's rearrange, repeat and reduce (named and callable reductions)
against einops on random patterns: elementary axes of sizes 1 to 4 grouped
at random into splits and merges on both sides, '()' dims, '...' over
extra dims, anonymous axes ('(h 2)'), axis lengths given for some of a
group's axes, new axes for repeat. einops is the oracle: the same shape and
dtype, and identical values (rearrange and repeat only move elements)."""
import numpy as np
import pytest

import einc

einops = pytest.importorskip("einops")

NAMES = list("abcdef")


def grouped(names, r, empty_ok=True):
    """names split at random into dims: ['a', '(b c)', '()', 'd']."""
    out, i = [], 0
    while i < len(names):
        k = int(r.integers(1, 4))
        group = names[i:i + k]
        i += k
        out.append(group[0] if len(group) == 1 and r.random() < 0.8
                   else f"({' '.join(group)})")
        if empty_ok and r.random() < 0.1:
            out.append("()")
    return out


def shape_of(dims, size):
    shape = []
    for d in dims:
        names = d.strip("()").split()
        shape.append(int(np.prod([int(n) if n.isdigit() else size[n]
                                  for n in names])))
    return shape


def lengths_for(dims, size, r):
    """For each composite dim, all its axes' lengths but maybe one."""
    lengths = {}
    for d in dims:
        names = [n for n in d.strip("()").split() if not n.isdigit()]
        if len(names) > 1:
            unknown = int(r.integers(0, len(names) + 1))
            lengths.update({n: size[n] for i, n in enumerate(names)
                            if i != unknown})
    return lengths


def random_layout(r):
    """(input names, sizes, input dims, extra ellipsis shape or None)."""
    names = NAMES[:int(r.integers(1, 6))]
    size = {n: int(r.integers(1, 5)) for n in names}
    ell = (tuple(int(r.integers(1, 4)) for _ in range(int(r.integers(1, 3))))
           if r.random() < 0.2 else None)
    return names, size, grouped(names, r), ell


def pattern_and_input(r, left, right, size, ell):
    x_shape = shape_of(left, size)
    if ell is not None:
        left, right = ["..."] + left, ["..."] + right
        x_shape = list(ell) + x_shape
    x = np.arange(int(np.prod(x_shape)), dtype=np.int64).reshape(x_shape)
    return f"{' '.join(left)} -> {' '.join(right)}", x


def rearrange_case(seed):
    r = np.random.default_rng(seed)
    names, size, left, ell = random_layout(r)
    out = list(names)
    r.shuffle(out)
    pattern, x = pattern_and_input(r, left, grouped(out, r), size, ell)
    return pattern, x, lengths_for(left, size, r)


def repeat_case(seed):
    r = np.random.default_rng(seed)
    names, size, left, ell = random_layout(r)
    new = [f"n{i}" for i in range(int(r.integers(1, 3)))]
    size.update({n: int(r.integers(1, 4)) for n in new})
    out = list(names) + new
    r.shuffle(out)
    right = grouped(out, r)
    if r.random() < 0.3:  # an anonymous repeat, as in '(h 2)'
        right.append(f"({out[0]} 2)" if out[0] not in " ".join(right)
                     else "3")
    pattern, x = pattern_and_input(r, left, right, size, ell)
    lengths = lengths_for(left, size, r)
    lengths.update({n: size[n] for n in new})
    return pattern, x, lengths


def reduce_case(seed):
    r = np.random.default_rng(seed)
    names, size, left, ell = random_layout(r)
    if r.random() < 0.3:  # an anonymous axis, reduced: '(g 2)'
        names, size["g"] = names + ["g"], int(r.integers(1, 3))
        left = left + ["(g 2)"]
    out = [n for n in names if r.random() < 0.5]
    r.shuffle(out)
    pattern, x = pattern_and_input(r, left, grouped(out, r), size, ell)
    if ell is not None and r.random() < 0.5:  # reduce the ellipsis too
        pattern = pattern.replace("-> ...", "->")
    return pattern, x.astype(np.float64), lengths_for(left, size, r)


@pytest.mark.parametrize("seed", range(200))
def test_rearrange_random(seed):
    pattern, x, lengths = rearrange_case(seed)
    want = einops.rearrange(x, pattern, **lengths)
    got = einc.rearrange(x, pattern, **lengths)
    assert got.shape == want.shape and got.dtype == want.dtype, pattern
    np.testing.assert_array_equal(got, want, err_msg=pattern)


@pytest.mark.parametrize("seed", range(100))
def test_repeat_random(seed):
    pattern, x, lengths = repeat_case(seed)
    want = einops.repeat(x, pattern, **lengths)
    got = einc.repeat(x, pattern, **lengths)
    assert got.shape == want.shape and got.dtype == want.dtype, pattern
    np.testing.assert_array_equal(got, want, err_msg=pattern)


def _std(x, axes):
    return x.std(axis=axes)


CALLABLES = [np.max, np.min, np.sum, np.mean, np.median, _std]


@pytest.mark.parametrize("seed", range(120))
def test_reduce_random(seed):
    """Named reductions and callables (fn(x, axes), as einops calls it)."""
    pattern, x, lengths = reduce_case(seed)
    for reduction in ["sum", "max", CALLABLES[seed % len(CALLABLES)]]:
        want = einops.reduce(x, pattern, reduction, **lengths)
        got = einc.reduce(x, pattern, reduction, **lengths)
        assert np.shape(got) == np.shape(want), (pattern, reduction)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{pattern} {reduction}")
