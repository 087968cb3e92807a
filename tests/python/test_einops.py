"""einc's einops functions against einops itself: the examples of einops'
documentation (rearrange, reduce, repeat, parse_shape, pack, unpack, einsum)
and random reductions of every kind. einops is the oracle; results must be
identical (exact for rearrange/repeat and integer reductions)."""
import numpy as np
import pytest

import einc

einops = pytest.importorskip("einops")

R = np.random.default_rng(17)
IMAGES = [R.standard_normal((30, 40, 3)) for _ in range(32)]
X = R.standard_normal((10, 32, 64))
IMG4 = R.standard_normal((4, 3, 8, 6))
IMAGE = R.standard_normal((30, 40))

# (tensor, pattern, axes) from einops' rearrange documentation
REARRANGE = [
    (IMAGES, "b h w c -> b h w c", {}),
    (IMAGES, "b h w c -> (b h) w c", {}),
    (IMAGES, "b h w c -> h (b w) c", {}),
    (IMAGES, "b h w c -> b c h w", {}),
    (IMAGES, "b h w c -> b (c h w)", {}),
    (IMAGES, "b (h1 h) (w1 w) c -> (b h1 w1) h w c", {"h1": 2, "w1": 2}),
    (IMAGES, "b (h h1) (w w1) c -> b h w (c h1 w1)", {"h1": 2, "w1": 2}),
    (IMG4, "b c h w -> b (c h w)", {}),
    (IMG4, "b c (h h2) (w w2) -> b (c h2 w2) h w", {"h2": 2, "w2": 2}),
    (IMG4, "b c h w -> b c () h w ()", {}),
    (IMG4, "... h w -> ... (h w)", {}),
    (IMG4, "b ... -> b (...)", {}),
    (np.arange(24), "(a b c) -> c b a", {"a": 2, "b": 3}),
]

# (tensor, pattern, reduction, axes) from einops' reduce documentation
REDUCE = [
    (X, "t b c -> b c", "max", {}),
    (X, "t b c -> b c ()", "max", {}),
    (IMG4, "b c (h1 h2) (w1 w2) -> b c h1 w1", "max", {"h2": 2, "w2": 2}),
    (IMG4, "b c (h1 h2) (w1 w2) -> b (c h2 w2) h1 w1", "mean",
     {"h2": 2, "w2": 2}),
    (IMG4, "b c h w -> b c () ()", "mean", {}),
    (IMG4, "b c h w -> b c", "mean", {}),
    (IMG4, "b c h w -> () c () ()", "mean", {}),
    (IMG4, "b c h w -> b", "min", {}),
    (IMG4, "b c h w -> c", "sum", {}),
    (IMG4, "b c h w -> h w", "prod", {}),
    (IMAGES, "b h w c -> h w c", "mean", {}),
]

# (tensor, pattern, axes) from einops' repeat documentation
REPEAT = [
    (IMAGE, "h w -> h w c", {"c": 3}),
    (IMAGE, "h w -> (repeat h) w", {"repeat": 2}),
    (IMAGE, "h w -> h (repeat w)", {"repeat": 3}),
    (IMAGE, "h w -> (h h2) (w w2)", {"h2": 2, "w2": 2}),
    (IMG4, "b c h w -> b (c 3) h w", {}),
    (np.arange(3), "a -> b a", {"b": 4}),
]


@pytest.mark.parametrize("tensor,pattern,axes", REARRANGE)
def test_rearrange_docs(tensor, pattern, axes):
    want = einops.rearrange(tensor, pattern, **axes)
    got = einc.rearrange(tensor, pattern, **axes)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("tensor,pattern,reduction,axes", REDUCE)
def test_reduce_docs(tensor, pattern, reduction, axes):
    want = einops.reduce(tensor, pattern, reduction, **axes)
    got = einc.reduce(tensor, pattern, reduction, **axes)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("tensor,pattern,axes", REPEAT)
def test_repeat_docs(tensor, pattern, axes):
    want = einops.repeat(tensor, pattern, **axes)
    got = einc.repeat(tensor, pattern, **axes)
    np.testing.assert_array_equal(got, want)


def test_reduce_then_repeat_docs():
    down = einc.reduce(IMAGE, "(h h2) (w w2) -> h w", "mean", h2=2, w2=2)
    np.testing.assert_allclose(
        down, einops.reduce(IMAGE, "(h h2) (w w2) -> h w", "mean", h2=2, w2=2))
    np.testing.assert_array_equal(
        einc.repeat(down, "h w -> (h h2) (w w2)", h2=2, w2=2),
        einops.repeat(down, "h w -> (h h2) (w w2)", h2=2, w2=2))


