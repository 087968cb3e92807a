"""CUDA tensors of torch, CuPy and JAX: results, stream ordering, no host
copy, no added synchronisation. Each framework's tests skip unless it
imports and sees a GPU. On a GPU machine, with einc installed (pip
install .) beside whichever of torch, CuPy and JAX[cuda] it has, the one
command is

    python -m pytest -q -rs tests/python/test_cuda_frameworks.py

(-rs names what skipped and why; scripts/gpu_check.sh runs the same
command on the device machine, from a wheel carried in .device/wheels).

Without a GPU, the stream plumbing is still tested with a fake DLPack
producer whose tensors claim to be on CUDA: einc must name the stream it
will run on to every __dlpack__ call (inputs and out=), as the DLPack
protocol has consumers do, and fail with einc's device error, not a crash.
"""
import ctypes

import numpy as np
import pytest

import einc

CUDA_MISSING = einc.backend_available("cuda")  # None where a GPU runs


# ------------------------------------------------ without a GPU: plumbing

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCuda:
    """A float32 tensor that says it lives on CUDA device 0 (kDLCUDA); its
    data is host memory that nothing may touch. Records the keywords of
    every __dlpack__ call. legacy=True refuses max_version, as producers
    before DLPack 1.0 do."""

    def __init__(self, shape, legacy=False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(np.float32)
        self.legacy = legacy
        self.calls = []
        self._keep = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kw):
        if self.legacy and "max_version" in kw:
            raise TypeError("max_version")
        self.calls.append(dict(kw, stream=stream))
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        data = np.zeros(max(1, int(np.prod(self.shape))), np.float32)
        m = _DLManagedTensor(data.ctypes.data, _DLDevice(2, 0),
                             len(self.shape), _DLDataType(2, 32, 1),
                             shape, None, 0, None, None)
        self._keep += [shape, data, m]
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)


@pytest.mark.skipif(CUDA_MISSING is None, reason="a GPU would run the fake")
@pytest.mark.parametrize("legacy", [False, True])
def test_stream_named_to_every_dlpack_call(legacy):
    a, b = FakeCuda((4, 8), legacy), FakeCuda((8, 3), legacy)
    out = FakeCuda((4, 3), legacy)
    with pytest.raises(einc.EincError) as e:
        einc.einsum("i j, j k -> i k", a, b, out=out)
    assert e.value.code == "bad device", e.value
    for t in (a, b, out):
        # a producer of no known framework: the legacy default stream, 1
        assert [c["stream"] for c in t.calls] == [1], t.calls


@pytest.mark.skipif(CUDA_MISSING is None, reason="a GPU would run the fake")
def test_stream_through_compiled_plan():
    f = einc.compile("i j -> j i", (4, 8))
    a, out = FakeCuda((4, 8)), FakeCuda((8, 4))
    with pytest.raises(einc.EincError):
        f(a, out=out)
    assert [c["stream"] for c in a.calls + out.calls] == [1, 1]


@pytest.mark.skipif(CUDA_MISSING is None, reason="a GPU would run the fake")
def test_stream_named_by_the_gradient_interpreter():
    """_einc.grad_run (the C gradient interpreter torch's eager backward
    calls for CUDA tensors) names the stream it will queue on to every
    __dlpack__ call, then refuses the device: nothing written."""
    from einc import _einc

    x, out, dx = FakeCuda((4, 8)), FakeCuda((4,)), FakeCuda((4, 8))
    dout = FakeCuda((4,))
    with pytest.raises(einc.EincError) as e:
        _einc.grad_run(("fake",), "a b -> a", (x,), out, dout, dx, False,
                       "max", (), 0, False, 7)
    assert e.value.code == "bad device", e.value
    for t in (x, out, dout, dx):
        assert [c["stream"] for c in t.calls] == [7], t.calls


def test_host_arrays_get_no_stream():
    from einc._arrays import cuda_stream

    assert cuda_stream(np.ones(3)) is None
    assert cuda_stream(FakeCuda((2,))) == 1


# ------------------------------------------------------------ with a GPU

def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or CUDA_MISSING is not None:
        pytest.skip(f"no CUDA for torch and einc ({CUDA_MISSING})")
    return torch


