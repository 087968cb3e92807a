"""Arrays in and out: which library an input comes from, how to allocate
the result with that same library, and the few inputs DLPack cannot carry.

einc takes every tensor through DLPack, zero-copy. The result is allocated
by the inputs' own library (``numpy.empty`` for numpy, ``torch.empty`` on the
inputs' device for torch, ``xp.empty`` for array-API libraries) and passed to
the C library as the output, so numpy in gives numpy out with nothing copied.

JAX arrays are immutable, so a JAX result on the CPU is a numpy array
aligned as JAX wants it (64 bytes), filled by einc and handed to JAX with
``jax.dlpack.from_dlpack`` (no copy). CUDA tensors run on their library's
current stream (torch.cuda.current_stream(), CuPy's current stream), named
to ``__dlpack__(stream=...)`` as the DLPack protocol has consumers do, so
the producer orders its pending work before einc's and no synchronisation
is added; JAX has no stream to join, so einc waits for its work on JAX
arrays before returning them.

Three numpy cases need help before DLPack: non-arrays (lists, scalars) are
turned into arrays; mixed dtypes are promoted as numpy.einsum promotes them
(the C library wants one dtype); and ml_dtypes' bfloat16, which NumPy up to
2.4 refuses to export, travels as uint16 and is typed bfloat16 by the C
layer.
"""

from __future__ import annotations

import sys

from ._einc import EincError

# DLPack's type code for bfloat16 (kDLBfloat) and its width.
_BF16 = (4, 16)
_NO_RETYPE = (-1, 0)


def _numpy():
    import numpy

    return numpy


def _instance_test(module: str, cls: str):
    """A test of whether x is a module.cls that never imports the module:
    an array of a library not yet imported cannot exist."""

    def test(x) -> bool:
        mod = sys.modules.get(module)
        return mod is not None and isinstance(x, getattr(mod, cls))

    return test


_is_numpy = _instance_test("numpy", "ndarray")
_is_torch = _instance_test("torch", "Tensor")
_is_jax = _instance_test("jax", "Array")
_is_cupy = _instance_test("cupy", "ndarray")


# DLPack's device types of memory the CUDA backend runs on.
_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged


def cuda_stream(x):
    """None for a tensor in host memory; for a CUDA tensor, the stream
    einc queues its work on, numbered as DLPack's __dlpack__(stream=)
    numbers them: its library's current stream (torch, CuPy), else 1, the
    legacy default stream (0 is ambiguous in DLPack and never passed)."""
    device = getattr(x, "__dlpack_device__", None)
    if device is None or int(device()[0]) not in _CUDA_DEVICES:
        return None
    if _is_torch(x):
        import torch

        stream = torch.cuda.current_stream(x.device).cuda_stream
    elif _is_cupy(x):
        import cupy

        stream = cupy.cuda.get_current_stream().ptr
    else:
        stream = 1
    return stream or 1


def _is_bf16_numpy(x) -> bool:
    # dtype.name is slow (~1.5 us); numpy's own dtypes number below 256
    # (NPY_USERDEF), so only user dtypes such as ml_dtypes' need the name.
    return (_is_numpy(x) and x.dtype.num >= 256
            and x.dtype.name == "bfloat16")


def as_tensor(x, what="an input"):
    """x itself when DLPack can take it; a numpy array for anything else
    (lists, Python and numpy scalars). `what` names x in errors."""
    if hasattr(x, "__dlpack__") and not isinstance(x, (list, tuple)):
        return _torch_resolved(_torch_checked(x, what)) if _is_torch(x) else x
    a = _numpy().asarray(x)
    if a.dtype.kind in "OSUVMm":
        raise TypeError(f"einc takes numeric arrays (anything with "
                        f"__dlpack__), not {type(x).__name__}")
    return a


def _torch_checked(x, what):
    """torch tensors DLPack cannot carry, refused by einc with what they
    are and what einc takes (torch's own DLPack errors name neither the
    operand nor the way out)."""
    import torch

    if x.layout is not torch.strided:
        layout = str(x.layout).replace("torch.", "")
        raise EincError(f"{what} is a torch tensor of layout {layout}: einc "
                        f"takes strided (dense) tensors (torch.strided); "
                        f"call .to_dense() first")
    if x.is_meta:
        raise EincError(f"{what} is a torch tensor on the meta device "
                        f"(shape {tuple(x.shape)}, no data): einc computes "
                        f"on tensors in CPU or CUDA memory; for shapes alone "
                        f"use einc.check or einc.plan")
    return x


