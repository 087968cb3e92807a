"""Every error class raises einc.EincError with the CLI's caret text: the
C library's error catalogue (tests/error_cases.inc: expression, shapes,
options, status, spans and exact message) driven through einc.check, and
the errors only evaluation meets (dtypes, output, backend)."""
import ast
import re
import subprocess

import numpy as np
import pytest

import einc
from conftest import ROOT, einc_cli

STR = r'"(?:[^"\\]|\\.)*"'
ENTRY = re.compile(
    r"\{(" + STR + r"), (" + STR + r"), (" + STR + r"), EIN_ERR_(\w+), "
    r"(-?\d+), (-?\d+), (-?\d+), (-?\d+),\s*((?:" + STR + r"\s*)+)\}")


def c_string(lit):
    """A C string literal (or adjacent ones) as bytes."""
    return b"".join(ast.literal_eval("b" + part)
                    for part in re.findall(STR, lit))


# ein.h's statuses by name: "SIZE_MISMATCH" -> -3
STATUS = {m.group(1): int(m.group(2)) for m in re.finditer(
    r"EIN_ERR_(\w+) = (-\d+)", (ROOT / "include" / "ein.h").read_text())}


def catalogue():
    text = (ROOT / "tests" / "error_cases.inc").read_text()
    cases = []
    for m in ENTRY.finditer(text):
        expr, shapes, opts = (c_string(m.group(i)) for i in (1, 2, 3))
        cases.append(pytest.param(
            expr, shapes.decode(), opts.decode(), STATUS[m.group(4)],
            int(m.group(5)), int(m.group(6)),
            c_string(m.group(9)).decode("utf-8", "replace"),
            id=expr.decode("utf-8", "replace")[:40]))
    assert len(cases) >= 75, "the catalogue's format changed"
    return cases


def parse_shapes(text):
    return [() if s == "scalar" else tuple(int(d) for d in s.split("x"))
            for s in text.split()]


def parse_opts(text):
    kw = {"numpy": False}
    for item in filter(None, text.split(",")):
        if item == "numpy":
            kw["numpy"] = True
        else:
            name, value = item.split("=")
            if name in kw:
                return None  # a name given twice: not expressible in Python
            kw[name] = value if name == "reduce" else int(value)
    return kw


@pytest.mark.parametrize("expr,shapes,opts,status,off,length,message",
                         catalogue())
def test_catalogue(expr, shapes, opts, status, off, length, message):
    kw = parse_opts(opts)
    try:
        expr = expr.decode("utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8: a Python str cannot carry it")
    if kw is None:
        pytest.skip("an option given twice")
    with pytest.raises(einc.EincError) as info:
        einc.check(expr, *parse_shapes(shapes), **kw)
    e = info.value
    assert e.message == message
    assert e.status == status and e.code
    assert isinstance(e, RuntimeError) and isinstance(e, ValueError)
    assert str(e).startswith(message)
    if off >= 0:
        assert e.span == (off, length)
        # the expression, then a caret line under the culprit
        assert str(e).split("\n")[2].strip().startswith("^")
    else:
        assert e.span is None


def test_caret_text_is_the_clis():
    with pytest.raises(einc.EincError) as info:
        einc.check("b h i d, b h j d -> b h i j", (8, 16, 64, 32),
                   (8, 8, 64, 32))
    assert str(info.value) == (
        "axis 'h' is 8 in operand 2 but 16 in operand 1\n"
        "  b h i d, b h j d -> b h i j\n"
        "    ^        ^")
    e = info.value
    assert (e.code, e.span, e.spans) == ("size mismatch", (11, 1),
                                        [(11, 1), (2, 1)])
    assert e.expr == "b h i d, b h j d -> b h i j"


def cli_check_args(cli, expr, shapes, kw):
    """`einc check` with the catalogue entry's shapes and options."""
    args = [cli, "check"]
    for name, value in kw.items():
        if name == "numpy":
            args += ["--numpy"] if value else []
        elif name == "reduce":
            args += ["--reduce", value]
        else:
            args += ["-D", f"{name}={value}"]
    return args + ["--", expr] + shapes.split()


def test_caret_text_is_the_clis_over_the_catalogue():
    """str(EincError) is what `einc check` prints after "einc: error: "
    for every catalogue entry the CLI can express; the CLI may add its
    own "einc: hint:" lines after it. Entries the CLI refuses while
    reading its arguments (a negative size) never reach the library."""
    cli = einc_cli()
    if cli is None:
        pytest.skip("no einc CLI built in this checkout")
    compared = 0
    for case in catalogue():
        expr, shapes, opts = case.values[:3]
        kw = parse_opts(opts)
        if kw is None or b"\0" in expr:
            continue
        try:
            expr = expr.decode("utf-8")
        except UnicodeDecodeError:
            continue
        with pytest.raises(einc.EincError) as info:
            einc.check(expr, *parse_shapes(shapes), **kw)
        run = subprocess.run(cli_check_args(cli, expr, shapes, kw),
                             capture_output=True, text=True)
        assert run.returncode == 2, (expr, run.stderr)
        text = run.stderr.removeprefix("einc: error: ").rstrip("\n")
        if info.value.message not in text:
            continue  # the CLI's own argument error, before the library
        head, _, hint = text.partition("\neinc: hint: ")
        assert head == str(info.value), (expr, shapes, opts)
        compared += 1
    assert compared >= 75, compared