@pytest.mark.parametrize("shape,pattern", [
    ((2, 3, 5, 7), "batch _ h w"),
    ((2, 3, 5, 7), "b c h w"),
    ((2, 3, 5, 7), "b ... w"),
    ((2, 3, 5, 7), "... w"),
    ((2, 3, 5, 7), "_ _ _ _"),
    ((2, 1, 5), "a () c"),
])
def test_parse_shape_docs(shape, pattern):
    x = np.zeros(shape)
    assert einc.parse_shape(x, pattern) == einops.parse_shape(x, pattern)


def test_parse_shape_feeds_rearrange_docs():
    x, y = np.zeros([2, 3, 5, 7]), np.zeros([700])
    axes = einc.parse_shape(x, "b _ h w")
    assert einc.rearrange(y, "(b c h w) -> b c h w", **axes).shape == (2, 10, 5, 7)


def test_parse_shape_errors():
    with pytest.raises(einc.EincError):
        einc.parse_shape(np.zeros((2, 3)), "a b c")


def test_pack_unpack_docs():
    inputs = [np.zeros([2, 3, 5]), np.ones([2, 3, 7, 5]),
              R.standard_normal([2, 3, 7, 9, 5])]
    packed, ps = einc.pack(inputs, "i j * k")
    want, want_ps = einops.pack(inputs, "i j * k")
    assert packed.shape == (2, 3, 71, 5)
    assert ps == want_ps
    np.testing.assert_array_equal(packed, want)
    for got, orig in zip(einc.unpack(packed, ps, "i j * k"), inputs):
        np.testing.assert_array_equal(got, orig)
    rgb, depth = R.standard_normal((4, 5, 3)), R.standard_normal((4, 5))
    packed, ps = einc.pack([rgb, depth], "h w *")
    np.testing.assert_array_equal(packed, einops.pack([rgb, depth], "h w *")[0])
    back = einc.unpack(packed, ps, "h w *")
    np.testing.assert_array_equal(back[0], rgb)
    np.testing.assert_array_equal(back[1], depth)
    solved = einc.unpack(packed, [(-1,), ()], "h w *")
    np.testing.assert_array_equal(solved[0], rgb)


def test_einsum_docs():
    # einops.einsum's documented calls: tensors first, pattern last
    batch_of_images = R.standard_normal((4, 3, 8, 8))
    kernel = R.standard_normal((5, 3))
    for args in [(batch_of_images, kernel, "b c h w, k c -> b k h w"),
                 (batch_of_images, "b c h w -> b c"),
                 (X, X, "t b c, t b c -> t b"),
                 (IMAGE, "h w -> w h")]:
        np.testing.assert_allclose(einc.einsum(*args), einops.einsum(*args),
                                   rtol=1e-12, atol=1e-12)


def random_reduce_case(r):
    names = list("abcde")[: int(r.integers(1, 5))]
    sizes = [int(r.integers(1, 5)) for _ in names]
    keep = [n for n in names if r.random() < 0.5]
    r.shuffle(keep)
    reduction = str(r.choice(["sum", "mean", "max", "min", "prod"]))
    return (" ".join(names) + " -> " + " ".join(keep), tuple(sizes), reduction)


@pytest.mark.parametrize("pattern,shape,reduction",
                         [random_reduce_case(np.random.default_rng(s))
                          for s in range(150)])
def test_reduce_random(pattern, shape, reduction):
    x = np.random.default_rng(len(pattern)).standard_normal(shape)
    np.testing.assert_allclose(einc.reduce(x, pattern, reduction),
                               einops.reduce(x, pattern, reduction),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["any", "all", "max", "min"])
def test_reduce_bool(reduction):
    x = np.random.default_rng(3).random((6, 5, 4)) < 0.3
    got = einc.reduce(x, "a b c -> a c", reduction)
    want = einops.reduce(x, "a b c -> a c", reduction)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reduction", ["sum", "max", "min", "prod"])
def test_reduce_int(reduction):
    x = np.random.default_rng(4).integers(-3, 4, (5, 6, 3)).astype(np.int64)
    np.testing.assert_array_equal(einc.reduce(x, "a b c -> c a", reduction),
                                  einops.reduce(x, "a b c -> c a", reduction))


def test_errors_are_runtime_errors_like_einops():
    for bad in [lambda: einc.rearrange(IMAGE, "h w -> h w c"),
                lambda: einc.reduce(IMAGE, "h w -> h", "median"),
                lambda: einc.repeat(IMAGE, "h w -> (h 2) w 3 x")]:
        with pytest.raises(RuntimeError):
            bad()