def _torch_resolved(x):
    """torch's negative and conjugate bits are lazy operations DLPack
    cannot carry (torch's export drops the negative bit without a word:
    z.conj().imag would read as z.imag): resolved into a new tensor."""
    if x.is_neg() or x.is_conj():
        return x.resolve_conj().resolve_neg()
    return x


def check_out(out):
    """out= must be written where its values live: a torch tensor with the
    negative or conjugate bit would take einc's values with the sign (or
    conjugate) flipped."""
    if _is_torch(out):
        _torch_checked(out, "out=")
    if _is_torch(out) and (out.is_neg() or out.is_conj()):
        raise ValueError("out= has torch's negative or conjugate bit set: "
                         "einc cannot write through it (call "
                         "resolve_neg()/resolve_conj() first)")
    return out


def stack(tensors):
    """einops' rule: a list of tensors is stacked along a new first axis."""
    first = tensors[0] if len(tensors) else None
    if _is_torch(first):
        import torch

        return torch.stack(list(tensors))
    if _is_jax(first):  # tracers too: jax.jit of einc.rearrange([x, y], ...)
        import jax.numpy as jnp

        return jnp.stack(list(tensors))
    np = _numpy()
    return np.stack([np.asarray(t) for t in tensors])


def _numpy_ready(tensors):
    """numpy inputs in one native-order dtype (numpy.einsum's promotion),
    and exportable: NumPy before 2.1 has no versioned DLPack and so
    refuses to export read-only arrays, which are then copied."""
    np = _numpy()
    dtypes = {t.dtype for t in tensors}
    target = dtypes.pop() if len(dtypes) == 1 else np.result_type(*tensors)
    if not target.isnative:
        target = target.newbyteorder("=")
    tensors = tuple(t if t.dtype == target else t.astype(target)
                    for t in tensors)
    if _numpy_exports_read_only():
        return tensors
    return tuple(t if t.flags.writeable else t.copy() for t in tensors)


_READ_ONLY_EXPORT = []


def _numpy_exports_read_only() -> bool:
    """Whether this NumPy exports read-only arrays (versioned DLPack, 2.1+)."""
    if not _READ_ONLY_EXPORT:
        np = _numpy()
        _READ_ONLY_EXPORT.append(
            np.lib.NumpyVersion(np.__version__) >= "2.1.0")
    return _READ_ONLY_EXPORT[0]


class Prepared:
    """Inputs ready for the C layer, with the allocator of the result.

    tensors: what goes through DLPack; retype: (code, bits) the C layer
    gives them, or (-1, 0); alloc(shape) makes the result; wrap(out) turns
    what the C layer wrote into what the caller gets back; stream: None,
    or the CUDA stream to run on (cuda_stream); sync: wait for the work
    before returning (JAX on CUDA).
    """

    __slots__ = ("tensors", "retype", "alloc", "wrap_out", "unwrap",
                 "stream", "sync")

    def __init__(self, tensors, retype, alloc, wrap_out, unwrap,
                 stream=None, sync=False):
        self.tensors = tensors
        self.retype = retype
        self.alloc = alloc
        self.wrap_out = wrap_out  # the caller's out= -> what DLPack takes
        self.unwrap = unwrap  # what the C layer wrote -> the result
        self.stream = stream
        self.sync = sync


def _identity(x):
    return x


def prepare(tensors) -> Prepared:
    tensors = tuple(as_tensor(t, f"operand {i + 1}")
                    for i, t in enumerate(tensors))
    if tensors and all(_is_numpy(t) for t in tensors):
        return _prepare_numpy(tensors)
    first = tensors[0] if tensors else None
    stream = cuda_stream(first) if first is not None else None
    if _is_jax(first):
        return _prepare_jax(tensors, stream)
    return Prepared(tensors, _NO_RETYPE, allocator_like(first), _identity,
                    _identity, stream)


def _jax_immutable(out):
    raise TypeError("JAX arrays are immutable: out= takes a writable array "
                    "(numpy, torch, CuPy)")


