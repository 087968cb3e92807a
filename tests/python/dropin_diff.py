"""The differential check of einc's drop-ins against their peers
(test_dropin_differential.py): one call made on both sides and the
outcomes compared, and the random pieces the cases are made of.

`outcome(fn, args, kwargs)` runs a call and keeps its result or its
exception; `differences(got, want)` lists how einc's outcome differs from
the peer's: an exception where the peer returns (or the reverse), an
exception of another type, or a result of another type (numpy scalar,
0-d ndarray, torch tensor, JAX array), dtype, shape or values (exact for
integers and bools; floats within the project's tolerances relative to
the reference's largest magnitude: f64 1e-12, f32 1e-5, f16/bf16 2e-2).
"""

import numpy as np

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover (ml_dtypes comes with JAX)
    BF16 = None

NUMPY_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "bool", "float16", "float32", "float64",
                "complex64", "complex128"]
TOLERANCE = {"float64": 1e-12, "complex128": 1e-12, "float32": 1e-5,
             "complex64": 1e-5, "float16": 2e-2, "bfloat16": 2e-2}


class Raised:
    """A call's exception, kept to compare its type."""

    def __init__(self, exc):
        self.exc = exc

    def __repr__(self):
        return f"{type(self.exc).__name__}({str(self.exc)[:120]!r})"


def outcome(fn, args, kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (compared with the peer's)
        return Raised(e)


def kind(x) -> str:
    """The result's kind as a caller sees it."""
    module = type(x).__module__.partition(".")[0]
    if isinstance(x, np.ndarray):
        return "ndarray"
    if isinstance(x, np.generic):
        return "numpy scalar"
    if module == "torch":
        return "torch " + type(x).__name__
    if module in ("jax", "jaxlib"):
        return "jax array"
    return type(x).__name__


def dtype_name(x) -> str:
    return str(x.dtype).rpartition(".")[2]


def as_numpy(x):
    """x as a numpy array of a dtype numpy computes with (bf16: f32)."""
    if type(x).__module__.startswith("torch"):
        import torch

        x = x.detach().cpu().resolve_conj()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    a = np.asarray(x)
    return a.astype(np.float32) if BF16 is not None and a.dtype == BF16 \
        else a


def differences(got, want, where="result", floor=0.0):
    """How einc's outcome differs from the peer's ([] where it does not).
    floor: the least float tolerance (the computed dtype's, where the
    result is cast to a wider one). einc's exception may be the peer's
    type or the builtin class it derives from (TypeError for numpy's
    UFuncTypeError)."""
    if isinstance(want, Raised) or isinstance(got, Raised):
        if not isinstance(got, Raised):
            return [f"{where}: returned {kind(got)} where the peer raised "
                    f"{want!r}"]
        if not isinstance(want, Raised):
            return [f"{where}: raised {got!r} where the peer returned"]
        if not isinstance(got.exc, _builtin_base(type(want.exc))):
            return [f"{where}: raised {got!r} where the peer raised "
                    f"{want!r}"]
        return []
    if isinstance(want, (tuple, list)) and not hasattr(want, "dtype"):
        if not isinstance(got, type(want)) or len(got) != len(want):
            return [f"{where}: {type(got).__name__} of "
                    f"{len(got) if hasattr(got, '__len__') else '?'} where "
                    f"the peer gave {type(want).__name__} of {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want))
                for d in differences(g, w, f"{where}[{i}]", floor)]
    if isinstance(want, dict):
        return [] if got == want else [f"{where}: {got} != {want}"]
    if not hasattr(want, "dtype") and not hasattr(got, "dtype"):
        return [] if got == want else [f"{where}: {got!r} != {want!r}"]
    return _array_differences(got, want, where, floor)


def _builtin_base(cls):
    """The nearest builtin exception class cls derives from."""
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def _array_differences(got, want, where, floor):
    if kind(got) != kind(want):
        return [f"{where}: {kind(got)} where the peer gave {kind(want)}"]
    if dtype_name(got) != dtype_name(want):
        return [f"{where}: dtype {dtype_name(got)} where the peer gave "
                f"{dtype_name(want)}"]
    g, w = as_numpy(got), as_numpy(want)
    if g.shape != w.shape:
        return [f"{where}: shape {g.shape} where the peer gave {w.shape}"]
    if w.size == 0:
        return []
    tol = TOLERANCE.get(dtype_name(want))
    if tol is None:  # integers and bools: exactly, wrapped as the peer's
        bad = np.count_nonzero(g != w)
        return [f"{where}: {bad} of {w.size} {dtype_name(want)} values "
                f"differ (first got {g[g != w][0]!r}, want "
                f"{w[g != w][0]!r})"] if bad else []
    tol = max(tol, floor)
    g, w = g.astype(np.complex128), w.astype(np.complex128)
    finite = np.isfinite(w)
    if not np.array_equal(np.isfinite(g), finite) and not np.array_equal(
            np.isnan(g), np.isnan(w)):
        return [f"{where}: non-finite values differ"]
    scale = max(float(np.max(np.abs(w[finite]), initial=0.0)), 1e-30)
    err = float(np.max(np.abs(g[finite] - w[finite]), initial=0.0))
    if err > tol * scale:
        return [f"{where}: values differ by {err:.3g} (scale {scale:.3g}, "
                f"{dtype_name(want)} tolerance {tol:g})"]
    return []


# ------------------------------------------------------------ random pieces

def values(rng, shape, dtype):
    """Small values of dtype (products of a few stay finite in float16;
    integers wrap where the peer's do)."""
    name = np.dtype(dtype).name if BF16 is None or dtype != BF16 else \
        "bfloat16"
    if name == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if name.startswith("uint"):
        return rng.integers(0, 6, shape).astype(dtype)
    if name.startswith("int"):
        return rng.integers(-5, 6, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if name.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x).astype(dtype)


def laid_out(rng, x):
    """x's values in a random memory layout: C, Fortran, a negative or a
    non-unit stride, or (on a size-1 axis made longer) a zero stride."""
    if x.ndim == 0:
        return x
    how = rng.choice(["C", "C", "F", "neg", "step", "T"])
    axis = int(rng.integers(x.ndim))
    if how == "F":
        return np.asfortranarray(x)
    if how == "neg":
        return np.flip(np.flip(x, axis).copy(), axis)
    if how == "step":
        return np.repeat(x, 2, axis=axis)[(slice(None),) * axis +
                                          (slice(None, None, 2),)]
    if how == "T" and x.ndim >= 2:
        return np.ascontiguousarray(x.T).T
    return x


def array(rng, shape, dtype, zero_stride=0.1):
    """A random array of shape and dtype in a random layout; sometimes a
    broadcast view (a zero stride) along one axis."""
    shape = tuple(shape)
    if shape and rng.random() < zero_stride:
        axis = int(rng.integers(len(shape)))
        base = values(rng, shape[:axis] + (1,) + shape[axis + 1:], dtype)
        return np.broadcast_to(base, shape)
    return laid_out(rng, values(rng, shape, dtype))


def pick(rng, items):
    return items[int(rng.integers(len(items)))]