def test_evaluation_errors():
    a = np.ones((2, 3))
    with pytest.raises(einc.EincError, match="operand"):
        einc.einsum("a b, b c -> a c", a)
    with pytest.raises(einc.EincError) as info:
        einc.einsum("a b -> a", a, backend="nope")
    assert info.value.code == "invalid argument"
    with pytest.raises(einc.EincError) as info:
        einc.reduce(a, "a b -> a", "median")
    with pytest.raises(einc.EincError):
        einc.einsum("a b -> a", a, reduce="median")
    with pytest.raises(einc.EincError):
        einc.einsum("a b, b -> a", a, np.ones(3), reduce="max")
    with pytest.raises(einc.EincError):
        einc.reduce(np.ones((2, 3), np.complex128), "a b -> a", "max")
    with pytest.raises(TypeError):
        einc.einsum(a, a)
    with pytest.raises(TypeError):
        einc.rearrange(a, "a b -> a b c", c="3")


def test_device_errors():
    reason = einc.backend_available("cuda")
    if reason is None:
        pytest.skip("a GPU is here")
    assert isinstance(reason, str) and reason
    with pytest.raises(einc.EincError) as info:
        einc.einsum("a b -> b a", np.ones((2, 3)), backend="cuda")
    assert info.value.status == STATUS["DEVICE"]


def test_bad_input_never_crashes():
    r = np.random.default_rng(9)
    alphabet = list("ab c()->.,_1 2") + ["...", "->", " ", "x"]
    for _ in range(2000):
        expr = "".join(r.choice(alphabet, size=int(r.integers(0, 12))))
        try:
            einc.einsum(expr, np.ones((2, 2)))
        except einc.EincError:
            pass


class _CtypesProducer:
    """An array whose __dlpack__ is written in Python with ctypes: a legacy
    DLManagedTensor over a numpy array's memory whose deleter is a Python
    function (it runs Python code whenever einc lets the tensor go)."""

    def __init__(self, array, deleter_raises=False):
        import ctypes

        self.arr = np.ascontiguousarray(array, dtype=np.float64)
        self.shape, self.ndim, self.dtype = (self.arr.shape, self.arr.ndim,
                                             self.arr.dtype)
        self.released = 0
        self.deleter_raises = deleter_raises
        self._keep = []  # what the capsules point at lives as long as self

        class Device(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]

        class DType(ctypes.Structure):
            _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16)]

        class Tensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device", Device),
                        ("ndim", ctypes.c_int32), ("dtype", DType),
                        ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.POINTER(ctypes.c_int64)),
                        ("byte_offset", ctypes.c_uint64)]

        class Managed(ctypes.Structure):
            pass

        self._deleter_type = ctypes.CFUNCTYPE(None, ctypes.POINTER(Managed))
        Managed._fields_ = [("dl_tensor", Tensor),
                            ("manager_ctx", ctypes.c_void_p),
                            ("deleter", self._deleter_type)]
        self._types = (Device, DType, Managed)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def __dlpack__(self, stream=None):  # no max_version: the legacy form
        import ctypes

        device, dtype, managed = self._types
        shape = (ctypes.c_int64 * self.ndim)(*self.shape)
        m = managed()
        m.dl_tensor.data = self.arr.ctypes.data
        m.dl_tensor.device = device(1, 0)
        m.dl_tensor.ndim = self.ndim
        m.dl_tensor.dtype = dtype(2, 64, 1)  # kDLFloat, 64 bits
        m.dl_tensor.shape = shape

        def deleter(_):
            self.released += 1  # Python code, run by einc's release
            if self.deleter_raises:
                raise RuntimeError("the deleter failed")

        m.deleter = self._deleter_type(deleter)
        self._keep += [shape, m, m.deleter]
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(m), b"dltensor", None)


def test_python_deleter_keeps_einc_error():
    """A deleter written in Python runs while einc's size-mismatch error is
    pending: the caller gets that EincError, not a SystemError, and every
    tensor einc took is released."""
    a, b = _CtypesProducer(np.ones(3)), _CtypesProducer(np.ones(4))
    with pytest.raises(einc.EincError) as e:
        einc.einsum("i, i ->", a, b)
    assert e.type is einc.EincError and "axis 'i'" in str(e.value)
    assert a.released >= 1 and b.released >= 1
    ok = _CtypesProducer(np.arange(3.0))
    assert einc.einsum("i, i ->", ok, ok) == 5.0 and ok.released >= 2


def test_python_deleter_that_raises_is_unraisable():
    """A deleter's own exception has nobody to go to: the call's result (or
    its error) stands and Python reports the deleter's as unraisable."""
    seen = []
    hook, sys_mod = None, __import__("sys")
    hook = sys_mod.unraisablehook
    sys_mod.unraisablehook = lambda u: seen.append(u.exc_type)
    try:
        ok = _CtypesProducer(np.arange(3.0), deleter_raises=True)
        assert einc.einsum("i, i ->", ok, ok) == 5.0
        bad = _CtypesProducer(np.ones(4), deleter_raises=True)
        with pytest.raises(einc.EincError):
            einc.einsum("i, i ->", ok, bad)
    finally:
        sys_mod.unraisablehook = hook
    assert seen and all(t is RuntimeError for t in seen), seen