def _prepare_jax(tensors, stream) -> Prepared:
    """JAX arrays in, a JAX array out. On the CPU the result is a numpy
    array JAX can adopt without a copy; on a GPU a fresh JAX array that
    nothing else has seen, written once its zeros are ready, and waited
    for before it is returned (JAX orders nothing with outside streams)."""
    import jax

    first = tensors[0]
    if stream is not None:
        def alloc(shape):
            return jax.numpy.empty(shape, first.dtype,
                                   device=first.device).block_until_ready()

        return Prepared(tensors, _NO_RETYPE, alloc, _jax_immutable, _identity,
                        stream, sync=True)
    if _numpy().dtype(first.dtype).name == "bfloat16":
        return _jax_bf16(tensors, jax)

    def alloc(shape):
        return aligned_empty(shape, first.dtype)

    return Prepared(tensors, _NO_RETYPE, alloc, _jax_immutable,
                    lambda r: _jax_adopt(jax, r))


def _jax_adopt(jax, r):
    """JAX's array of einc's host result r, without a copy. An empty r
    has no data JAX could adopt (numpy's pointer for it need not be
    aligned, and there is nothing to share): JAX makes its own."""
    if r.size == 0:
        return jax.numpy.empty(r.shape, r.dtype)
    return jax.dlpack.from_dlpack(r, copy=False)


def _jax_bf16(tensors, jax) -> Prepared:
    """bfloat16 JAX arrays: the result is made as uint16 (numpy will not
    export bfloat16) typed bf16 in C, and given to JAX by device_put, which
    adopts an aligned host array without a copy."""
    bf16 = _numpy().dtype(tensors[0].dtype)

    def alloc(shape):
        return aligned_empty(shape, _numpy().uint16)

    return Prepared(tensors, _BF16, alloc, _jax_immutable,
                    lambda r: jax.device_put(r.view(bf16)))


def aligned_empty(shape, dtype, align=64):
    """numpy.empty whose data starts on an `align`-byte boundary (JAX
    copies host arrays that do not)."""
    np = _numpy()
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _prepare_numpy(tensors) -> Prepared:
    np = _numpy()
    if any(_is_bf16_numpy(t) for t in tensors):
        return _prepare_bf16(tensors)
    tensors = _numpy_ready(tensors)
    dtype = tensors[0].dtype
    return Prepared(tensors, _NO_RETYPE, lambda shape: np.empty(shape, dtype),
                    _identity, _identity)


def _prepare_bf16(tensors) -> Prepared:
    """ml_dtypes.bfloat16 arrays as their uint16 bits, typed bf16 in C."""
    np = _numpy()
    bf16 = next(t.dtype for t in tensors if _is_bf16_numpy(t))
    tensors = tuple(t if t.dtype == bf16 else t.astype(bf16) for t in tensors)
    views = tuple(t.view(np.uint16) for t in tensors)

    def alloc(shape):
        return np.empty(shape, np.uint16)

    def wrap_out(out):
        if not _is_bf16_numpy(out):
            raise TypeError("out= must be bfloat16 like the inputs")
        return out.view(np.uint16)

    def unwrap(result):
        return result.view(bf16)

    return Prepared(views, _BF16, alloc, wrap_out, unwrap)


def allocator_like(x):
    """shape -> an empty array of x's library, dtype and device."""
    if _is_numpy(x) or x is None:
        np = _numpy()
        dtype = x.dtype if x is not None else np.float32
        return lambda shape: np.empty(shape, dtype)
    if _is_torch(x):
        import torch

        return lambda shape: torch.empty(shape, dtype=x.dtype, device=x.device)
    namespace = getattr(x, "__array_namespace__", None)
    if namespace is not None:
        xp = namespace()
        return lambda shape: xp.empty(shape, dtype=x.dtype,
                                      device=getattr(x, "device", None))
    return lambda shape: _numpy_like(x, shape)


def _numpy_like(x, shape):
    """A numpy result for another DLPack producer on the CPU."""
    np = _numpy()
    try:
        dtype = np.from_dlpack(x).dtype
    except (BufferError, RuntimeError, TypeError) as e:
        raise TypeError(f"einc cannot allocate a result like "
                        f"{type(x).__name__}: pass out=") from e
    return np.empty(shape, dtype)