def _no_copies(torch, fn):
    """fn() and the host-device copies the CUDA profiler saw it make."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = fn()
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events()
              if "Memcpy" in e.name and ("HtoD" in e.name or "DtoH" in e.name)]
    return result, copies


def test_torch_cuda_results():
    torch = _torch_cuda()
    a = torch.randn(64, 32, device="cuda")
    b = torch.randn(32, 48, device="cuda")
    got = einc.einsum("i j, j k -> i k", a, b)
    assert isinstance(got, torch.Tensor) and got.device == a.device
    torch.testing.assert_close(got, a @ b, rtol=1e-4, atol=1e-4)
    x = torch.randn(2, 3, 8, 6, device="cuda")
    torch.testing.assert_close(einc.rearrange(x, "b c h w -> b h w c"),
                               x.permute(0, 2, 3, 1))
    torch.testing.assert_close(einc.reduce(x, "b c h w -> b c", "max"),
                               x.amax(dim=(2, 3)))
    out = torch.empty(64, 48, device="cuda")
    assert einc.einsum("i j, j k -> i k", a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)


def test_torch_cuda_stream_ordering_and_no_sync():
    """Work queued on a non-default stream before the call is seen by it,
    and the call returns before that stream's work is done."""
    torch = _torch_cuda()
    s = torch.cuda.Stream()
    a = torch.ones(512, 512, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # keeps s busy for ~0.1 s
        a.mul_(3)  # queued behind the sleep
        got = einc.einsum("i j -> j", a)
        busy = not s.query()  # einc did not wait for s
    s.synchronize()
    assert busy
    torch.testing.assert_close(got, torch.full((512,), 1536.0, device="cuda"))


def test_torch_cuda_no_host_copy():
    torch = _torch_cuda()
    a = torch.randn(256, 256, device="cuda")
    einc.einsum("i j, j k -> i k", a, a)  # plan and kernels made
    got, copies = _no_copies(torch, lambda: einc.einsum("i j, j k -> i k",
                                                         a, a))
    assert got.is_cuda and not copies, copies


GRAD_CASES = [  # (expression, reduction, shapes, torch's own)
    ("b i j, b j k -> b i k", "sum", [(3, 40, 50), (3, 50, 30)],
     lambda a, b: a @ b),
    ("a b -> a", "max", [(60, 70)], lambda t: t.amax(1)),
    ("a b -> b", "prod", [(60, 70)], lambda t: t.prod(0)),
    ("a b -> a", "mean", [(60, 70)], lambda t: t.mean(1)),
    ("i i j, j k -> i k", "sum", [(40, 40, 30), (30, 20)],
     lambda a, b: torch_diag(a) @ b),
]


def torch_diag(a):
    return a.diagonal(dim1=0, dim2=1).T


def _grad_case(torch, case, dtype=None):
    expr, reduction, shapes, _ = case
    g = torch.Generator(device="cuda").manual_seed(0)
    xs = [torch.randn(s, generator=g, device="cuda", requires_grad=True,
                      dtype=dtype or torch.float64) for s in shapes]
    if reduction == "prod":  # magnitudes near 1, one exact zero
        with torch.no_grad():
            xs[0].copy_(0.5 + torch.rand(shapes[0], generator=g,
                                         device="cuda", dtype=xs[0].dtype))
            xs[0][3, 5] = 0
    if reduction == "sum":
        return xs, einc.einsum(expr, *xs)
    return xs, einc.reduce(xs[0], expr, reduction)


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c[1] + c[0])
def test_torch_cuda_backward_runs_in_c(case, monkeypatch, einc_kernels):
    """An eager backward of CUDA tensors runs the gradient program in the
    C library (one _einc.grad_run per input, on torch's current stream)
    and gives torch's own gradients in float64 (1e-12 of their norm)."""
    torch = _torch_cuda()
    from einc import _einc

    streams = []
    real = _einc.grad_run
    monkeypatch.setattr(_einc, "grad_run",
                        lambda *a: streams.append(a[11]) or real(*a))
    xs, out = _grad_case(torch, case)
    dout = torch.randn(out.shape, generator=torch.Generator(
        device="cuda").manual_seed(1), device="cuda", dtype=out.dtype)
    got = torch.autograd.grad(out, xs, dout)
    refs = [x.detach().requires_grad_() for x in xs]
    want = torch.autograd.grad(case[3](*refs), refs, dout)
    current = torch.cuda.current_stream().cuda_stream or 1
    assert streams == [current] * len(xs)
    for a, b in zip(got, want):
        assert a.is_cuda
        assert float((a - b).norm()) <= 1e-12 * max(float(b.norm()), 1.0)