# fp8 (docs/design.md, "fp8 dtypes"): DLPack 1.1's codes, and the output
# dtypes an fp8 evaluation may have.
FP8_CODES = {"float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8)}
FP8_OUTPUTS = {"float32": "float32", "f32": "float32", "bfloat16": "bfloat16",
               "bf16": "bfloat16", "float16": "float16", "f16": "float16"}


def fp8_name(x):
    """'float8_e4m3fn' or 'float8_e5m2' for an fp8 array or tensor (numpy
    with ml_dtypes, torch, JAX), else None."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    if _is_numpy(x) and dt.num < 256:  # numpy's own dtypes: not fp8
        return None
    name = str(getattr(dt, "name", None) or dt).replace("torch.", "")
    return name if name in FP8_CODES else None


_TORCH_FP8_DLPACK = {}


def _torch_exports(dtype) -> bool:
    """Whether this torch's DLPack exports fp8 dtype (asked once)."""
    if dtype not in _TORCH_FP8_DLPACK:
        import torch

        try:
            torch.empty(1, dtype=dtype).__dlpack__()
            _TORCH_FP8_DLPACK[dtype] = True
        except (BufferError, RuntimeError, TypeError):
            _TORCH_FP8_DLPACK[dtype] = False
    return _TORCH_FP8_DLPACK[dtype]


def fp8_view(x):
    """(what goes through DLPack, (code, bits) to retype it or None): an
    fp8 array as itself when its library's DLPack carries fp8 (torch 2.x),
    else as its bytes (uint8, zero-copy) typed fp8 by the C layer (numpy
    refuses user dtypes; older torch refuses fp8)."""
    name = fp8_name(x)
    if name is None:
        return x, None
    if _is_torch(x):
        if _torch_exports(x.dtype):
            return x, None
        import torch

        return x.view(torch.uint8), FP8_CODES[name]
    if _is_numpy(x):
        return x.view(_numpy().uint8), FP8_CODES[name]
    return x, None


def fp8_output(first, name, out):
    """(alloc, out as DLPack takes it, (code, bits) of the output or
    (-1, 0), unwrap) for an fp8 evaluation's output of dtype `name`
    (float32, bfloat16, float16) in first's library."""
    np = _numpy()
    if _is_torch(first):
        import torch

        dtype = getattr(torch, name)
        return (lambda shape: torch.empty(shape, dtype=dtype,
                                          device=first.device),
                out, _NO_RETYPE, _identity)
    if _is_jax(first) and cuda_stream(first) is None:  # JAX on the CPU
        import jax
        import ml_dtypes

        if name != "bfloat16":
            return (lambda shape: aligned_empty(shape, name), out,
                    _NO_RETYPE, lambda r: _jax_adopt(jax, r))
        return (lambda shape: aligned_empty(shape, np.uint16), out, _BF16,
                lambda r: jax.device_put(r.view(ml_dtypes.bfloat16)))
    if name != "bfloat16":
        return lambda shape: np.empty(shape, name), out, _NO_RETYPE, _identity
    import ml_dtypes

    if out is not None:
        out = out.view(np.uint16)
    return (lambda shape: np.empty(shape, np.uint16), out, _BF16,
            lambda r: r.view(ml_dtypes.bfloat16))


def dtype_code(dtype) -> tuple:
    """(DLPack code, bits) for a dtype given as numpy/torch dtype or name."""
    name = _dtype_name(dtype)
    table = {
        "float16": (2, 16), "float32": (2, 32), "float64": (2, 64),
        "bfloat16": (4, 16), "int8": (0, 8), "int16": (0, 16),
        "int32": (0, 32), "int64": (0, 64), "uint8": (1, 8),
        "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
        "bool": (6, 8), "f16": (2, 16), "f32": (2, 32), "f64": (2, 64),
        "bf16": (4, 16), "i8": (0, 8), "i16": (0, 16), "i32": (0, 32),
        "i64": (0, 64), "u8": (1, 8), "u16": (1, 16), "u32": (1, 32),
        "u64": (1, 64), "complex64": (5, 64), "complex128": (5, 128),
        "c64": (5, 64), "c128": (5, 128),
        **FP8_CODES, "f8e4m3": (10, 8), "f8e5m2": (12, 8),
    }
    if name not in table:
        raise TypeError(f"einc has no dtype {dtype!r}")
    return table[name]


def _dtype_name(dtype) -> str:
    if isinstance(dtype, str):
        return dtype.replace("torch.", "")
    name = getattr(dtype, "name", None)  # numpy dtypes and scalar types
    if name is None and isinstance(dtype, type):
        name = _numpy().dtype(dtype).name
    return str(name if name is not None else dtype).replace("torch.", "")