def test_torch_cuda_backward_on_a_busy_stream(einc_kernels):
    """The backward queued on a side stream sees the work queued there
    before it (dout scaled behind a sleep) and does not wait for it."""
    torch = _torch_cuda()
    s = torch.cuda.Stream()
    x = torch.randn(256, 300, device="cuda", requires_grad=True,
                    generator=torch.Generator(device="cuda").manual_seed(2))
    dout = torch.ones(256, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        y = einc.reduce(x, "a b -> a", "max")
        torch.cuda._sleep(200_000_000)  # keeps s busy for ~0.1 s
        dout.mul_(3)  # queued behind the sleep
        (g,) = torch.autograd.grad(y, (x,), dout)
        busy = not s.query()
    s.synchronize()
    assert busy
    want = torch.zeros_like(x)
    want[torch.arange(256), x.argmax(1)] = 3
    torch.testing.assert_close(g, want)


def test_torch_cuda_backward_float32_and_double_backward(einc_kernels):
    """float32 within 1e-5 of torch; a double backward (create_graph:
    the lowered program, recorded) as torch's, on CUDA."""
    torch = _torch_cuda()
    case = GRAD_CASES[2]
    xs, out = _grad_case(torch, case, torch.float32)
    (g,) = torch.autograd.grad(out.sum(), xs, create_graph=True)
    (gg,) = torch.autograd.grad((g * g).sum(), xs)
    ref = xs[0].detach().double().requires_grad_()
    (rg,) = torch.autograd.grad(case[3](ref).sum(), (ref,),
                                create_graph=True)
    (rgg,) = torch.autograd.grad((rg * rg).sum(), (ref,))
    for a, b in ((g, rg), (gg, rgg)):
        assert float((a.double() - b).norm()) <= 1e-5 * float(b.norm())


def test_torch_cuda_custom_operator():
    """The operator einc::einsum on CUDA tensors, called as torch.compile
    and export record it, and through autograd (a max reduction needs
    grad: the operator's route), against torch in float64."""
    torch = _torch_cuda()
    a = torch.randn(3, 40, 24, device="cuda", dtype=torch.float64)
    b = torch.randn(3, 24, 16, device="cuda", dtype=torch.float64)
    got = torch.ops.einc.einsum([a, b], "b i j, b j k -> b i k", "sum",
                                False, "", [])
    assert got.is_cuda
    torch.testing.assert_close(got, a @ b)
    x = torch.randn(2, 8, 6, 5, device="cuda", requires_grad=True)
    y = einc.reduce(x, "b c h w -> b c", "max")
    (g,) = torch.autograd.grad(y.square().sum(), (x,))
    xr = x.detach().double().requires_grad_()
    yr = xr.amax(dim=(2, 3))
    (gr,) = torch.autograd.grad(yr.square().sum(), (xr,))
    assert g.is_cuda
    torch.testing.assert_close(y.double(), yr)
    torch.testing.assert_close(g.double(), gr, rtol=1e-5, atol=1e-6)


def test_torch_cuda_compiled_lowering():
    """einc under torch.compile(fullgraph=True) on CUDA tensors: the
    lowering to torch's own operations (Inductor, so Triton kernels on the
    GPU), forward and backward, against torch in float64."""
    torch = _torch_cuda()

    def f(x, w):
        h = einc.rearrange(x, "b t (h d) -> b h t d", h=2)
        s = einc.einsum("b h t d, b h u d -> b h t u", h, h)
        o = einc.rearrange(einc.einsum("b h t u, b h u d -> b h t d", s, h),
                           "b h t d -> b t (h d)")
        return einc.reduce(einc.einsum("b t c, c e -> b t e", o, w),
                           "b t e -> b e", "mean")

    def f_torch(x, w):
        b, t, c = x.shape
        h = x.reshape(b, t, 2, c // 2).permute(0, 2, 1, 3)
        s = torch.einsum("bhtd,bhud->bhtu", h, h)
        o = torch.einsum("bhtu,bhud->bhtd", s, h).permute(0, 2, 1, 3)
        return torch.einsum("btc,ce->bte", o.reshape(b, t, c), w).mean(1)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    x = torch.randn(2, 5, 8, device="cuda")
    w = torch.randn(8, 6, device="cuda", requires_grad=True)
    got = compiled(x, w)
    (gw,) = torch.autograd.grad(got.sum(), (w,))
    xr, wr = x.double(), w.detach().double().requires_grad_()
    want = f_torch(xr, wr)
    (rw,) = torch.autograd.grad(want.sum(), (wr,))
    assert got.is_cuda and gw.is_cuda
    for a, e in ((got, want), (gw, rw)):
        assert float((a.double() - e).norm() / e.norm()) < 1e-3


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # cupy raises its own CUDARuntimeError
        pytest.skip(f"no GPU for CuPy: {e}")
    if CUDA_MISSING is not None:
        pytest.skip(CUDA_MISSING)
    return cupy


def test_cupy_results_and_stream():
    cupy = _cupy()
    a = cupy.random.standard_normal((64, 32), dtype=cupy.float32)
    b = cupy.random.standard_normal((32, 16), dtype=cupy.float32)
    got = einc.einsum("i j, j k -> i k", a, b)
    assert isinstance(got, cupy.ndarray) and got.device == a.device
    cupy.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    with cupy.cuda.Stream(non_blocking=True) as s:
        x = cupy.ones((256, 256), cupy.float32)
        x *= 5  # queued on s
        got = einc.reduce(x, "i j -> j", "sum")
    s.synchronize()
    cupy.testing.assert_allclose(got, cupy.full((256,), 1280.0))


def test_jax_cuda_results():
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("no GPU for JAX")
    if CUDA_MISSING is not None:
        pytest.skip(CUDA_MISSING)
    a = jax.device_put(np.arange(12.0, dtype=np.float32).reshape(3, 4), gpu)
    got = einc.rearrange(a, "i j -> j i")
    assert isinstance(got, jax.Array) and got.devices() == {gpu}
    np.testing.assert_array_equal(np.asarray(got), np.asarray(a).T)
